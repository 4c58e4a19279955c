// The MIXED planner (SPEC §4): which affinity units of a revision stay HOT so
// that the HOT bytes come closest to total x ratio. A pure function.
//
// An affinity unit (a tensor or file) is never split across tiers, so the
// planner chooses whole units. The rule, step by step:
//
//  1. Validate: ratio must be within (0, 1) (NaN too is INVALID_ARGUMENT,
//     naming mixed_hot_ratio); fewer than 2 units is POLICY_UNSATISFIABLE
//     (MIXED needs one unit in each tier); a repeated id, or bytes adding up
//     past 2^64, is INVALID_ARGUMENT.
//  2. target = total x ratio as a double; the distance of a plan is
//     |hot - target| as a double. Hot byte sums are exact uint64 arithmetic and
//     are converted to double once per distance, so distances are exact for
//     totals below 2^53 bytes (9 PB) and IEEE-deterministic beyond.
//  3. Sort the units by bytes descending, ties by id ascending. Ids are unique,
//     so this order, and everything after it, does not depend on the input order.
//  4. Greedy: the first (largest) unit is HOT; each later unit, in that order,
//     becomes HOT when it brings the distance strictly down. A 0-byte unit never
//     does, so it stays COLD unless a later step moves it.
//  5. At least one HOT and one COLD: greedy always keeps the first unit HOT; if
//     it made every unit HOT, one smallest unit (the smallest id among equals)
//     goes COLD. That is the best single removal (greedy added the smallest unit
//     only because the total was then still more than half its size under the
//     target, so any larger removal lands farther below it), and it is the remove
//     move step 6 would rank first.
//  6. Improve: up to 8 passes. Each pass ranks every single move, that is adding
//     one COLD unit, removing one HOT unit, or swapping one HOT unit for one
//     COLD unit, keeping only moves that leave at least one unit in each tier.
//     The best move has the smallest resulting distance; ties go by kind
//     (add < remove < swap), then the removed id, then the added id. It is
//     applied only when it is strictly closer than the current plan; when none
//     is, the planner stops early. A pass costs O(hot x cold).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "events/status.hpp"

namespace weightd::actors {

struct planner_unit {
  std::string id;  // the affinity id (unique within one call)
  uint64_t bytes = 0;
};

struct mixed_plan {
  std::vector<std::string> hot;  // ids of the units kept HOT, sorted by id
  uint64_t hot_bytes = 0;
  uint64_t total_bytes = 0;
};

/// The MIXED planner (SPEC §4): which affinity units stay HOT so that hot bytes come closest to total x ratio.
/// Deterministic and independent of the input order. Fewer than 2 units -> POLICY_UNSATISFIABLE;
/// ratio outside (0,1) -> INVALID_ARGUMENT naming mixed_hot_ratio; duplicate ids -> INVALID_ARGUMENT.
result<mixed_plan> plan_mixed(std::vector<planner_unit> units, double ratio);

}  // namespace weightd::actors
