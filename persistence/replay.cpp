#include "persistence/replay.hpp"

#include "events/evolve.hpp"

namespace weightd::persistence {

result<events::store_state> fold_journal(const journal_backend& journal,
                                         const fold_options& options) {
  events::store_state state;
  status failure;
  auto st = journal.read({1, options.until_seq, kMaxSeq}, [&](const Envelope& e) {
    if (e.timestamp_ms() > options.until_ms) return false;
    failure = events::evolve(state, e);
    if (failure.ok() && options.after_each) failure = options.after_each(state, e);
    return failure.ok();
  });
  if (!st.ok()) return st;
  if (!failure.ok()) return failure;
  return state;
}

}  // namespace weightd::persistence
