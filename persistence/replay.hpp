// The fold hook: the state a journal describes, up to a point in its history.
// Live recovery, `weightctl journal replay` and `verify` all go through here,
// through the same evolve() — one definition of what an event means.
#pragma once

#include <functional>

#include "events/state.hpp"
#include "persistence/journal_backend.hpp"

namespace weightd::persistence {

struct fold_options {
  uint64_t until_seq = kMaxSeq;       // fold events with seq <= until_seq
  int64_t until_ms = kMaxTime;        // ... and timestamp_ms <= until_ms
  /// Start from the newest valid snapshot within the bounds (else from seq 1).
  /// `weightctl journal verify` turns it off to fold every event.
  bool use_snapshots = true;
  /// Called after each applied event (e.g. an invariant check); a non-ok
  /// status stops the fold and is returned.
  std::function<status(const events::store_state&, const Envelope&)> after_each;
};

/// Folds one more event into `state`: the next seq, in the stream it belongs
/// to, through evolve() — what a fold of the journal does for each event,
/// and what a standby does for each envelope it copies (DATA_LOSS otherwise).
status fold_event(events::store_state& state, const Envelope& e);

/// Folds the journal (from the newest usable snapshot, or its first event).
result<events::store_state> fold_journal(const journal_backend& journal,
                                         const fold_options& options = {});

/// Folds the journal and saves the state as a snapshot at its applied seq,
/// keeping the newest `keep` snapshots. Returns the snapshot's seq.
result<uint64_t> write_state_snapshot(journal_backend& journal, size_t keep = 2);

/// Saves `state` (a fold of this journal) as its snapshot at its applied seq,
/// keeping the newest `keep` (a standby's own fold: no second fold needed).
result<uint64_t> save_state_snapshot(journal_backend& journal, const events::store_state& state,
                                     size_t keep = 2);

}  // namespace weightd::persistence
