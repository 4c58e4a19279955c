#include "actors/revision_queue.hpp"

#include <limits>

#include "actors/revision_change_log.hpp"

namespace weightd::actors {

namespace v1 = events::v1;

namespace {
/// The next id of a monotonic allocator; 0 once 2^64-1 was handed out (an
/// id never wraps around to one in use).
uint64_t next_id(std::atomic<uint64_t>& ids) {
  uint64_t current = ids.load();
  do {
    if (current == std::numeric_limits<uint64_t>::max()) return 0;
  } while (!ids.compare_exchange_weak(current, current + 1));
  return current + 1;
}
}  // namespace

decide_context context(rev_pointer self) {
  auto& d = self->state.deps;
  return {d.now_ms(), d.default_policy, [ids = d.operation_ids] { return next_id(*ids); },
          [ids = d.lease_ids] { return next_id(*ids); }, d.promotion_headroom->load()};
}

namespace {

/// Folds events the journal committed into the revision's record, tells the
/// registry, and schedules what the new record needs. Only live commits come
/// here (recovery hands a revision its folded record at spawn), so this is
/// where a state change gets its one log line.
status apply_committed(rev_pointer self, const std::vector<v1::Envelope>& committed) {
  auto& st = self->state;
  status applied;
  for (const auto& e : committed) {
    if (events::is_lineage_event(e)) continue;  // an upsert's, along: its lineage folds it
    change_log::log_committed(e, st.local);
    if (applied = events::evolve_revisions(st.local, e); !applied.ok()) break;
    if (applied = events::check_invariants(*st.record(), st.local); !applied.ok()) break;
  }
  if (!applied.ok()) spdlog::error("revision fold refused its own event: {}", applied.to_string());
  if (const auto* r = st.record()) {
    self->send(st.deps.registry, view_of(*r, st.local));
    bool drained = r->draining() && r->leases.empty();  // the last lease went: delete now
    bool started = false;  // an operation began: nothing else would run it before the next round
    bool lease_ended = false;  // an operation waiting for the leases may go on now
    for (const auto& e : committed) {
      started = started || e.has_operation_started() ||
                (e.has_import_committed() && e.import_committed().has_operation()) ||
                (e.has_policy_updated() && e.policy_updated().has_operation());
      lease_ended = lease_ended || e.has_lease_released() || e.has_lease_expired() ||
                    e.has_lease_revoked();
    }
    if (drained || ((started || lease_ended) && r->operation_id)) {
      st.retry_backoff_ms = 0;
      self->send(self, caf::tick_atom::value);
    }
  }
  return applied;
}

/// Persists a batch of decided commands, answers every command, pumps again.
void persist_batch(rev_pointer self, std::vector<v1::Envelope> events,
                   std::vector<std::function<void(const status&)>> replies) {
  auto waiting = std::make_shared<decltype(replies)>(std::move(replies));
  persist_and_apply(self, std::move(events), [=](status outcome) {
    for (const auto& reply : *waiting) reply(outcome);
    self->state.busy = false;
    pump(self);
  });
}

}  // namespace

void persist_and_apply(rev_pointer self, std::vector<v1::Envelope> events,
                       std::function<void(status)> done) {
  self->request(self->state.deps.journal, self->state.deps.timeout, append_atom::value,
                event_batch{std::move(events)})
      .then([=](event_batch& committed) { done(apply_committed(self, committed.events)); },
            [=](caf::error& err) { done(to_status(err)); });
}

void pump(rev_pointer self) {
  constexpr size_t kMaxBatchEvents = 4096;
  auto& st = self->state;
  while (!st.busy && !st.queue.empty()) {
    if (auto* multi = std::get_if<multi_step_command>(&st.queue.front())) {
      auto run = std::move(*multi);
      st.queue.pop_front();
      st.busy = true;
      auto once = std::make_shared<bool>(false);
      run([self, once] {
        if (*once) return;  // a second call would start two commands at once
        *once = true;
        self->state.busy = false;
        pump(self);
      });
      return;
    }
    auto scratch = st.local;
    auto ctx = context(self);
    std::vector<v1::Envelope> events;
    std::vector<std::function<void(const status&)>> replies;
    while (!st.queue.empty() && events.size() < kMaxBatchEvents) {
      auto* next = std::get_if<decision_command>(&st.queue.front());
      if (!next) break;
      auto decided = (*next)(scratch, ctx, !events.empty());
      st.queue.pop_front();
      for (auto& e : decided.events) events.push_back(std::move(e));
      replies.push_back(std::move(decided.reply));
    }
    if (events.empty()) {  // nothing to persist: answer at once
      for (const auto& reply : replies) reply(status{});
      continue;
    }
    st.busy = true;
    persist_batch(self, std::move(events), std::move(replies));
  }
}

void enqueue_multi_step(rev_pointer self, multi_step_command run) {
  self->state.queue.emplace_back(std::move(run));
  pump(self);
}

}  // namespace weightd::actors
