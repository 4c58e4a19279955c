#include "actors/journal_writer.hpp"

#include <spdlog/spdlog.h>

#include <chrono>

#include "actors/errors.hpp"
#include "events/state_codec.hpp"
#include "persistence/replay.hpp"

namespace weightd::actors {

const char* journal_writer_state::name = "weightd.journal_writer";

namespace {

using writer_pointer = journal_actor::stateful_pointer<journal_writer_state>;
constexpr size_t kRecentBatches = 1024;

/// Appends `batch` through the backend, timing the commit.
status timed_append(journal_writer_state& st, std::vector<events::v1::Envelope>& batch) {
  auto start = std::chrono::steady_clock::now();
  auto result = st.backend->append(batch);
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                std::chrono::steady_clock::now() - start)
                .count();
  st.stats.last_commit_us = static_cast<uint64_t>(us);
  st.stats.total_commit_us += static_cast<uint64_t>(us);
  if (result.ok()) {
    ++st.stats.commits;
    st.stats.events += batch.size();
    if (!batch.empty()) st.stats.highest_seq = batch.back().global_seq();
  }
  return result;
}

void record_batch_size(journal_stats& stats, uint64_t appends) {
  if (stats.recent_batch_sizes.size() == kRecentBatches)
    stats.recent_batch_sizes.erase(stats.recent_batch_sizes.begin());
  stats.recent_batch_sizes.push_back(appends);
}

/// Every snapshot_every events, asks the snapshotter for a snapshot.
void maybe_snapshot(journal_writer_state& st) {
  auto& o = st.options;
  if (!o.snapshotter || o.snapshot_every == 0) return;
  if (st.stats.highest_seq < st.last_snapshot_seq + o.snapshot_every) return;
  st.last_snapshot_seq = st.stats.highest_seq;
  caf::anon_send(o.snapshotter, snapshot_atom::value, st.stats.highest_seq);
}

/// Commits every pending append in one transaction and answers each appender.
void flush(writer_pointer self) {
  auto& st = self->state;
  auto pending = std::move(st.pending);
  st.pending.clear();
  if (pending.empty()) return;

  std::vector<events::v1::Envelope> all;
  std::vector<size_t> offsets;  // where each append's events start in `all`
  for (auto& p : pending) {
    offsets.push_back(all.size());
    for (auto& e : p.batch.events) all.push_back(std::move(e));
  }
  offsets.push_back(all.size());
  auto slice = [&](size_t i) {  // moves append i's events out of `all`
    return std::vector<events::v1::Envelope>(
        std::make_move_iterator(all.begin() + offsets[i]),
        std::make_move_iterator(all.begin() + offsets[i + 1]));
  };

  auto result = timed_append(st, all);
  if (result.ok()) {
    record_batch_size(st.stats, pending.size());
    maybe_snapshot(st);
    for (size_t i = 0; i < pending.size(); ++i) {
      ++st.stats.appends;
      pending[i].promise.deliver(event_batch{slice(i)});
    }
    return;
  }
  if (result.code() == errc::invalid_argument && pending.size() > 1) {
    // One appender's batch was rejected: do not let it fail the others.
    for (size_t i = 0; i < pending.size(); ++i) {
      auto batch = slice(i);
      auto one = timed_append(st, batch);
      if (one.ok()) {
        record_batch_size(st.stats, 1);
        ++st.stats.appends;
        pending[i].promise.deliver(event_batch{std::move(batch)});
      } else {
        ++st.stats.failed_appends;
        pending[i].promise.deliver(to_error(one));
      }
    }
    return;
  }
  // A failed commit poisons the journal until it is reopened (a restart):
  // /healthz says so.
  // The first failure is an error line; the ones after it repeat it (they
  // stay in /metrics and /healthz) and would only flood the log.
  if (result.code() == errc::durability_failed) {
    if (st.stats.refusing_writes.empty())
      spdlog::error("journal refuses writes events={} error=\"{}\"; nothing was published, "
                    "/healthz fails until a restart reopens the journal",
                    all.size(), result.message());
    st.stats.refusing_writes = result.message();
  } else {
    spdlog::warn("journal append failed events={} error=\"{}\"", all.size(), result.message());
  }
  for (auto& p : pending) {
    ++st.stats.failed_appends;
    p.promise.deliver(to_error(result));
  }
}

journal_actor::behavior_type journal_writer(writer_pointer self,
                                            std::shared_ptr<persistence::journal_backend> backend,
                                            journal_writer_options options) {
  auto& st = self->state;
  st.backend = std::move(backend);
  st.options = std::move(options);
  if (auto highest = st.backend->highest_seq(); highest.ok()) st.stats.highest_seq = *highest;
  if (auto newest = st.backend->load_snapshot(events::kStateSnapshotStream, {}); newest.ok() && *newest)
    st.last_snapshot_seq = (*newest)->seq;
  return {
      [=](append_atom, event_batch& batch) -> caf::result<event_batch> {
        auto& st = self->state;
        // The flush message queues behind everything already in the mailbox,
        // so all appends received until then share one transaction.
        if (st.pending.empty()) self->send(self, caf::flush_atom::value);
        auto promise = self->make_response_promise<event_batch>();
        st.pending.push_back({std::move(batch), promise});
        return promise;
      },
      [=](caf::flush_atom) { flush(self); },
      [=](stats_atom) { return self->state.stats; },
  };
}

}  // namespace

journal_actor spawn_journal_writer(caf::actor_system& sys,
                                   std::shared_ptr<persistence::journal_backend> backend,
                                   journal_writer_options options) {
  if (options.detached)
    return sys.spawn<caf::detached>(journal_writer, std::move(backend), std::move(options));
  return sys.spawn(journal_writer, std::move(backend), std::move(options));
}

snapshotter_actor spawn_snapshotter(caf::actor_system& sys,
                                    std::shared_ptr<persistence::journal_backend> backend,
                                    bool detached) {
  // The seq of the newest snapshot this actor wrote.
  auto written = std::make_shared<uint64_t>(0);
  auto impl = [backend, written](snapshotter_actor::pointer) -> snapshotter_actor::behavior_type {
    return {
        [backend, written](snapshot_atom) -> caf::result<uint64_t> {
          auto seq = persistence::write_state_snapshot(*backend);
          if (!seq) return to_error(seq.error());
          *written = std::max(*written, *seq);
          return *seq;
        },
        [backend, written](snapshot_atom, uint64_t requested_at) {
          if (requested_at <= *written) return;  // a newer snapshot covers it already
          auto seq = persistence::write_state_snapshot(*backend);
          if (!seq) {
            spdlog::warn("snapshot failed error=\"{}\"; the next one retries", seq.error().to_string());
            return;
          }
          *written = std::max(*written, *seq);
        },
    };
  };
  if (detached) return sys.spawn<caf::detached>(impl);
  return sys.spawn(impl);
}

}  // namespace weightd::actors
