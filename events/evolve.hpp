// evolve(state, event): the one definition of what an event means.
//
// Pure and deterministic: the result depends only on the state and the
// envelope (its timestamp included), never on the clock or the environment.
// It updates the state in place so that folding a million events does not
// copy the state a million times; copy the state first where you need both.
#pragma once

#include "events/events.pb.h"
#include "events/state.hpp"
#include "events/status.hpp"

namespace weightd::events {

/// Applies one event. An event that cannot apply to this state (out of order,
/// unknown object, duplicate put) is refused with an error naming its seq and
/// leaves the state unchanged: live code never produces such an event, so
/// replay reports it as corruption or a bug rather than folding nonsense.
status evolve(store_state& state, const v1::Envelope& event);

/// The SPEC §3 and §4 invariants of what `event` touched (its revision, its
/// lineage) in the state it was just folded into; the first violation, named.
/// Recovery, `journal verify` and the tests run it after every event.
status check_touched(const store_state& state, const v1::Envelope& event);

/// True for object_put, replica_added, replica_dropped and object_removed.
bool is_object_event(const v1::Envelope& event);

/// The stream `event` belongs in, from its payload: its revision's, its
/// object's, or the system stream. Replay refuses an event stored elsewhere.
std::string stream_of(const v1::Envelope& event);

/// The tenant whose data an event is about ("" for a system event): what
/// History and Watch filter on (SPEC §9).
std::string tenant_of(const v1::Envelope& event);

/// Applies one object event to an object index (the part of evolve() the
/// object-store actor runs live). Refusals as for evolve().
status evolve_objects(object_index& index, const v1::Envelope& event);

}  // namespace weightd::events
