// The migration executor: carries out a revision's active operation in
// bounded rounds (migration_plan.hpp decides each round). A round runs as one
// multi-step command of the revision's queue, so a CancelOperation, a lease
// or a policy change that arrives meanwhile is taken at the round's end — a
// unit boundary: every unit is whole and readable.
//
// One round: the group as the store has it -> plan -> copies (on the store's
// I/O workers; COLD copies fsynced, file and directory, before their replica
// event) -> HOT drops of the units whose COLD copies are all readable -> the
// group again -> one progress event if anything changed (an unchanged round
// writes none), or the finish with the observed residency. A failed copy
// keeps the operation RUNNING with the error in its message and retries with
// backoff (1 s doubling to 60 s); a member without a readable replica pauses
// it, naming the member.
#pragma once

#include "actors/revision_state.hpp"

namespace weightd::actors {

/// Runs the next round of the revision's running operation (nothing when it
/// has none); then `finished`. Schedules the next round itself: at once
/// after progress, after the backoff after a failure, at the next reconciler
/// round while it waits (leases, an unreadable member).
void run_operation_round(rev_pointer self, std::function<void()> finished);

/// Looks at the real replicas (replica_observation.hpp): READY <-> DEGRADED,
/// a REPAIRING operation when a HOT replica vanished, the residency; persists
/// what changed (nothing when the record matches), then `then`.
void observe_replicas(rev_pointer self, std::function<void()> then);

/// CancelOperation: ends the running operation as CANCELLED and records the
/// residency its whole units give; replies with the operation.
void cancel_running_operation(rev_pointer self, uint64_t operation_id,
                              caf::typed_response_promise<events::operation_record> rp,
                              std::function<void()> finished);

}  // namespace weightd::actors
