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
  /// Called after each applied event (e.g. an invariant check); a non-ok
  /// status stops the fold and is returned.
  std::function<status(const events::store_state&, const Envelope&)> after_each;
};

/// Folds the journal from its first event into a fresh state.
result<events::store_state> fold_journal(const journal_backend& journal,
                                         const fold_options& options = {});

}  // namespace weightd::persistence
