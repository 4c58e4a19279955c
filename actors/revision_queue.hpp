// The revision's command queue (command_queue.hpp) and how it persists
// (journaled.hpp).
//
// Commands run one after another, in arrival order. A *decision* command
// (BeginImport, UpdatePolicy, Migrate, the lease commands) only decides and
// persists: every decision command queued while the previous batch was in
// flight is decided in order against a scratch copy of the record — each
// seeing the events of those before it — and their events go to the journal
// as ONE atomic batch: one fsync for many readers taking leases on a hot
// model, with exactly the outcome of running them serially. Replies wait for
// the batch; if it fails, nothing applied and each command gets the failure.
// A *multi-step* command (CommitImport, AbortImport, RemoveRevision,
// CancelOperation, the reconcile tick with its operation round) talks to the
// object store too; it runs alone and says when it is finished. Meanwhile the
// actor keeps answering reads (GetRevision, GetOperation) from its durable
// record, and queues commands.
#pragma once

#include <spdlog/spdlog.h>

#include "actors/errors.hpp"
#include "actors/journaled.hpp"
#include "actors/revision_state.hpp"

namespace weightd::actors {

/// The decide context of the revision now (clock, id allocators, defaults).
decide_context decide_context_of(rev_pointer self);

/// How a revision persists and folds (journaled.hpp): its committed events
/// through evolve_revisions and the SPEC §3 invariants; after each batch it
/// tells the registry and schedules what the new record needs (a delete
/// whose drain ended, a round of a started operation, or of one that waited
/// for a lease that just ended).
journaled binding(rev_pointer self);

/// The revision's batch runner: the decision commands at the front of its
/// queue, decided in order against one scratch fold, persisted together.
void run_decisions(rev_pointer self, std::function<std::optional<decision_command>()> next,
                   std::function<void()> finished);

/// Queues a multi-step command.
void enqueue_multi_step(rev_pointer self, multi_step_command run);

/// Queues a decision command: `decide` against the scratch record, then
/// `reply` computed from the scratch fold once the decision's events are in.
template <class Reply>
void enqueue_decision(
    rev_pointer self, caf::typed_response_promise<Reply> rp,
    std::function<result<decision>(const events::revision_record*, const events::revision_index&,
                                   const decide_context&)>
        decide,
    std::function<Reply(const events::revision_index&)> reply) {
  auto id = self->state.id;
  self->state.queue.push_decision(decision_command{
      [=](events::revision_index& scratch, const decide_context& ctx,
          bool after_pending) mutable -> decided_command {
        auto decided = decide(scratch.find(id), scratch, ctx);
        if (!decided) {
          // An error decided on top of pending events is only as good as they are.
          auto err = decided.error();
          return {{}, [=](const status& batch) mutable {
                    rp.deliver(to_error(after_pending && !batch.ok() ? batch : err));
                  }};
        }
        for (const auto& e : decided->events)
          if (events::is_lineage_event(e)) {
            continue;  // an upsert's claim event, along: its lineage folds it
          } else if (auto st = events::evolve_revisions(scratch, e); !st.ok()) {
            spdlog::error("a decision does not fold: {}", st.to_string());
            return {{}, [=](const status&) mutable { rp.deliver(to_error(st)); }};
          }
        auto value = reply(scratch);
        return {std::move(decided->events), [=](const status& batch) mutable {
                  if (batch.ok()) rp.deliver(value);
                  else rp.deliver(to_error(batch));
                }};
      }});
}

}  // namespace weightd::actors
