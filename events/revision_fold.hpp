// The revision record (SPEC §3) as the journal folds it. Availability,
// residency and the active operation are three independent dimensions;
// metadata_generation counts mutations of the record (+1 for each event that
// changes it; leases, access times and operation progress do not).
#pragma once

#include <cstdint>
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "events/events.pb.h"
#include "events/identity.hpp"
#include "events/status.hpp"

namespace weightd::events {

struct policy {
  v1::Residency preferred = v1::RESIDENCY_HOT;
  double mixed_hot_ratio = 0.5;
  v1::MigrationMode mode = v1::MIGRATION_AUTO;
  static policy from_proto(const v1::Policy& p);
  v1::Policy to_proto() const;
  friend bool operator==(const policy& a, const policy& b) {
    return a.preferred == b.preferred && a.mixed_hot_ratio == b.mixed_hot_ratio && a.mode == b.mode;
  }
  friend bool operator!=(const policy& a, const policy& b) { return !(a == b); }
};

struct manifest_ref {
  std::string manifest_key;
  std::string manifest_sha256;
  std::string payload_group_id;
  std::string payload_keys_sha256;
  uint64_t payload_count = 0;
  uint64_t logical_bytes = 0;
  static manifest_ref from_proto(const v1::ManifestRef& m);
  v1::ManifestRef to_proto() const;
  friend bool operator==(const manifest_ref& a, const manifest_ref& b);
  friend bool operator!=(const manifest_ref& a, const manifest_ref& b) { return !(a == b); }
};

enum class operation_state : uint8_t { running, completed, failed, cancelled };

struct operation_record {
  uint64_t id = 0;
  revision_key revision;
  v1::OperationKind kind = v1::MIGRATING;
  v1::Residency target = v1::RESIDENCY_HOT;
  double target_hot_ratio = 0;
  uint64_t processed_units = 0, total_units = 0;
  uint64_t processed_bytes = 0, total_bytes = 0;
  std::string cursor;
  operation_state state = operation_state::running;
  std::string message;
  int64_t started_at_ms = 0, updated_at_ms = 0;
  bool automatic = false;  // the system started it: neither its start nor its end changes the generation
  std::string reason;      // why the system started it
  friend bool operator==(const operation_record& a, const operation_record& b);
};

/// A read lease on a revision (SPEC §4): live from its grant until its
/// release, expiry or revocation event. Past expiry_ms it protects nothing,
/// even before the reconciler's expiry event is written.
struct lease_record {
  uint64_t id = 0;
  std::string holder;
  int64_t expiry_ms = 0;
  int64_t granted_at_ms = 0;
  bool live_at(int64_t now_ms) const { return expiry_ms > now_ms; }
  friend bool operator==(const lease_record& a, const lease_record& b) {
    return a.id == b.id && a.holder == b.holder && a.expiry_ms == b.expiry_ms &&
           a.granted_at_ms == b.granted_at_ms;
  }
};

struct revision_record {
  revision_key id;
  v1::Availability availability = v1::IMPORTING;
  v1::Residency residency = v1::RESIDENCY_UNKNOWN;
  events::policy policy;
  uint64_t metadata_generation = 0;
  // From BeginImport:
  std::string payload_group_id;
  uint64_t expected_payload_count = 0;
  uint64_t expected_logical_bytes = 0;
  uint64_t affinity_count = 0;  // 0 = not given
  // From CommitImport:
  manifest_ref manifest;
  std::vector<std::string> payload_keys;
  uint64_t affinity_units = 0;  // distinct affinity units among the payloads
  double observed_hot_ratio = 0;
  uint64_t operation_id = 0;  // 0 = none
  int64_t drain_deadline_ms = 0;  // > 0: a removal waits for the leases to drain
  std::string retired_by;  // the upsert claim retiring it ("" = none): a drain without deadline
  std::map<uint64_t, lease_record> leases;  // by id; see lease_record
  int64_t created_at_ms = 0, updated_at_ms = 0, last_accessed_at_ms = 0;
  std::string last_request_digest;  // of the request behind the last event

  bool visible() const {
    return availability == v1::READY || availability == v1::DEGRADED;
  }
  /// No new leases: a removal or a retirement waits for the leases to end.
  bool draining() const { return (drain_deadline_ms > 0 || !retired_by.empty()) && visible(); }
  bool retiring() const { return !retired_by.empty() && visible(); }
  friend bool operator==(const revision_record& a, const revision_record& b);
  friend bool operator!=(const revision_record& a, const revision_record& b) { return !(a == b); }
};

/// All revisions and operations: the part of the state the lifecycle owns.
struct revision_index {
  std::map<revision_key, revision_record> revisions;  // DELETED ones stay as tombstones
  std::map<uint64_t, operation_record> operations;    // terminal ones stay queryable
  std::map<std::string, revision_key> groups;         // payload_group_id -> owner (not DELETED)
  uint64_t last_operation_id = 0;                      // the highest id used
  uint64_t last_lease_id = 0;                          // the highest lease id granted

  const revision_record* find(const revision_key& id) const {
    auto it = revisions.find(id);
    return it == revisions.end() ? nullptr : &it->second;
  }
  friend bool operator==(const revision_index& a, const revision_index& b);
  friend bool operator!=(const revision_index& a, const revision_index& b) { return !(a == b); }
};

/// True for events that live in a revision stream (revision, lease, operation).
bool is_revision_event(const v1::Envelope& e);

/// The revision an event concerns (every revision event carries its id).
revision_key revision_of(const v1::Envelope& e);

/// Applies one revision event; refuses (with the seq) what cannot apply.
status evolve_revisions(revision_index& index, const v1::Envelope& e);

/// SPEC §3 invariants of one record; the first violation, named.
status check_invariants(const revision_record& r, const revision_index& index);

}  // namespace weightd::events
