#include "actors/journal_reader.hpp"

#include <algorithm>

#include "actors/errors.hpp"
#include "events/event_type.hpp"
#include "events/evolve.hpp"
#include "events/identity.hpp"

namespace weightd::actors {

namespace {

using persistence::seq_range;
namespace v1 = events::v1;

constexpr uint32_t kDefaultHistoryPage = 100;
constexpr uint32_t kMaxHistoryPage = 1000;

struct reader_state {
  std::shared_ptr<const persistence::journal_backend> backend;
  journal_actor writer;
  journal_reader_config config;
  uint64_t committed = 0;          // the writer's committed position, as last asked
  std::vector<watch_pull> parked;  // watchers at the head, waiting for a commit
  bool polling = false;            // a tick is scheduled
};

using reader_actor = journal_reader_actor::stateful_pointer<reader_state>;

bool matches(const v1::Envelope& e, const watch_filter& f) {
  if (!f.tenant.empty() && events::tenant_of(e) != f.tenant) return false;
  if (!f.stream_prefix.empty() && e.stream().compare(0, f.stream_prefix.size(), f.stream_prefix) != 0)
    return false;
  if (f.types.empty()) return true;
  auto type = events::event_type_name(e);
  return std::find(f.types.begin(), f.types.end(), type) != f.types.end();
}

enum class pulled {
  answered,  // the sink got events or an error
  at_head,   // nothing more is committed: park it
  more,      // it scanned its share without a match: go on after others
};

/// Reads the next batch for `pull` up to the committed position, moving
/// `pull.from_seq` past what it scanned.
pulled serve(reader_state& st, watch_pull& pull) {
  if (pull.from_seq > st.committed) return pulled::at_head;
  std::vector<v1::Envelope> batch;
  size_t bytes = 0;
  uint64_t next = pull.from_seq, first_seen = 0;
  seq_range range{pull.from_seq, st.committed, st.config.scan_events};
  auto read = st.backend->read(range, [&](const v1::Envelope& e) {
    if (!first_seen) first_seen = e.global_seq();
    next = e.global_seq() + 1;
    if (matches(e, pull.filter)) {
      bytes += e.ByteSizeLong();
      batch.push_back(e);
    }
    return batch.size() < st.config.batch_events && bytes < st.config.batch_bytes;
  });
  if (!read.ok()) {
    pull.sink->fail(read);
    return pulled::answered;
  }
  // Seqs are gap-free from 1: a first event past the position means the
  // events there were deleted. A watcher must hear it, never skip them.
  if (first_seen != pull.from_seq) {
    pull.sink->fail({errc::not_found,
                     "seq " + std::to_string(pull.from_seq) + " is no longer in the journal" +
                         (first_seen ? "; the oldest it can serve is " + std::to_string(first_seen)
                                     : "")});
    return pulled::answered;
  }
  pull.from_seq = next;
  if (!batch.empty()) {
    pull.sink->deliver(std::move(batch));
    return pulled::answered;
  }
  return next > st.committed ? pulled::at_head : pulled::more;
}

void schedule_poll(reader_actor self) {
  if (self->state.polling || self->state.parked.empty()) return;
  self->state.polling = true;
  self->delayed_send(self, self->state.config.poll, caf::tick_atom::value);
}

/// Serves `pull` now: answered, parked at the head, or queued behind others.
void pull_now(reader_actor self, watch_pull pull) {
  switch (serve(self->state, pull)) {
    case pulled::answered: return;
    case pulled::at_head:
      self->state.parked.push_back(std::move(pull));
      return schedule_poll(self);
    case pulled::more: self->send(self, watch_atom::value, std::move(pull));
  }
}

/// Asks the writer what it committed, then runs `next`.
template <class Next>
void refresh_committed(reader_actor self, Next next) {
  self->request(self->state.writer, self->state.config.timeout, stats_atom::value)
      .then(
          [=](journal_stats& stats) mutable {
            self->state.committed = std::max(self->state.committed, stats.highest_seq);
            next();
          },
          [=](caf::error&) mutable { next(); });
}

result<history_page> read_history(const reader_state& st, const history_query& q) {
  uint32_t limit = q.limit == 0 ? kDefaultHistoryPage : std::min(q.limit, kMaxHistoryPage);
  history_page page;
  auto stream = events::revision_stream(q.id);
  seq_range range{q.after_stream_seq + 1, persistence::kMaxSeq, uint64_t{limit} + 1};
  auto st2 = st.backend->read_stream(stream, range, [&](const v1::Envelope& e) {
    if (page.events.size() == limit) {
      page.next_after = page.events.back().stream_seq();
      return false;
    }
    page.events.push_back(e);
    return true;
  });
  if (!st2.ok()) return st2;
  if (page.events.empty() && q.after_stream_seq == 0)
    return status{errc::not_found, "no events for revision " + events::canonical_text(q.id) +
                                       " in the journal"};
  return page;
}

}  // namespace

journal_reader_actor spawn_journal_reader(caf::actor_system& sys,
                                          std::shared_ptr<const persistence::journal_backend> backend,
                                          journal_actor writer, journal_reader_config config,
                                          bool detached) {
  // Spawned after startup's own events: the journal's head is committed.
  auto highest = backend->highest_seq();
  uint64_t committed = highest.ok() ? *highest : 0;
  auto behavior = [=](reader_actor self) -> journal_reader_actor::behavior_type {
    self->state.backend = backend;
    self->state.writer = writer;
    self->state.config = config;
    self->state.committed = committed;
    return {
        [=](history_atom, history_query& q) -> caf::result<history_page> {
          auto page = read_history(self->state, q);
          if (!page) return to_error(page.error());
          return std::move(*page);
        },
        [=](watch_atom, watch_pull& pull) {
          // Behind the head it reads at once; "from now" (0) and a position
          // past the last known commit ask the writer where the head is.
          if (pull.from_seq != 0 && pull.from_seq <= self->state.committed)
            return pull_now(self, std::move(pull));
          refresh_committed(self, [=]() mutable {
            if (pull.from_seq == 0) pull.from_seq = self->state.committed + 1;
            pull_now(self, std::move(pull));
          });
        },
        [=](caf::tick_atom) {
          refresh_committed(self, [=] {
            auto& st = self->state;
            st.polling = false;
            auto waiting = std::move(st.parked);
            st.parked.clear();
            for (auto& pull : waiting) {
              if (pull.from_seq > st.committed) st.parked.push_back(std::move(pull));
              else pull_now(self, std::move(pull));
            }
            schedule_poll(self);
          });
        },
    };
  };
  if (detached) return sys.spawn<caf::detached>(behavior);
  return sys.spawn(behavior);
}

}  // namespace weightd::actors
