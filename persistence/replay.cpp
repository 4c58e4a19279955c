#include "persistence/replay.hpp"

#include <spdlog/spdlog.h>

#include "events/event_type.hpp"
#include "events/evolve.hpp"
#include "events/state_codec.hpp"

namespace weightd::persistence {

namespace {

/// The newest snapshot within the bounds that decodes, if any.
std::optional<events::store_state> newest_snapshot(const journal_backend& journal,
                                                   const fold_options& options) {
  snapshot_criteria criteria;
  criteria.max_seq = options.until_seq;
  criteria.max_timestamp_ms = options.until_ms;  // snapshots carry their last event's time
  while (true) {
    auto found = journal.load_snapshot(events::kStateSnapshotStream, criteria);
    if (!found.ok() || !*found) return std::nullopt;
    auto state = events::decode_state((*found)->data);
    auto checked = state.ok() ? events::check_snapshot(*state) : state.error();
    if (checked.ok()) return std::move(*state);
    spdlog::warn("snapshot at seq {} not used: {}; using an older one or the events",
                 (*found)->seq, checked.message());
    if ((*found)->seq == 0) return std::nullopt;
    criteria.max_seq = (*found)->seq - 1;  // an unusable snapshot: try an older one
  }
}

}  // namespace

status fold_event(events::store_state& state, const Envelope& e) {
  // Seqs are dense: a hole is history that is gone, and a state folded over
  // it would silently lack acknowledged changes.
  if (e.global_seq() != state.applied_seq + 1)
    return {errc::data_loss, "events " + std::to_string(state.applied_seq + 1) + ".." +
                                 std::to_string(e.global_seq() - 1) +
                                 " are missing from the journal and no usable snapshot covers them"};
  if (auto stream = events::stream_of(e); e.stream() != stream)
    return {errc::data_loss, "event " + std::to_string(e.global_seq()) + " (" +
                                 events::event_type_name(e) + ") is stored in stream '" +
                                 e.stream() + "' but belongs in '" + stream + "'"};
  return events::evolve(state, e);
}

result<events::store_state> fold_journal(const journal_backend& journal,
                                         const fold_options& options) {
  events::store_state state;
  if (options.use_snapshots)
    if (auto snapshot = newest_snapshot(journal, options)) state = std::move(*snapshot);
  status failure;
  auto st = journal.read({state.applied_seq + 1, options.until_seq, kMaxSeq}, [&](const Envelope& e) {
    if (e.timestamp_ms() > options.until_ms) return false;
    failure = fold_event(state, e);
    if (failure.ok() && options.after_each) failure = options.after_each(state, e);
    return failure.ok();
  });
  if (!st.ok()) return st;
  if (!failure.ok()) return failure;
  return state;
}

}  // namespace weightd::persistence

namespace weightd::persistence {

result<uint64_t> write_state_snapshot(journal_backend& journal, size_t keep) {
  auto state = fold_journal(journal);
  if (!state) return state.error();
  return save_state_snapshot(journal, *state, keep);
}

result<uint64_t> save_state_snapshot(journal_backend& journal, const events::store_state& state,
                                     size_t keep) {
  if (state.applied_seq == 0) return uint64_t{0};
  snapshot_record record{events::kStateSnapshotStream, state.applied_seq, state.last_event_ms,
                         events::encode_state(state)};
  if (auto st = journal.save_snapshot(record); !st.ok()) return st;
  // Keep the newest `keep`: find the keep-th newest and delete below it.
  snapshot_criteria older;
  uint64_t bound = state.applied_seq;
  for (size_t i = 1; i < keep; ++i) {
    snapshot_criteria c;
    c.max_seq = bound - 1;
    auto prev = journal.load_snapshot(events::kStateSnapshotStream, c);
    if (!prev.ok() || !*prev) return state.applied_seq;
    bound = (*prev)->seq;
  }
  if (bound > 0) {
    older.max_seq = bound - 1;
    if (auto st = journal.delete_snapshots(events::kStateSnapshotStream, older); !st.ok()) return st;
  }
  return state.applied_seq;
}

}  // namespace weightd::persistence
