// Migration as pure functions (SPEC §4 Migrate, Reconciler): what a
// revision's payloads look like in the tiers, where each affinity unit
// should be for a target residency, and what the next bounded round does.
// The revision actor (operation_rounds.cpp) carries the rounds out.
//
// Rules kept here, so the executor cannot break them:
//  - a unit (a tensor or file: the members sharing an affinity id; a payload
//    without one is a unit of its own) is never split across tiers;
//  - a HOT replica is dropped only once its unit's COLD replicas are all
//    readable and no lease is live; a promotion keeps the COLD replicas (a
//    durable copy that makes the next demotion a mere drop);
//  - the manifest always keeps a HOT replica;
//  - a round takes at most `round_members` members and `round_bytes` bytes,
//    but always at least one whole unit.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "core/messages.hpp"

namespace weightd::actors {

struct migration_limits {
  uint32_t round_members = 64;
  uint64_t round_bytes = 1ull << 30;
  // Bytes per second the rounds of one operation copy, on average (0 = no
  // limit): the next round waits until the last one's bytes fit the rate,
  // so a background migration leaves the disk to readers.
  uint64_t rate_bytes = 0;
};

/// One affinity unit of a revision's payloads.
struct payload_unit {
  std::string id;  // the affinity id, or "key:<key>" for a payload of its own
  uint64_t bytes = 0;
  std::vector<events::object_record> members;  // by key
  bool all_hot() const;
  bool any_hot() const;
  bool all_cold() const;
};

/// The payload units of a group (the manifest excluded), sorted by id.
std::vector<payload_unit> units_of(const group_snapshot& group, const std::string& manifest_key);

/// The affinity id of a payload as units_of() names it.
std::string unit_id_of(const events::object_record& payload);

/// What the tiers hold of a revision (SPEC §4 `observed_hot_ratio`).
struct residency_observation {
  events::v1::Residency residency = events::v1::RESIDENCY_ABSENT;  // over readable payloads
  double hot_ratio = 0;          // bytes with a readable HOT replica / payload bytes
  uint64_t hot_bytes = 0;
  std::string unreadable;        // the first member without a readable replica, "" = none
};
residency_observation observe(const group_snapshot& group, const events::revision_record& r);

/// The units that end HOT for `target` (HOT: all; COLD: none; MIXED: the
/// planner's choice for `ratio`).
result<std::set<std::string>> hot_units_for(events::v1::Residency target, double ratio,
                                            const std::vector<payload_unit>& units);

/// The work of one unit in a round.
struct unit_work {
  std::string unit;
  uint64_t bytes = 0;
  std::vector<std::string> to_hot;    // members to copy into HOT
  std::vector<std::string> to_cold;   // members to copy into COLD (fsynced)
  std::vector<std::string> drop_hot;  // then: HOT replicas to drop
};

struct round_plan {
  std::vector<unit_work> work;  // in unit order from the cursor; empty = nothing doable now
  uint64_t units_at_target = 0, bytes_at_target = 0;
  uint64_t total_units = 0, total_bytes = 0;
  bool complete = false;  // every unit at its tier and the manifest HOT
  std::string paused;     // a member has no readable replica: it names the member
  std::string waiting;    // units held back (live leases keep their HOT replicas)
  std::string cursor;     // the last unit of this round's work
};

/// The next round of `op` on revision `r`, from the group as the store has it.
round_plan plan_round(const events::revision_record& r, const events::operation_record& op,
                      const group_snapshot& group, bool leases_live, const migration_limits& limits);

}  // namespace weightd::actors
