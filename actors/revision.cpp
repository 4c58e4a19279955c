#include "actors/revision.hpp"

#include <spdlog/spdlog.h>

#include <optional>
#include <set>
#include <utility>

#include "actors/errors.hpp"
#include "core/lease_decide.hpp"
#include "core/revision_decide.hpp"
#include "actors/operation_rounds.hpp"
#include "actors/revision_queue.hpp"

namespace weightd::actors {

const char* revision_state::name = "weightd.revision";

namespace v1 = events::v1;

namespace {

constexpr size_t kRemovalBatch = 64;

revision_view current_view(rev_pointer self) {
  return view_of(*self->state.record(), self->state.local);
}

/// The current view with the lineage events the last commit carried along,
/// as the journal committed them: what an upsert's lineage folds.
revision_view view_with_along(rev_pointer self) {
  auto view = current_view(self);
  view.committed_along = std::exchange(self->state.committed_along, {});
  return view;
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
    persist_and_apply(self, {std::move(e)}, [=](status s) {
      if (!s.ok()) return done(s);
      out->view = current_view(self);
      done(*out);
    });
    return;
  }
  if (st.deps.gate->closed())  // stopping: this batch is the last
    return done(status{errc::busy, "weightd is stopping: deleting " +
                                       events::canonical_text(st.id) +
                                       " stopped between batches; it stays DELETING and "
                                       "finishes after the restart"});
  auto keys = (*batches)[next];
  self->request(st.deps.store, st.deps.timeout, remove_atom::value, st.id.tenant, keys,
                v1::REMOVAL_LIFECYCLE)
      .then(
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
      .then(
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
                      caf::typed_response_promise<removal_result> rp,
                      std::function<void()> finished) {
  const auto* r = self->state.record();
  if (r->availability == v1::DELETED) {
    removal_result out;
    out.view = current_view(self);
    rp.deliver(out);
    return finished();
  }
  finish_deletion(self, std::move(extra), [=](result<removal_result> done) mutable {
    if (done.ok()) rp.deliver(*done); else rp.deliver(to_error(done.error()));
    finished();
  });
}

/// The reconciler's abandon rule: an IMPORTING revision idle past the abandon
/// timeout, counting the puts into its group, is aborted and deleted.
void abandon_if_idle(rev_pointer self, std::function<void()> finished) {
  const auto& r = *self->state.record();
  self->request(self->state.deps.store, self->state.deps.timeout, group_atom::value, r.id.tenant,
                r.payload_group_id, std::vector<std::string>{})
      .then(
          [=](group_snapshot& group) {
            auto decided = decide_abandon(*self->state.record(), group.last_put_ms,
                                          self->state.deps.import_abandon, decide_context_of(self));
            if (!decided.changes()) return finished();
            persist_and_apply(self, std::move(decided.events), [=](status s) {
              if (!s.ok()) {
                spdlog::warn("abandoning {} not recorded: {}; the next round retries",
                             events::canonical_text(self->state.id), s.to_string());
                return finished();
              }
              finish_deletion(self, {}, [=](result<removal_result>) { finished(); });
            });
          },
          [=](caf::error&) { finished(); });  // the next round asks again
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
void continue_deletion(rev_pointer self, std::function<void()> finished) {
  const auto* r = self->state.record();
  if (!r || r->availability != v1::DELETING) return finished();
  finish_deletion(self, {}, [=](result<removal_result> done) {
    // Success is the RevisionDeleted event's line (revision_change_log.hpp).
    if (!done.ok())
      spdlog::warn("deletion did not finish rev={} error=\"{}\"; the next round retries",
                   events::canonical_text(self->state.id), done.error().to_string());
    finished();
  });
}

/// A decide function that only needs the record.
template <class Decide>
auto on_record(Decide decide) {
  return [decide](const events::revision_record* r, const events::revision_index&,
                  const decide_context& ctx) -> result<decision> { return decide(r, ctx); };
}

/// BeginImport with an upsert's claim events along. It runs alone so that
/// its reply carries those events as committed; they go only with a new
/// import.
void begin_with_claim(rev_pointer self, const begin_import& cmd,
                      caf::typed_response_promise<revision_view> rp, std::function<void()> finished) {
  auto decided = decide_begin(self->state.record(), cmd, decide_context_of(self));
  if (decided && !decided->changes())
    decided = status{errc::conflict, "revision " + events::canonical_text(cmd.id) +
                                         " exists already; an upsert targets a new one"};
  if (!decided) {
    rp.deliver(to_error(decided.error()));
    return finished();
  }
  auto events = std::move(decided->events);
  for (const auto& e : cmd.along) events.push_back(e);
  persist_and_apply(self, std::move(events), [=](status s) mutable {
    if (s.ok()) rp.deliver(view_with_along(self));
    else rp.deliver(to_error(s));
    finished();
  });
}

/// The operation `id` of this revision, as a reply.
caf::result<events::operation_record> operation_reply(const events::revision_index& fold,
                                                      uint64_t id) {
  auto it = fold.operations.find(id);
  if (it == fold.operations.end())
    return to_error({errc::not_found, "operation " + std::to_string(id) + " does not exist"});
  return it->second;
}

}  // namespace

revision_actor::behavior_type revision_impl(rev_pointer self, events::revision_key id,
                                            events::revision_index initial, revision_deps deps) {
  self->state.id = id;
  self->state.local = std::move(initial);
  self->state.deps = std::move(deps);
  self->state.queue = command_queue<decision_command>(
      [self](auto next, auto finished) { run_decisions(self, next, finished); },
      self->state.deps.gate);
  auto view_reply = [id](const events::revision_index& fold) { return view_of(*fold.find(id), fold); };
  auto operation_of = [id](const events::revision_index& fold) {
    const auto* op = newest_operation(fold, id);
    return op ? *op : events::operation_record{};
  };
  return {
      // ------------------------------------------------- decision commands
      [=](begin_import& cmd) {
        auto rp = self->make_response_promise<revision_view>();
        if (!cmd.along.empty()) {  // an upsert's: alone, its reply carries the claim's events
          enqueue_multi_step(self, [=](std::function<void()> finished) mutable {
            begin_with_claim(self, cmd, rp, finished);
          });
          return rp;
        }
        enqueue_decision<revision_view>(
            self, rp,
            on_record([cmd](auto* r, const auto& ctx) { return decide_begin(r, cmd, ctx); }),
            view_reply);
        return rp;
      },
      [=](update_policy& cmd) {
        auto rp = self->make_response_promise<revision_view>();
        enqueue_decision<revision_view>(
            self, rp,
            [cmd](auto* r, const auto& fold, const auto& ctx) {
              return decide_update_policy(r, fold, cmd, ctx);
            },
            view_reply);
        return rp;
      },
      [=](retire_revision& cmd) {
        auto rp = self->make_response_promise<revision_view>();
        enqueue_decision<revision_view>(
            self, rp,
            on_record([cmd](auto* r, const auto& ctx) { return decide_retire(r, cmd, ctx); }),
            [id](const events::revision_index& fold) {
              const auto* r = fold.find(id);
              return r ? view_of(*r, fold) : revision_view{};
            });
        return rp;
      },
      [=](migrate_revision& cmd) {
        auto rp = self->make_response_promise<events::operation_record>();
        enqueue_decision<events::operation_record>(
            self, rp,
            [cmd](auto* r, const auto& fold, const auto& ctx) {
              return decide_migrate(r, fold, cmd, ctx);
            },
            operation_of);
        return rp;
      },
      [=](auto_migrate& cmd) {
        auto rp = self->make_response_promise<events::operation_record>();
        enqueue_decision<events::operation_record>(
            self, rp,
            on_record([cmd](auto* r, const auto& ctx) -> result<decision> {
              return decide_auto_migrate(r, cmd, ctx);
            }),
            operation_of);
        return rp;
      },
      [=](acquire_lease& cmd) {
        auto rp = self->make_response_promise<lease_view>();
        enqueue_decision<lease_view>(
            self, rp, on_record([cmd](auto* r, const auto& ctx) { return decide_acquire(r, cmd, ctx); }),
            [id, holder = cmd.holder](const auto& fold) { return holder_reply(fold, id, holder); });
        return rp;
      },
      [=](renew_lease& cmd) {
        auto rp = self->make_response_promise<lease_view>();
        enqueue_decision<lease_view>(
            self, rp,
            on_record([cmd](auto* r, const auto& ctx) -> result<decision> {
              auto held = lease_holder(r, cmd.lease_id);
              if (!held) return held.error();
              return decide_renew(**held, cmd, ctx);
            }),
            [id, lease = cmd.lease_id](const auto& fold) { return lease_reply(fold, id, lease); });
        return rp;
      },
      [=](release_lease& cmd) {
        auto rp = self->make_response_promise<lease_view>();
        auto before = std::make_shared<lease_view>();  // the lease as it was
        enqueue_decision<lease_view>(
            self, rp,
            on_record([=](auto* r, const auto& ctx) -> result<decision> {
              *before = lease_view{id, {}};
              before->lease.id = cmd.lease_id;
              if (!r) return decision{};
              if (auto it = r->leases.find(cmd.lease_id); it != r->leases.end())
                before->lease = it->second;
              return decide_release(*r, cmd, ctx);
            }),
            [before](const auto&) { return *before; });
        return rp;
      },
      [=](revoke_lease& cmd) {
        auto rp = self->make_response_promise<lease_view>();
        auto before = std::make_shared<lease_view>(lease_view{id, {}});
        enqueue_decision<lease_view>(
            self, rp,
            on_record([=](auto* r, const auto& ctx) -> result<decision> {
              auto held = lease_holder(r, cmd.lease_id);
              if (!held) return held.error();
              if (auto it = (*held)->leases.find(cmd.lease_id); it != (*held)->leases.end())
                before->lease = it->second;
              return decide_revoke(**held, cmd, ctx);
            }),
            [before](const auto&) { return *before; });
        return rp;
      },
      // ----------------------------------------------- multi-step commands
      [=](commit_import& cmd) {
        auto rp = self->make_response_promise<revision_view>();
        enqueue_multi_step(self, [=](std::function<void()> finished) mutable {
          auto fail = [=](const status& st) mutable {
            rp.deliver(to_error(st));
            finished();
          };
          auto checked = precheck_commit(self->state.record(), cmd);
          if (!checked) return fail(checked.error());
          if (!checked->needs_group_check) {
            if (!cmd.along.empty())  // the claim's events go only with the commit itself
              return fail({errc::conflict, "revision " + events::canonical_text(cmd.id) +
                                               " is committed already"});
            rp.deliver(current_view(self));
            return finished();
          }
          auto normalized = checked->normalized;
          std::vector<std::string> keys = normalized.payload_keys;
          keys.push_back(normalized.manifest.manifest_key);
          const auto& r = *self->state.record();
          self->request(self->state.deps.store, self->state.deps.timeout, group_atom::value,
                        r.id.tenant, r.payload_group_id, keys)
              .then(
                  [=](group_snapshot& group) mutable {
                    const auto& r = *self->state.record();
                    if (auto st = validate_commit_group(r, normalized, group); !st.ok())
                      return fail(st);
                    auto decided = decide_commit(r, normalized, group, decide_context_of(self));
                    if (!decided) return fail(decided.error());
                    auto events = std::move(decided->events);
                    for (const auto& e : cmd.along) events.push_back(e);
                    persist_and_apply(self, std::move(events), [=](status s) mutable {
                      if (!s.ok()) return fail(s);
                      rp.deliver(view_with_along(self));
                      finished();
                    });
                  },
                  [=](caf::error& err) mutable { fail(to_status(err)); });
        });
        return rp;
      },
      [=](abort_import& cmd) {
        auto rp = self->make_response_promise<removal_result>();
        enqueue_multi_step(self, [=](std::function<void()> finished) mutable {
          auto decided = decide_abort(self->state.record(), cmd, decide_context_of(self));
          if (!decided) {
            rp.deliver(to_error(decided.error()));
            return finished();
          }
          auto extra = cleaned_keys(cmd.keys_to_remove);  // as the event records them
          if (!decided->changes()) return delete_and_reply(self, extra, rp, finished);
          persist_and_apply(self, std::move(decided->events), [=](status s) mutable {
            if (s.ok()) return delete_and_reply(self, extra, rp, finished);
            rp.deliver(to_error(s));
            finished();
          });
        });
        return rp;
      },
      [=](remove_revision& cmd) {
        auto rp = self->make_response_promise<removal_result>();
        enqueue_multi_step(self, [=](std::function<void()> finished) mutable {
          auto decided = decide_remove(self->state.record(), self->state.local, cmd, decide_context_of(self));
          if (!decided) {
            rp.deliver(to_error(decided.error()));
            return finished();
          }
          // A drain replies at once; the reconciler deletes when it ends.
          auto reply = [=]() mutable {
            if (!self->state.record()->draining()) return delete_and_reply(self, {}, rp, finished);
            rp.deliver(removal_result{current_view(self), {}, {}});
            finished();
          };
          if (!decided->changes()) return reply();
          persist_and_apply(self, std::move(decided->events), [=](status s) mutable {
            if (s.ok()) return reply();
            rp.deliver(to_error(s));
            finished();
          });
        });
        return rp;
      },
      [=](cancel_operation& cmd) {
        auto rp = self->make_response_promise<events::operation_record>();
        enqueue_multi_step(self, [=](std::function<void()> finished) mutable {
          if (!self->state.local.operations.count(cmd.operation_id)) {
            rp.deliver(to_error({errc::not_found,
                                 "operation " + std::to_string(cmd.operation_id) + " does not exist"}));
            return finished();
          }
          cancel_running_operation(self, cmd.operation_id, rp, finished);
        });
        return rp;
      },
      [=](caf::tick_atom) {
        if (self->state.tick_queued) return;  // one is waiting already
        if (self->state.deps.gate->closed()) return;  // stopping: no automatic work starts
        self->state.tick_queued = true;
        enqueue_multi_step(self, [=](std::function<void()> finished) {
          self->state.tick_queued = false;
          const auto* r = self->state.record();
          if (!r) return finished();
          // Leases and drains first, then the deletion or the operation round.
          auto next = [=](status s) {
            if (!s.ok()) {
              spdlog::warn("reconciling {} failed: {}; the next round retries",
                           events::canonical_text(self->state.id), s.to_string());
              return finished();
            }
            if (self->state.record()->availability == v1::DELETING)
              return continue_deletion(self, finished);
            if (self->state.record()->availability == v1::IMPORTING)
              return abandon_if_idle(self, finished);
            observe_replicas(self, [=] { run_operation_round(self, finished); });
          };
          auto decided = decide_reconcile(*r, decide_context_of(self));
          if (!decided.changes()) return next({});
          persist_and_apply(self, std::move(decided.events), next);
        });
      },
      // ------------------------------------------- reads: the durable record
      [=](get_operation& cmd) { return operation_reply(self->state.local, cmd.operation_id); },
      [=](open_local& cmd) -> caf::result<local_listing> {
        const auto* r = self->state.record();
        auto name = events::canonical_text(cmd.id);
        if (!r || !r->visible())
          return to_error({errc::not_found, "revision " + name + " does not exist"});
        if (cmd.lease_id == 0)
          return to_error({errc::invalid_argument,
                           "lease_id is required: local reads need a live lease on " + name});
        auto lease = r->leases.find(cmd.lease_id);
        if (lease == r->leases.end() || !lease->second.live_at(self->state.deps.now_ms()))
          return to_error({errc::lease_expired, "lease " + std::to_string(cmd.lease_id) +
                                                    " is not a live lease on " + name +
                                                    "; acquire one and open again"});
        auto keys = r->payload_keys;
        keys.push_back(r->manifest.manifest_key);
        auto rp = self->make_response_promise<local_listing>();
        auto id = r->id;
        self->request(self->state.deps.store, self->state.deps.timeout, local_atom::value,
                      id.tenant, keys)
            .then(
                [=](std::vector<local_file>& files) mutable {
                  local_listing out;
                  out.id = id;
                  out.manifest = std::move(files.back());
                  files.pop_back();
                  out.payloads = std::move(files);
                  rp.deliver(std::move(out));
                },
                [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
        return rp;
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
