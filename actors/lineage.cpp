#include "actors/lineage.hpp"

#include <spdlog/spdlog.h>

#include <memory>

#include "actors/errors.hpp"
#include "actors/journaled.hpp"
#include "core/upsert_decide.hpp"

namespace weightd::actors {

const char* lineage_state::name = "weightd.lineage";

namespace v1 = events::v1;

journaled binding(lineage_pointer self) {
  auto& st = self->state;
  return {st.deps.journal, st.deps.timeout, "lineage " + events::canonical_text(st.lineage),
          [self](const v1::Envelope& e) -> status {
            auto& st = self->state;
            if (auto folded = events::evolve_lineages(st.local, e); !folded.ok()) return folded;
            if (e.has_upsert_claimed()) {
              const auto& p = e.upsert_claimed();
              spdlog::info("upsert claimed lineage={} claim={} mode={} base_generation={} "
                           "target_generation={}",
                           events::canonical_text(st.lineage), p.request_id(),
                           events::mode_name(p.mode()), p.base().weight_generation(),
                           p.target_generation());
            } else if (e.has_claim_phase_changed()) {
              const auto& p = e.claim_phase_changed();
              spdlog::info("upsert phase lineage={} claim={} phase={}{}",
                           events::canonical_text(st.lineage), p.request_id(),
                           events::phase_name(p.phase()),
                           p.reason().empty() ? "" : " reason=\"" + p.reason() + "\"");
            }
            return {};
          }};
}

namespace {

using record_ptr = std::shared_ptr<const events::revision_record>;
using done_fn = std::function<void(status)>;

lineage_view view_of(lineage_pointer self) {
  const auto& l = self->state.record();
  return {l.lineage, l.watermark, l.claim};
}

decide_context decide_context_of(lineage_pointer self) {
  decide_context ctx;
  ctx.now_ms = self->state.deps.now_ms();
  ctx.default_policy = self->state.deps.default_policy;
  return ctx;
}

/// A step of a queued command: `finished` is the queue's (command_queue.hpp).
using finished_fn = std::function<void()>;

/// Queues a command of this lineage; it runs when those before it are done.
void enqueue(lineage_pointer self, multi_step_command command) {
  self->state.queue.push(std::move(command));
}

/// Folds claim events the journal committed: along with a revision's
/// command, they come back in its reply (revision_view::committed_along).
status fold_along(lineage_pointer self, const std::vector<v1::Envelope>& committed) {
  return apply_committed(binding(self), committed);
}

/// A revision's record as it is now (null when it does not exist).
void fetch(lineage_pointer self, const events::revision_key& id,
           std::function<void(result<record_ptr>)> then) {
  self->request(self->state.deps.revisions, self->state.deps.timeout, get_revision{id, true})
      .then([=](revision_view& v) { then(std::make_shared<const events::revision_record>(v.record)); },
             [=](caf::error& err) {
               auto st = to_status(err);
               if (st.code() == errc::not_found) return then(record_ptr{});
               then(st);
             });
}

/// The base and the target of the claim, as they are now.
void fetch_both(lineage_pointer self, const events::upsert_claim& claim,
                std::function<void(result<std::pair<record_ptr, record_ptr>>)> then) {
  auto target_id = claim.target();
  fetch(self, claim.base(), [=](result<record_ptr> base) {
    if (!base) return then(base.error());
    fetch(self, target_id, [=](result<record_ptr> target) {
      if (!target) return then(target.error());
      then(std::pair{*base, *target});
    });
  });
}

void schedule_retry(lineage_pointer self, const status& why) {
  spdlog::warn("upsert step of lineage {} failed: {}; retrying",
               events::canonical_text(self->state.lineage), why.to_string());
  if (self->state.retry_scheduled) return;
  self->state.retry_scheduled = true;
  self->delayed_send(self, self->state.deps.retry_interval, caf::tick_atom::value);
}

/// Takes the claim's next steps until it waits (for the client, the base's
/// leases or a deletion in progress) or ends; then `done`. A step that fails
/// for a passing reason (the journal, a timeout) is retried later.
void run_next(lineage_pointer self, const std::string& principal, std::function<void()> done) {
  const auto& l = self->state.record();
  if (!l.claim || l.claim->finished()) return done();
  // Stopping: no further step (a restart re-derives it from the revisions).
  if (self->state.deps.gate->closed()) return done();
  auto claim = *l.claim;
  auto again = [=](status st) {
    if (!st.ok()) {
      schedule_retry(self, st);
      return done();
    }
    run_next(self, principal, done);
  };
  fetch_both(self, claim, [=](result<std::pair<record_ptr, record_ptr>> both) {
    if (!both) return again(both.error());
    const auto& [base, target] = *both;
    auto next = next_upsert_step(claim, base.get(), target.get());
    auto now = self->state.deps.now_ms();
    // The step could not be taken and nothing happened: the claim ends.
    auto end_claim = [=](const std::string& reason) {
      // A step refused because the node is stopping is no reason to end it.
      if (self->state.deps.gate->closed()) return done();
      persist_and_apply(self, {claim_phase_event(claim, v1::CLAIM_ABORTED, reason, now, principal)}, again);
    };
    switch (next.step) {
      case upsert_step::wait: return done();
      case upsert_step::phase:
      case upsert_step::abort:
        return persist_and_apply(self, {claim_phase_event(claim, next.phase, next.reason, now, principal)},
                       again);
      case upsert_step::retire_base: {
        retire_revision cmd{claim.base(), claim.request_id(), claim.target_generation(), principal,
                            claim.request_id()};
        self->request(self->state.deps.revisions, self->state.deps.timeout, cmd)
            .then([=](revision_view&) { again({}); },
                   [=](caf::error& err) { again(to_status(err)); });
        return;
      }
      case upsert_step::remove_base: {
        remove_revision cmd{claim.base(), base->metadata_generation, 0, principal,
                            claim.request_id()};
        self->request(self->state.deps.revisions, self->state.deps.timeout, cmd)
            .then([=](removal_result&) { again({}); },
                   [=](caf::error& err) {
                     auto st = to_status(err);
                     if (st.code() != errc::busy && st.code() != errc::stale_generation)
                       return again(st);
                     // A reader or an operation came before the delete began.
                     end_claim("the base could not be deleted: " + st.message());
                   });
        return;
      }
      case upsert_step::begin_target: {
        auto cmd = target_import(claim, principal);
        auto phase = claim_phase_event(claim, v1::CLAIM_IMPORTING_TARGET, "", now, principal);
        cmd.along = {phase};
        self->request(self->state.deps.revisions, self->state.deps.timeout, cmd)
            .then([=](revision_view& v) { again(fold_along(self, v.committed_along)); },
                   [=](caf::error& err) {
                     auto st = to_status(err);
                     if (st.code() == errc::durability_failed || st.code() == errc::internal)
                       return again(st);
                     end_claim("the target could not be imported: " + st.message());
                   });
        return;
      }
    }
  });
}

/// The claim of `request_id` on this lineage, or the error naming it.
result<events::upsert_claim> claim_named(lineage_pointer self, const std::string& request_id) {
  const auto& l = self->state.record();
  if (request_id.empty())
    return status{errc::invalid_argument, "request_id is required: it names the claim"};
  if (!l.claim || l.claim->request_id() != request_id)
    return status{errc::not_found, "lineage " + events::canonical_text(l.lineage) +
                                       " has no claim '" + request_id + "'" +
                                       (l.claim ? "; its newest is " + claim_text(*l.claim) : "")};
  return *l.claim;
}

// ------------------------------------------------------------ the commands

// Each runs from the queue: it answers through `rp`, then calls `finished`.

void begin(lineage_pointer self, begin_upsert cmd, caf::typed_response_promise<lineage_view> rp,
           finished_fn finished) {
  auto reply = [=]() mutable {
    rp.deliver(view_of(self));
    finished();
  };
  auto fail = [=](const status& st) mutable {
    rp.deliver(to_error(st));
    finished();
  };
  auto target_id = cmd.base;
  target_id.generation = cmd.target_generation;
  fetch(self, cmd.base, [=](result<record_ptr> base) mutable {
    if (!base) return fail(base.error());
    fetch(self, target_id, [=](result<record_ptr> target) mutable {
      if (!target) return fail(target.error());
      auto decided = decide_begin_upsert(self->state.record(), base->get(), target->get(), cmd,
                                         decide_context_of(self));
      if (!decided) return fail(decided.error());
      if (decided->retry) return run_next(self, cmd.principal, reply);
      auto claimed = decided->claimed;
      if (cmd.mode == v1::UPSERT_PUT_FIRST) {
        // The claim commits with the target's ImportBegun, or not at all.
        events::upsert_claim probe;
        probe.claimed = claimed.upsert_claimed();
        auto import = target_import(probe, cmd.principal);
        import.along = {claimed};
        self->request(self->state.deps.revisions, self->state.deps.timeout, import)
            .then([=](revision_view& v) mutable {
                     if (auto st = fold_along(self, v.committed_along); !st.ok()) return fail(st);
                     reply();
                   },
                   [=](caf::error& err) mutable { fail(to_status(err)); });
        return;
      }
      // DELETE_FIRST: claim, delete the base, begin the target.
      persist_and_apply(self, {claimed}, [=](status st) mutable {
        if (!st.ok()) return fail(st);
        run_next(self, cmd.principal, [=]() mutable {
          const auto& c = self->state.record().claim;
          if (c && c->phase == v1::CLAIM_ABORTED)
            return fail({errc::busy, "the claim ended: " + c->reason});
          reply();
        });
      });
    });
  });
}

void commit(lineage_pointer self, commit_upsert cmd, caf::typed_response_promise<revision_view> rp,
            finished_fn finished) {
  auto deliver = [=](auto&& answer) mutable {
    rp.deliver(std::forward<decltype(answer)>(answer));
    finished();
  };
  auto claim = claim_named(self, cmd.request_id);
  if (!claim) return deliver(to_error(claim.error()));
  auto target_id = cmd.commit.id;
  if (target_id.generation != claim->target_generation())
    return deliver(to_error({errc::invalid_argument,
                     "target.weight_generation " + std::to_string(target_id.generation) +
                         " is not the target of " + claim_text(*claim)}));
  if (claim->phase == v1::CLAIM_ABORTED)
    return deliver(to_error({errc::conflict, claim_text(*claim) + " was aborted: " + claim->reason}));
  if (claim->mode() == v1::UPSERT_DELETE_FIRST && claim->phase == v1::CLAIM_DELETING_BASE)
    return deliver(to_error({errc::not_ready, "the base of " + claim_text(*claim) +
                                          " is still being deleted; retry once GetLineage shows "
                                          "IMPORTING_TARGET"}));
  auto principal = cmd.principal;
  // The target as it is now (committed: reply with it).
  auto reply_target = [=]() mutable {
    self->request(self->state.deps.revisions, self->state.deps.timeout, get_revision{target_id, true})
        .then([=](revision_view& v) mutable { deliver(v); },
               [=](caf::error& err) mutable { deliver(err); });
  };
  if (claim->committed() || claim->phase == v1::CLAIM_COMPLETED) return reply_target();
  auto c = *claim;
  fetch(self, target_id, [=](result<record_ptr> target) mutable {
    if (!target) return deliver(to_error(target.error()));
    if (*target && (*target)->visible())  // committed with a plain CommitImport
      return run_next(self, principal, reply_target);
    auto now = self->state.deps.now_ms();
    auto phase = claim_phase_event(c, c.mode() == v1::UPSERT_PUT_FIRST ? v1::CLAIM_RETIRING_BASE
                                                                        : v1::CLAIM_COMPLETED,
                                   "", now, principal);
    auto commit = cmd.commit;
    commit.principal = principal;
    commit.request_id = cmd.request_id;
    commit.along = {phase};
    self->request(self->state.deps.revisions, self->state.deps.timeout, commit)
        .then(
            [=](revision_view& committed) mutable {
              events::advance_watermark(self->state.record(), target_id.generation);
              auto folded = fold_along(self, committed.committed_along);
              committed.committed_along.clear();
              if (!folded.ok()) return deliver(to_error(folded));
              run_next(self, principal, [=]() mutable { deliver(committed); });
            },
            // A refused commit changes nothing: the target stays IMPORTING
            // under the claim, and a corrected CommitUpsert (or AbortUpsert)
            // follows.
            [=](caf::error& err) mutable { deliver(err); });
  });
}

void abort(lineage_pointer self, abort_upsert cmd, caf::typed_response_promise<lineage_view> rp,
           finished_fn finished) {
  auto deliver = [=](auto&& answer) mutable {
    rp.deliver(std::forward<decltype(answer)>(answer));
    finished();
  };
  const auto& newest = self->state.record().claim;
  if (!cmd.request_id.empty() && newest && newest->request_id() != cmd.request_id)
    return deliver(to_error({errc::conflict, "lineage " + events::canonical_text(self->state.record().lineage) +
                                         " has " + claim_text(*newest) + ", not claim '" +
                                         cmd.request_id + "': only its own request id aborts it"}));
  auto claim = claim_named(self, cmd.request_id);
  if (!claim) return deliver(to_error(claim.error()));
  if (cmd.base.generation != claim->base_generation())
    return deliver(to_error({errc::invalid_argument,
                     "base.weight_generation " + std::to_string(cmd.base.generation) +
                         " is not the base of " + claim_text(*claim)}));
  if (claim->phase == v1::CLAIM_ABORTED) return deliver(view_of(self));
  if (claim->committed() || claim->phase == v1::CLAIM_COMPLETED)
    return deliver(to_error({errc::conflict, claim_text(*claim) +
                                         " has committed its target; the base retires and "
                                         "nothing is left to abort"}));
  auto c = *claim;
  auto principal = cmd.principal;
  auto end_claim = [=]() mutable {
    persist_and_apply(self,
            {claim_phase_event(c, v1::CLAIM_ABORTED, "aborted by AbortUpsert",
                               self->state.deps.now_ms(), principal)},
            [=](status st) mutable {
              if (st.ok()) deliver(view_of(self));
              else deliver(to_error(st));
            });
  };
  if (c.phase != v1::CLAIM_IMPORTING_TARGET)  // DELETE_FIRST before its target: no rollback
    return end_claim();
  fetch(self, c.target(), [=](result<record_ptr> target) mutable {
    if (!target) return deliver(to_error(target.error()));
    const auto& t = *target;
    if (t && t->visible())  // committed meanwhile with a plain CommitImport
      return run_next(self, principal, [=]() mutable {
        deliver(to_error({errc::conflict, "the target of claim '" + c.request_id() +
                                                 "' is committed; nothing is left to abort"}));
      });
    if (!t || t->availability != v1::IMPORTING) return end_claim();
    abort_import cmd2{c.target(), t->metadata_generation, {}, principal, c.request_id()};
    self->request(self->state.deps.revisions, self->state.deps.timeout, cmd2)
        .then([=](removal_result&) mutable { end_claim(); },
               [=](caf::error& err) mutable { deliver(err); });
  });
}

}  // namespace

lineage_actor::behavior_type lineage_impl(lineage_pointer self, events::revision_key lineage,
                                          events::lineage_record initial, lineage_deps deps) {
  self->state.lineage = lineage;
  initial.lineage = lineage;
  self->state.local.lineages[lineage] = std::move(initial);
  self->state.deps = std::move(deps);
  self->state.queue = command_queue<std::monostate>({}, self->state.deps.gate);
  auto stopping = [self] { return self->state.deps.gate->closed(); };
  return {
      [=](begin_upsert& cmd) {
        auto rp = self->make_response_promise<lineage_view>();
        enqueue(self, [=](finished_fn finished) { begin(self, cmd, rp, finished); });
        return rp;
      },
      [=](commit_upsert& cmd) {
        auto rp = self->make_response_promise<revision_view>();
        enqueue(self, [=](finished_fn finished) { commit(self, cmd, rp, finished); });
        return rp;
      },
      [=](abort_upsert& cmd) {
        auto rp = self->make_response_promise<lineage_view>();
        enqueue(self, [=](finished_fn finished) { abort(self, cmd, rp, finished); });
        return rp;
      },
      [=](get_lineage&) -> caf::result<lineage_view> { return view_of(self); },
      [=](revision_view& v) {
        if (stopping()) return;  // a restart re-derives the step (next_upsert_step)
        enqueue(self, [=](finished_fn finished) {
          // A READY (or DEGRADED) generation was committed: the watermark rule.
          if (v.record.visible())
            events::advance_watermark(self->state.record(), v.record.id.generation);
          const auto& c = self->state.record().claim;
          if (!c || c->finished()) return finished();
          run_next(self, "", finished);
        });
      },
      [=](caf::tick_atom) {
        self->state.retry_scheduled = false;
        if (stopping()) return;
        enqueue(self, [=](finished_fn finished) { run_next(self, "", finished); });
      },
  };
}

}  // namespace weightd::actors
