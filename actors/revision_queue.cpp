#include "actors/revision_queue.hpp"

#include <limits>

#include "actors/revision_change_log.hpp"
#include "core/revision_view.hpp"
#include "events/evolve.hpp"

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

decide_context decide_context_of(rev_pointer self) {
  auto& d = self->state.deps;
  return {d.now_ms(), d.default_policy, [ids = d.operation_ids] { return next_id(*ids); },
          [ids = d.lease_ids] { return next_id(*ids); }, d.promotion_headroom->load()};
}

journaled binding(rev_pointer self) {
  auto& st = self->state;
  journaled how{st.deps.journal, st.deps.timeout, "revision " + events::canonical_text(st.id), {}};
  // Only live commits come here (recovery hands a revision its folded record
  // at spawn), so this is where a state change gets its one log line.
  how.fold = [self](const v1::Envelope& e) -> status {
    auto& st = self->state;
    if (events::is_lineage_event(e)) {  // an upsert's, along: its lineage folds it
      st.committed_along.push_back(e);
      return {};
    }
    change_log::log_committed(e, st.local);
    if (auto applied = events::evolve_revisions(st.local, e); !applied.ok()) return applied;
    return events::check_invariants(*st.record(), st.local);
  };
  how.after = [self](const std::vector<v1::Envelope>& committed) {
    auto& st = self->state;
    const auto* r = st.record();
    if (!r) return;
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
  };
  return how;
}

void run_decisions(rev_pointer self, std::function<std::optional<decision_command>()> next,
                   std::function<void()> finished) {
  constexpr size_t kMaxBatchEvents = 4096;
  auto scratch = self->state.local;
  auto ctx = decide_context_of(self);
  std::vector<v1::Envelope> events;
  auto replies = std::make_shared<std::vector<std::function<void(const status&)>>>();
  while (events.size() < kMaxBatchEvents) {
    auto command = next();
    if (!command) break;
    auto decided = (*command)(scratch, ctx, !events.empty());
    for (auto& e : decided.events) events.push_back(std::move(e));
    replies->push_back(std::move(decided.reply));
  }
  if (events.empty()) {  // nothing to persist: answer at once
    for (const auto& reply : *replies) reply(status{});
    return finished();
  }
  persist_and_apply(self, std::move(events), [=](status outcome) {
    for (const auto& reply : *replies) reply(outcome);
    finished();
  });
}

void enqueue_multi_step(rev_pointer self, multi_step_command run) {
  self->state.queue.push(std::move(run));
}

}  // namespace weightd::actors
