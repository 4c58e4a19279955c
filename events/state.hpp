// The state weightd folds its journal into. Everything here is derived from
// events only (evolve.hpp): no wall clock, no files, no randomness — so the
// live daemon, a restart and `weightctl journal replay` agree by construction.
//
// In-memory-only facts (object access times for LRU, short object read
// leases) deliberately live elsewhere: they are not events (SPEC §2).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "events/events.pb.h"
#include "events/lineage_fold.hpp"
#include "events/revision_fold.hpp"

namespace weightd::events {

/// An object's address in the key space: tenants never see each other's keys.
struct object_ref {
  std::string tenant;
  std::string key;
  friend bool operator<(const object_ref& a, const object_ref& b) {
    return std::tie(a.tenant, a.key) < std::tie(b.tenant, b.key);
  }
  friend bool operator==(const object_ref& a, const object_ref& b) {
    return a.tenant == b.tenant && a.key == b.key;
  }
};

/// Metadata of one object of the key space (SPEC §2).
struct object_record {
  object_ref ref;
  v1::DataType data_type = v1::DATA_TYPE_GENERAL;
  std::string group_id;     // "" = ungrouped
  std::string affinity_id;  // "" = a unit of its own
  uint64_t size = 0;
  v1::ChecksumAlgorithm checksum_algorithm = v1::CHECKSUM_XXH3_64;
  std::string checksum;
  std::string sha256;
  bool hard_pin = false;
  int64_t created_at_ms = 0;
  bool hot = false;   // has a complete HOT replica
  bool cold = false;  // has a complete, fsynced COLD replica

  bool readable() const { return hot || cold; }
  friend bool operator==(const object_record& a, const object_record& b);

  /// The metadata an ObjectPut event and an ObjectState snapshot entry both
  /// carry (same field names); time and replicas come from each's own fields.
  template <class Proto>
  static object_record metadata_of(const Proto& p) {
    object_record o;
    o.ref = {p.tenant(), p.key()};
    o.data_type = p.data_type();
    o.group_id = p.group_id();
    o.affinity_id = p.affinity_id();
    o.size = p.size();
    o.checksum_algorithm = p.checksum_algorithm();
    o.checksum = p.checksum();
    o.sha256 = p.sha256();
    o.hard_pin = p.hard_pin();
    return o;
  }
};

/// A payload group's address: (tenant, group_id).
struct group_ref {
  std::string tenant;
  std::string group_id;
  friend bool operator<(const group_ref& a, const group_ref& b) {
    return std::tie(a.tenant, a.group_id) < std::tie(b.tenant, b.group_id);
  }
  friend bool operator==(const group_ref& a, const group_ref& b) {
    return a.tenant == b.tenant && a.group_id == b.group_id;
  }
};

/// The object key space: the fold of object events (the object-store actor
/// owns the live copy).
struct object_index {
  std::map<object_ref, object_record> objects;
  std::map<group_ref, std::set<std::string>> groups;  // members' keys, derived
  uint64_t hot_bytes = 0;   // sum of sizes of objects with a HOT replica
  uint64_t cold_bytes = 0;  // sum of sizes of objects with a COLD replica

  const object_record* find(const object_ref& ref) const {
    auto it = objects.find(ref);
    return it == objects.end() ? nullptr : &it->second;
  }
  friend bool operator==(const object_index& a, const object_index& b);
  friend bool operator!=(const object_index& a, const object_index& b) { return !(a == b); }
};

/// The whole folded state of a journal.
struct store_state {
  uint64_t applied_seq = 0;  // global_seq of the last folded event
  uint64_t writer_id = 0;    // incarnation of the last writer seen
  uint64_t writers_started = 0;
  int64_t last_event_ms = 0; // timestamp of the last folded event
  uint64_t epoch = 0;        // the highest epoch folded (SPEC §11; 0 = the first leader's)
  std::string leader;        // the member of the last leadership_taken ("" = the first leader)
  object_index objects;
  revision_index revisions;
  lineage_index lineages;

  friend bool operator==(const store_state& a, const store_state& b);
  friend bool operator!=(const store_state& a, const store_state& b) { return !(a == b); }
};

}  // namespace weightd::events
