// The one way an actor's durable state changes: persist, then apply what
// the journal committed. The revision, the lineage and the object store all
// change through persist_and_apply(), with one error policy:
//
//  1. The events go to the journal as ONE atomic batch (one fsync, shared
//     with whatever else the writer groups into the same commit).
//  2. The append failed (DURABILITY_FAILED, a timeout): nothing changed in
//     memory, `done` gets that status. The caller answers its client with
//     it and retries nothing itself.
//  3. The append committed: the *committed* envelopes (with the global_seq
//     the writer gave them) are folded in order by the actor's `fold` — the
//     same evolve functions replay runs — which also checks the invariants
//     the event touches. Then `after` runs once for the batch (tell the
//     registry, schedule what the new state needs), and `done` gets ok.
//  4. A fold that refuses an event its own journal committed means memory
//     and journal disagree: the rest of the batch is not folded, one error
//     line names the event, `after` still runs for what was folded, and
//     `done` gets INTERNAL. (A restart replays the journal and stops at the
//     same event.)
//
// Each actor says how it folds by a function `journaled binding(Self)`
// next to its state, found by argument-dependent lookup.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "actors/actors.hpp"
#include "actors/errors.hpp"

namespace weightd::actors {

/// How one actor persists and folds.
struct journaled {
  journal_actor journal;
  caf::timespan timeout;
  std::string owner;  // names the actor in the error line ("revision t/ns/r/1/2")
  /// Folds one committed envelope into the actor's state; not ok = refused.
  std::function<status(const events::v1::Envelope&)> fold;
  /// Runs once after a committed batch was folded (may be empty).
  std::function<void(const std::vector<events::v1::Envelope>&)> after = {};
};

/// Steps 3 and 4 above: folds `committed` through `how`, then `how.after`.
status apply_committed(const journaled& how, const std::vector<events::v1::Envelope>& committed);

/// Persists `events`, then applies the committed envelopes (the contract
/// above); `done` runs on the actor, after both or after the failure.
template <class Self>
void persist_and_apply(Self self, std::vector<events::v1::Envelope> events,
                       std::function<void(status)> done) {
  auto how = binding(self);
  auto journal = how.journal;
  auto timeout = how.timeout;
  self->request(journal, timeout, append_atom::value, event_batch{std::move(events)})
      .then([how = std::move(how), done](event_batch& committed) {
              done(apply_committed(how, committed.events));
            },
            [done](caf::error& err) { done(to_status(err)); });
}

}  // namespace weightd::actors
