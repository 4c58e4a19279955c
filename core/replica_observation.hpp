// Observation of real replicas (SPEC §4 Reconciler): what a look at the
// tiers decides for a visible revision, as a pure function of its record and
// the group as the object store has it.
//
//  - availability: READY when the manifest and every payload have a readable
//    replica, DEGRADED otherwise (a payload missing from the store counts as
//    unreadable); an unchanged availability writes no event;
//  - repair: a HOT replica that vanished (lost at a restart, dropped CORRUPT
//    by the scrub) while a COLD one remains starts a REPAIRING operation back
//    to the residency the record has: every unit HOT for HOT, the recorded
//    hot ratio for MIXED, and always the manifest HOT. It needs every member
//    readable (a DEGRADED revision has nothing to repair from);
//  - residency: recomputed over the readable payloads when no operation
//    runs and nothing is repaired (an operation records it when it ends).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/messages.hpp"
#include "core/revision_decide.hpp"

namespace weightd::actors {

struct observation_decision {
  std::vector<events::v1::Envelope> events;  // empty: the record matches the tiers
  std::string repair;  // why a REPAIRING operation starts, "" = none
};

/// ResidencyObserved when the readable payloads give another residency or
/// hot ratio than the record has (none for ABSENT: decide_observation records
/// that, after DEGRADED).
std::optional<events::v1::Envelope> residency_change(const events::revision_record& r,
                                                     const group_snapshot& group, int64_t now_ms);

observation_decision decide_observation(const events::revision_record& r,
                                        const group_snapshot& group, const decide_context& ctx);

}  // namespace weightd::actors
