#include "actors/revision.hpp"

#include <spdlog/spdlog.h>

#include <set>

#include "actors/errors.hpp"
#include "actors/lease_decide.hpp"

namespace weightd::actors {

const char* revision_state::name = "weightd.revision";

namespace v1 = events::v1;

namespace {

using rev_pointer = revision_actor::stateful_pointer<revision_state>;
constexpr size_t kRemovalBatch = 64;

decide_context context(rev_pointer self) {
  auto& d = self->state.deps;
  return {d.now_ms(), d.default_policy, [ids = d.operation_ids] { return ++*ids; },
          [ids = d.lease_ids] { return ++*ids; }};
}

revision_view current_view(rev_pointer self) {
  return view_of(*self->state.record(), self->state.local);
}

/// Folds events the journal committed into the revision's record (the same
/// evolve replay runs), tells the registry, and starts a delete whose drain
/// just ended.
status apply_committed(rev_pointer self, const std::vector<v1::Envelope>& committed) {
  auto& st = self->state;
  status applied;
  for (const auto& e : committed) {
    if (applied = events::evolve_revisions(st.local, e); !applied.ok()) break;
    if (applied = events::check_invariants(*st.record(), st.local); !applied.ok()) break;
  }
  if (!applied.ok()) spdlog::error("revision fold refused its own event: {}", applied.to_string());
  if (const auto* r = st.record()) {
    self->send(st.deps.registry, current_view(self));
    if (r->draining() && r->leases.empty())  // the last lease went: delete now
      self->send(self, caf::tick_atom::value);
  }
  return applied;
}

/// Persists `events`, applies them, tells the registry; then `done`.
/// .await: the revision takes no other message until this completes — the
/// multi-step commands below rely on it (see the command queue).
void persist(rev_pointer self, std::vector<v1::Envelope> events, std::function<void(status)> done) {
  self->request(self->state.deps.journal, self->state.deps.timeout, append_atom::value,
                event_batch{std::move(events)})
      .await([=](event_batch& committed) { done(apply_committed(self, committed.events)); },
             [=](caf::error& err) { done(to_status(err)); });
}

// ------------------------------------------------------------ command queue
//
// Commands run one after another, in arrival order. A *decision* command
// (BeginImport, UpdatePolicy, the lease commands) only decides and persists:
// every decision command queued while the previous batch was in flight is
// decided in order against a scratch copy of the record — each seeing the
// events of those before it — and their events go to the journal as ONE
// atomic batch: one fsync for many readers taking leases on a hot model, with
// exactly the outcome of running them serially. Replies wait for the batch;
// if it fails, nothing applied and each command gets the failure.
// A *multi-step* command (CommitImport, AbortImport, RemoveRevision, the
// reconciler's tick) talks to the object store too; it runs alone, and since
// all its steps use .await, no other message is taken until its last step —
// its final pump message is processed only then.

void pump(rev_pointer self);

/// Persists a batch of decided commands with .then (more commands queue
/// meanwhile), applies it, answers every command, and pumps again.
void persist_batch(rev_pointer self, std::vector<v1::Envelope> events,
                   std::vector<std::function<void(const status&)>> replies) {
  auto waiting = std::make_shared<decltype(replies)>(std::move(replies));
  auto finish = [=](const status& outcome) {
    for (const auto& reply : *waiting) reply(outcome);
    self->state.busy = false;
    pump(self);
  };
  self->request(self->state.deps.journal, self->state.deps.timeout, append_atom::value,
                event_batch{std::move(events)})
      .then([=](event_batch& committed) { finish(apply_committed(self, committed.events)); },
            [=](caf::error& err) { finish(to_status(err)); });
}

/// Runs what is queued: a multi-step command alone, or every decision
/// command up to the next multi-step one as one batch.
void pump(rev_pointer self) {
  constexpr size_t kMaxBatchEvents = 4096;
  auto& st = self->state;
  while (!st.busy && !st.queue.empty()) {
    if (auto* multi = std::get_if<multi_step_command>(&st.queue.front())) {
      auto run = std::move(*multi);
      st.queue.pop_front();
      st.busy = true;
      run();
      self->send(self, pump_atom::value);  // taken after the command's last await
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

/// Queues a decision command: `decide` against the scratch record, then
/// `reply` computed from the scratch fold once the decision's events are in.
template <class Reply>
void enqueue_decision(
    rev_pointer self, caf::typed_response_promise<Reply> rp,
    std::function<result<decision>(const events::revision_record*, const decide_context&)> decide,
    std::function<Reply(const events::revision_index&)> reply) {
  auto id = self->state.id;
  self->state.queue.emplace_back(decision_command{
      [=](events::revision_index& scratch, const decide_context& ctx,
          bool after_pending) mutable -> decided_command {
        auto decided = decide(scratch.find(id), ctx);
        if (!decided) {
          // An error decided on top of pending events is only as good as they are.
          auto err = decided.error();
          return {{}, [=](const status& batch) mutable {
                    rp.deliver(to_error(after_pending && !batch.ok() ? batch : err));
                  }};
        }
        for (const auto& e : decided->events)
          if (auto st = events::evolve_revisions(scratch, e); !st.ok()) {
            spdlog::error("a decision does not fold: {}", st.to_string());
            return {{}, [=](const status&) mutable { rp.deliver(to_error(st)); }};
          }
        auto value = reply(scratch);
        return {std::move(decided->events), [=](const status& batch) mutable {
                  if (batch.ok()) rp.deliver(value);
                  else rp.deliver(to_error(batch));
                }};
      }});
  pump(self);
}

/// Queues a multi-step command (see the command queue).
void enqueue_multi_step(rev_pointer self, multi_step_command run) {
  self->state.queue.emplace_back(std::move(run));
  pump(self);
}

// ---------------------------------------------------------------- deletion

/// Removes the keys batch by batch (64, the manifest alone and last), then
/// records the revision as DELETED.
void remove_batches(rev_pointer self, std::shared_ptr<std::vector<std::vector<std::string>>> batches,
                    size_t next, std::shared_ptr<removal_result> out,
                    std::function<void(result<removal_result>)> done) {
  auto& st = self->state;
  if (next == batches->size()) {
    const auto& r = *st.record();
    auto e = revision_envelope(r.id, st.deps.now_ms(), "", "");
    auto* p = e.mutable_revision_deleted();
    *p->mutable_id() = r.id.to_proto();
    for (const auto& k : out->removed_keys) p->add_removed_keys(k);
    persist(self, {std::move(e)}, [=](status s) {
      if (!s.ok()) return done(s);
      out->view = current_view(self);
      done(*out);
    });
    return;
  }
  auto keys = (*batches)[next];
  self->request(st.deps.store, st.deps.timeout, remove_atom::value, st.id.tenant, keys,
                v1::REMOVAL_LIFECYCLE)
      .await(
          [=](batch_removal& removed) {
            for (const auto& r : removed.results) {
              if (!r.result.ok())
                return done(status{r.result.code(), "deleting " + events::canonical_text(self->state.id) +
                                                        " stopped at '" + r.key + "': " +
                                                        r.result.message() +
                                                        "; it stays DELETING and finishes on retry"});
              out->removed_keys.push_back(r.key);
            }
            remove_batches(self, batches, next + 1, out, done);
          },
          [=](caf::error& err) { done(to_status(err)); });
}

/// From DELETING: every member of the group plus `extra` keys (ungrouped
/// objects of the same tenant or members of this group; others are refused),
/// payloads first in batches, the manifest last; then DELETED.
void finish_deletion(rev_pointer self, std::vector<std::string> extra,
                     std::function<void(result<removal_result>)> done) {
  auto& st = self->state;
  const auto& r = *st.record();
  auto manifest = events::manifest_key(r.id);
  std::vector<std::string> also = extra;
  also.insert(also.end(), r.payload_keys.begin(), r.payload_keys.end());
  also.push_back(manifest);
  self->request(st.deps.store, st.deps.timeout, group_atom::value, r.id.tenant, r.payload_group_id, also)
      .await(
          [=](group_snapshot& group) {
            auto out = std::make_shared<removal_result>();
            std::vector<std::string> payloads;
            std::set<std::string> planned;
            bool has_manifest = false;
            auto plan = [&](const std::string& key) {
              if (key == manifest) has_manifest = true;
              else if (planned.insert(key).second) payloads.push_back(key);
            };
            for (const auto& m : group.members) plan(m.ref.key);
            for (const auto& k : self->state.record()->payload_keys)
              if (!group.outside.count(k)) plan(k);  // absent ones count as removed
            for (const auto& k : extra) {
              auto outside = group.outside.find(k);
              if (outside == group.outside.end()) plan(k);
              else if (outside->second.group_id.empty()) plan(k);
              else out->refused_keys.push_back(
                  {k, "belongs to another group ('" + outside->second.group_id + "'); not touched"});
            }
            auto batches = std::make_shared<std::vector<std::vector<std::string>>>();
            for (size_t i = 0; i < payloads.size(); i += kRemovalBatch)
              batches->emplace_back(payloads.begin() + i,
                                    payloads.begin() + std::min(payloads.size(), i + kRemovalBatch));
            if (has_manifest || !self->state.record()->manifest.manifest_key.empty())
              batches->push_back({manifest});
            remove_batches(self, batches, 0, out, done);
          },
          [=](caf::error& err) { done(to_status(err)); });
}

/// Replies to AbortImport/RemoveRevision: finish a deletion that is (or was
/// already) under way; a DELETED record just comes back.
void delete_and_reply(rev_pointer self, std::vector<std::string> extra,
                      caf::typed_response_promise<removal_result> rp) {
  const auto* r = self->state.record();
  if (r->availability == v1::DELETED) {
    removal_result out;
    out.view = current_view(self);
    rp.deliver(out);
    return;
  }
  finish_deletion(self, std::move(extra), [=](result<removal_result> done) mutable {
    if (done.ok()) rp.deliver(*done); else rp.deliver(to_error(done.error()));
  });
}

/// A lease of `id` in a fold as a reply (an ended one carries only its id).
lease_view lease_reply(const events::revision_index& fold, const events::revision_key& id,
                       uint64_t lease_id) {
  lease_view out{id, {}};
  out.lease.id = lease_id;
  if (const auto* r = fold.find(id))
    if (auto it = r->leases.find(lease_id); it != r->leases.end()) out.lease = it->second;
  return out;
}

/// The lease a holder got: its newest one in the fold.
lease_view holder_reply(const events::revision_index& fold, const events::revision_key& id,
                        const std::string& holder) {
  lease_view out{id, {}};
  if (const auto* r = fold.find(id))
    if (const auto* l = lease_of_holder(*r, holder)) out.lease = *l;
  return out;
}

/// The record a lease command routed here concerns (the registry routes a
/// lease id only to the revision holding it; it may have ended meanwhile).
result<const events::revision_record*> lease_holder(const events::revision_record* r,
                                                    uint64_t lease_id) {
  if (!r) return status{errc::not_found, "lease " + std::to_string(lease_id) + " does not exist"};
  return r;
}

/// Continues a deletion under way (a restart or a finished drain started it).
void continue_deletion(rev_pointer self) {
  const auto* r = self->state.record();
  if (!r || r->availability != v1::DELETING) return;
  finish_deletion(self, {}, [=](result<removal_result> done) {
    if (!done.ok())
      spdlog::warn("deletion of {} did not finish: {}", events::canonical_text(self->state.id),
                   done.error().to_string());
  });
}

}  // namespace

revision_view view_of(const events::revision_record& r, const events::revision_index& index) {
  revision_view v;
  v.record = r;
  v.active_lease_count = static_cast<uint32_t>(r.leases.size());
  for (const auto& [id, l] : r.leases)
    if (!v.nearest_lease_expiry_ms || l.expiry_ms < v.nearest_lease_expiry_ms)
      v.nearest_lease_expiry_ms = l.expiry_ms;
  if (r.operation_id)
    if (auto it = index.operations.find(r.operation_id); it != index.operations.end())
      v.operation = it->second;
  return v;
}

revision_actor::behavior_type revision_impl(rev_pointer self, events::revision_key id,
                                            events::revision_index initial, revision_deps deps) {
  self->state.id = id;
  self->state.local = std::move(initial);
  self->state.deps = std::move(deps);
  auto view_reply = [id](const events::revision_index& fold) { return view_of(*fold.find(id), fold); };
  return {
      // ------------------------------------------------- decision commands
      [=](begin_import& cmd) {
        auto rp = self->make_response_promise<revision_view>();
        enqueue_decision<revision_view>(
            self, rp, [cmd](auto* r, const auto& ctx) { return decide_begin(r, cmd, ctx); },
            view_reply);
        return rp;
      },
      [=](update_policy& cmd) {
        auto rp = self->make_response_promise<revision_view>();
        enqueue_decision<revision_view>(
            self, rp,
            [cmd](auto* r, const auto& ctx) { return decide_update_policy(r, cmd, ctx); },
            view_reply);
        return rp;
      },
      [=](acquire_lease& cmd) {
        auto rp = self->make_response_promise<lease_view>();
        enqueue_decision<lease_view>(
            self, rp, [cmd](auto* r, const auto& ctx) { return decide_acquire(r, cmd, ctx); },
            [id, holder = cmd.holder](const auto& fold) { return holder_reply(fold, id, holder); });
        return rp;
      },
      [=](renew_lease& cmd) {
        auto rp = self->make_response_promise<lease_view>();
        enqueue_decision<lease_view>(
            self, rp,
            [cmd](auto* r, const auto& ctx) -> result<decision> {
              auto held = lease_holder(r, cmd.lease_id);
              if (!held) return held.error();
              return decide_renew(**held, cmd, ctx);
            },
            [id, lease = cmd.lease_id](const auto& fold) { return lease_reply(fold, id, lease); });
        return rp;
      },
      [=](release_lease& cmd) {
        auto rp = self->make_response_promise<lease_view>();
        auto before = std::make_shared<lease_view>();  // the lease as it was
        enqueue_decision<lease_view>(
            self, rp,
            [=](auto* r, const auto& ctx) -> result<decision> {
              *before = lease_view{id, {}};
              before->lease.id = cmd.lease_id;
              if (!r) return decision{};
              if (auto it = r->leases.find(cmd.lease_id); it != r->leases.end())
                before->lease = it->second;
              return decide_release(*r, cmd, ctx);
            },
            [before](const auto&) { return *before; });
        return rp;
      },
      [=](revoke_lease& cmd) {
        auto rp = self->make_response_promise<lease_view>();
        auto before = std::make_shared<lease_view>(lease_view{id, {}});
        enqueue_decision<lease_view>(
            self, rp,
            [=](auto* r, const auto& ctx) -> result<decision> {
              auto held = lease_holder(r, cmd.lease_id);
              if (!held) return held.error();
              if (auto it = (*held)->leases.find(cmd.lease_id); it != (*held)->leases.end())
                before->lease = it->second;
              return decide_revoke(**held, cmd, ctx);
            },
            [before](const auto&) { return *before; });
        return rp;
      },
      // ----------------------------------------------- multi-step commands
      [=](commit_import& cmd) {
        auto rp = self->make_response_promise<revision_view>();
        enqueue_multi_step(self, [=]() mutable {
          auto checked = precheck_commit(self->state.record(), cmd);
          if (!checked) { rp.deliver(to_error(checked.error())); return; }
          if (!checked->needs_group_check) { rp.deliver(current_view(self)); return; }
          auto normalized = checked->normalized;
          std::vector<std::string> keys = normalized.payload_keys;
          keys.push_back(normalized.manifest.manifest_key);
          const auto& r = *self->state.record();
          self->request(self->state.deps.store, self->state.deps.timeout, group_atom::value,
                        r.id.tenant, r.payload_group_id, keys)
              .await(
                  [=](group_snapshot& group) mutable {
                    const auto& r = *self->state.record();
                    if (auto st = validate_commit_group(r, normalized, group); !st.ok())
                      { rp.deliver(to_error(st)); return; }
                    persist(self, decide_commit(r, normalized, group, context(self)).events,
                            [=](status s) mutable {
                              if (s.ok()) rp.deliver(current_view(self));
                              else rp.deliver(to_error(s));
                            });
                  },
                  [=](caf::error& err) mutable { rp.deliver(err); });
        });
        return rp;
      },
      [=](abort_import& cmd) {
        auto rp = self->make_response_promise<removal_result>();
        enqueue_multi_step(self, [=]() mutable {
          auto decided = decide_abort(self->state.record(), cmd, context(self));
          if (!decided) { rp.deliver(to_error(decided.error())); return; }
          auto extra = cleaned_keys(cmd.keys_to_remove);  // as the event records them
          if (!decided->changes()) {
            delete_and_reply(self, extra, rp);
            return;
          }
          persist(self, std::move(decided->events), [=](status s) mutable {
            if (s.ok()) delete_and_reply(self, extra, rp);
            else rp.deliver(to_error(s));
          });
        });
        return rp;
      },
      [=](remove_revision& cmd) {
        auto rp = self->make_response_promise<removal_result>();
        enqueue_multi_step(self, [=]() mutable {
          auto decided = decide_remove(self->state.record(), cmd, context(self));
          if (!decided) { rp.deliver(to_error(decided.error())); return; }
          // A drain replies at once; the reconciler deletes when it ends.
          auto reply = [=]() mutable {
            if (self->state.record()->draining())
              rp.deliver(removal_result{current_view(self), {}, {}});
            else
              delete_and_reply(self, {}, rp);
          };
          if (!decided->changes()) {
            reply();
            return;
          }
          persist(self, std::move(decided->events), [=](status s) mutable {
            if (s.ok()) reply();
            else rp.deliver(to_error(s));
          });
        });
        return rp;
      },
      [=](caf::tick_atom) {
        enqueue_multi_step(self, [=] {
          const auto* r = self->state.record();
          if (!r) return;
          auto decided = decide_reconcile(*r, context(self));
          if (!decided.changes()) return continue_deletion(self);
          persist(self, std::move(decided.events), [=](status s) {
            if (s.ok()) return continue_deletion(self);
            spdlog::warn("reconciling {} failed: {}; the next round retries",
                         events::canonical_text(self->state.id), s.to_string());
          });
        });
      },
      [=](pump_atom) {
        self->state.busy = false;  // the multi-step command's last await is done
        pump(self);
      },
      // ------------------------------------------- reads: the durable record
      [=](get_revision& cmd) -> caf::result<revision_view> {
        const auto* r = self->state.record();
        if (!r || (!r->visible() && !cmd.include_hidden))
          return to_error({errc::not_found, "revision " + events::canonical_text(cmd.id) +
                                                " does not exist" +
                                                (r ? " (it is " + v1::Availability_Name(r->availability) +
                                                         "; pass include_hidden to see it)"
                                                   : "")});
        return current_view(self);
      },
      [=](list_leases& cmd) -> caf::result<lease_list> {
        const auto* r = self->state.record();
        if (!r || r->availability == v1::DELETED)
          return to_error({errc::not_found,
                           "revision " + events::canonical_text(cmd.id) + " does not exist"});
        lease_list out;
        for (const auto& l : live_leases(*r, self->state.deps.now_ms()))
          out.leases.push_back({r->id, l});
        return out;
      },
  };
}

}  // namespace weightd::actors
