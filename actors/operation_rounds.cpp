#include "actors/operation_rounds.hpp"

#include <algorithm>

#include "core/lease_decide.hpp"
#include "core/replica_observation.hpp"
#include "actors/revision_queue.hpp"

namespace weightd::actors {

namespace v1 = events::v1;

namespace {

constexpr int64_t kFirstBackoffMs = 1'000;
constexpr int64_t kMaxBackoffMs = 60'000;

// ------------------------------------------------------- event builders

v1::Envelope op_event(rev_pointer self) {
  return revision_envelope(self->state.id, self->state.deps.now_ms(), "", "");
}

v1::Envelope progressed(rev_pointer self, const events::operation_record& op, uint64_t units,
                        uint64_t bytes, const std::string& cursor, const std::string& message) {
  auto e = op_event(self);
  auto* p = e.mutable_operation_progressed();
  *p->mutable_id() = self->state.id.to_proto();
  p->set_operation_id(op.id);
  p->set_processed_units(std::max(op.processed_units, units));  // never backwards
  p->set_processed_bytes(std::max(op.processed_bytes, bytes));
  p->set_cursor(cursor);
  p->set_message(message);
  return e;
}

std::optional<v1::Envelope> residency_change(rev_pointer self, const group_snapshot& group) {
  return residency_change(*self->state.record(), group, self->state.deps.now_ms());
}

// ------------------------------------------------------------ scheduling

/// The next round: at once, or after `delay_ms`.
void schedule_round(rev_pointer self, int64_t delay_ms) {
  if (delay_ms <= 0) self->send(self, caf::tick_atom::value);
  else self->delayed_send(self, std::chrono::milliseconds(delay_ms), caf::tick_atom::value);
}

/// Milliseconds the next round waits so that the bytes `work` copied keep to
/// `rate_bytes` per second (0 = no limit, no wait).
int64_t pause_for_rate(const std::vector<unit_work>& work, uint64_t rate_bytes) {
  if (rate_bytes == 0) return 0;
  uint64_t bytes = 0;
  for (const auto& u : work)
    if (!u.to_hot.empty() || !u.to_cold.empty()) bytes += u.bytes;  // a drop copies nothing
  return static_cast<int64_t>(static_cast<double>(bytes) * 1000.0 / static_cast<double>(rate_bytes));
}

void back_off(rev_pointer self) {
  auto& b = self->state.retry_backoff_ms;
  b = b ? std::min(kMaxBackoffMs, 2 * b) : kFirstBackoffMs;
  schedule_round(self, b);
}

const events::operation_record* running_operation(rev_pointer self) {
  const auto* r = self->state.record();
  if (!r || !r->operation_id) return nullptr;
  auto it = self->state.local.operations.find(r->operation_id);
  if (it == self->state.local.operations.end() || it->second.state != events::operation_state::running)
    return nullptr;
  return &it->second;
}

void with_group(rev_pointer self, std::function<void(result<group_snapshot>)> then) {
  const auto& r = *self->state.record();
  self->request(self->state.deps.store, self->state.deps.timeout, group_atom::value, r.id.tenant,
                r.payload_group_id, std::vector<std::string>{})
      .then([=](group_snapshot& g) { then(std::move(g)); },
            [=](caf::error& err) { then(to_status(err)); });
}

/// Persists `events` (if any); logs a failure (the next round retries).
void persist_round(rev_pointer self, std::vector<v1::Envelope> batch,
                   std::function<void(bool ok)> then) {
  if (batch.empty()) return then(true);
  persist_and_apply(self, std::move(batch), [=](status s) {
    if (!s.ok())
      spdlog::warn("operation round of {} not recorded: {}; the next round retries",
                   events::canonical_text(self->state.id), s.to_string());
    then(s.ok());
  });
}

/// Records a round that could do nothing now: its message, once.
void note_waiting(rev_pointer self, const events::operation_record& op, const round_plan& plan,
                  const std::string& message, std::function<void()> finished) {
  std::vector<v1::Envelope> batch;
  if (message != op.message || plan.units_at_target > op.processed_units)
    batch.push_back(progressed(self, op, plan.units_at_target, plan.bytes_at_target, op.cursor,
                                message));
  persist_round(self, std::move(batch), [=](bool) {
    // Leases and repairs show up in the reconciler's rounds; no backoff needed.
    schedule_round(self, self->state.deps.reconcile_interval.count());
    finished();
  });
}

/// Progress to the end, the finish and the residency the tiers now give.
void finish_operation(rev_pointer self, const events::operation_record& op, const round_plan& plan,
                      const group_snapshot& group, std::function<void()> finished) {
  std::vector<v1::Envelope> batch;
  batch.push_back(progressed(self, op, plan.total_units, plan.total_bytes, plan.cursor, ""));
  auto e = op_event(self);
  *e.mutable_operation_finished()->mutable_id() = self->state.id.to_proto();
  e.mutable_operation_finished()->set_operation_id(op.id);
  batch.push_back(std::move(e));
  if (auto seen = residency_change(self, group)) batch.push_back(std::move(*seen));
  persist_round(self, std::move(batch), [=](bool ok) {
    if (ok) self->state.retry_backoff_ms = 0;  // (the finish's line: revision_change_log.hpp)
    else back_off(self);
    finished();
  });
}

// ------------------------------------------------------------- the work

/// Runs the copies of `work` in parallel, then the HOT drops of each unit
/// whose copies all succeeded; `then` gets the first error ("" = none).
void execute(rev_pointer self, std::shared_ptr<std::vector<unit_work>> work,
             std::function<void(status error)> then) {
  auto& st = self->state;
  auto tenant = st.id.tenant;
  auto first_error = std::make_shared<status>();
  auto failed_units = std::make_shared<std::set<size_t>>();
  auto note = [=](size_t unit, const std::string& key, const status& s) {
    failed_units->insert(unit);
    if (first_error->ok()) *first_error = status{s.code(), "'" + key + "': " + s.message()};
  };
  // Phase 2: drops, once every copy answered.
  auto drops = [=] {
    auto pending = std::make_shared<size_t>(0);
    for (size_t i = 0; i < work->size(); ++i)
      if (!failed_units->count(i)) *pending += (*work)[i].drop_hot.size();
    if (*pending == 0) return then(*first_error);
    for (size_t i = 0; i < work->size(); ++i) {
      if (failed_units->count(i)) continue;
      for (const auto& key : (*work)[i].drop_hot)
        self->request(self->state.deps.store, self->state.deps.timeout, drop_atom::value, tenant,
                      key, v1::TIER_HOT, v1::REMOVAL_LIFECYCLE)
            .then([=](object_info&) { if (--*pending == 0) then(*first_error); },
                  [=](caf::error& err) {
                    note(i, key, to_status(err));
                    if (--*pending == 0) then(*first_error);
                  });
    }
  };
  // Phase 1: copies.
  auto pending = std::make_shared<size_t>(0);
  for (const auto& w : *work) *pending += w.to_hot.size() + w.to_cold.size();
  if (*pending == 0) return drops();
  for (size_t i = 0; i < work->size(); ++i)
    for (auto tier : {v1::TIER_HOT, v1::TIER_COLD})
      for (const auto& key : tier == v1::TIER_HOT ? (*work)[i].to_hot : (*work)[i].to_cold)
        self->request(st.deps.store, st.deps.copy_timeout, caf::add_atom::value, tenant, key, tier)
            .then([=](object_info&) { if (--*pending == 0) drops(); },
                  [=](caf::error& err) {
                    note(i, key, to_status(err));
                    if (--*pending == 0) drops();
                  });
}

}  // namespace

void run_operation_round(rev_pointer self, std::function<void()> finished) {
  const auto* op_now = running_operation(self);
  const auto* r = self->state.record();
  if (!op_now || !r->visible()) return finished();
  auto op = *op_now;
  with_group(self, [=](result<group_snapshot> group) {
    if (!group) {
      back_off(self);
      return finished();
    }
    const auto* r = self->state.record();
    if (!running_operation(self) || running_operation(self)->id != op.id) return finished();
    bool leased = !live_leases(*r, self->state.deps.now_ms()).empty();
    auto plan = plan_round(*r, op, *group, leased, self->state.deps.migration);
    if (!plan.paused.empty()) return note_waiting(self, op, plan, plan.paused, finished);
    if (plan.complete) return finish_operation(self, op, plan, *group, finished);
    if (plan.work.empty()) return note_waiting(self, op, plan, plan.waiting, finished);
    auto work = std::make_shared<std::vector<unit_work>>(std::move(plan.work));
    auto cursor = plan.cursor;
    execute(self, work, [=](status error) {
      // A promotion HOT cannot fit yet keeps retrying: each refused
      // reservation is pressure, under which the reconciler demotes the
      // least recently used revisions until it fits.
      with_group(self, [=](result<group_snapshot> after) {
        if (!after) {
          back_off(self);
          return finished();
        }
        const auto* r = self->state.record();
        if (!running_operation(self)) return finished();
        auto current = *running_operation(self);
        bool leased = !live_leases(*r, self->state.deps.now_ms()).empty();
        auto done = plan_round(*r, current, *after, leased, self->state.deps.migration);
        if (error.ok() && done.complete) return finish_operation(self, current, done, *after, finished);
        auto message = error.ok() ? done.waiting
                                  : "retrying after a failed step on " + error.message();
        std::vector<v1::Envelope> batch;
        if (done.units_at_target > current.processed_units || cursor != current.cursor ||
            message != current.message)
          batch.push_back(progressed(self, current, done.units_at_target, done.bytes_at_target,
                                      cursor, message));
        persist_round(self, std::move(batch), [=](bool ok) {
          if (!error.ok() || !ok) {
            if (error.code() != errc::object_has_lease)  // a reader finishes soon: not trouble
              spdlog::warn("operation round failed operation_id={} revision={} error=\"{}\"",
                           current.id, events::canonical_text(self->state.id), error.message());
            back_off(self);
          } else {
            self->state.retry_backoff_ms = 0;
            schedule_round(self, pause_for_rate(*work, self->state.deps.migration.rate_bytes));
          }
          finished();
        });
      });
    });
  });
}

void observe_replicas(rev_pointer self, std::function<void()> then) {
  const auto* r = self->state.record();
  if (!r || !r->visible()) return then();
  with_group(self, [=](result<group_snapshot> group) {
    const auto* r = self->state.record();
    if (!group || !r->visible()) return then();  // the next round looks again
    auto seen = decide_observation(*r, *group, decide_context_of(self));
    if (seen.events.empty()) return then();
    persist_and_apply(self, std::move(seen.events), [=](status s) {
      // Recorded: the DEGRADED and repair lines come from the events (revision_change_log.hpp).
      if (!s.ok())
        spdlog::warn("observation of {} not recorded: {}; the next round retries",
                     events::canonical_text(self->state.id), s.to_string());
      then();
    });
  });
}

void cancel_running_operation(rev_pointer self, uint64_t operation_id,
                              caf::typed_response_promise<events::operation_record> rp,
                              std::function<void()> finished) {
  auto reply = [=]() mutable {
    rp.deliver(self->state.local.operations.at(operation_id));
    finished();
  };
  const auto* op = running_operation(self);
  if (!op || op->id != operation_id) return reply();  // already ended: as it is
  with_group(self, [=](result<group_snapshot> group) mutable {
    if (!running_operation(self)) return reply();
    auto e = op_event(self);
    *e.mutable_operation_cancelled()->mutable_id() = self->state.id.to_proto();
    e.mutable_operation_cancelled()->set_operation_id(operation_id);
    std::vector<v1::Envelope> batch{std::move(e)};
    if (group)
      if (auto seen = residency_change(self, *group)) batch.push_back(std::move(*seen));
    persist_and_apply(self, std::move(batch), [=](status s) mutable {
      if (!s.ok()) {
        rp.deliver(to_error(s));
        return finished();
      }
      reply();
    });
  });
}

}  // namespace weightd::actors
