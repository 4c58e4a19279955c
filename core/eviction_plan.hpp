// Which HOT replicas to evict (SPEC §2): least recently accessed first,
// skipping hard-pinned, leased, managed and busy objects. A pure function.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "events/state.hpp"

namespace weightd::actors {

struct eviction_candidates {
  const events::object_index& index;
  const std::map<events::object_ref, int64_t>& last_access_ms;   // missing = created_at
  const std::map<events::object_ref, int64_t>& read_lease_expiry_ms;
  const std::set<events::object_ref>& busy;                       // mutation in flight
  std::function<bool(const events::object_record&)> is_managed;  // the guard
  int64_t now_ms = 0;
};

struct eviction_plan {
  std::vector<events::object_ref> victims;  // in eviction order
  uint64_t bytes = 0;                        // HOT bytes they free
  uint64_t skipped_managed = 0;
  uint64_t skipped_pinned = 0;
  uint64_t skipped_leased = 0;
};

/// Picks victims until they free at least `bytes_to_free` HOT bytes (or all
/// evictable ones when that is impossible: the caller compares plan.bytes).
eviction_plan plan_eviction(const eviction_candidates& c, uint64_t bytes_to_free);

}  // namespace weightd::actors
