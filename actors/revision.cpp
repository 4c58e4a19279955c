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

/// Persists `events`, applies them, tells the registry; then `done`.
/// .await: the revision takes no other command until this completes.
void persist(rev_pointer self, std::vector<v1::Envelope> events, std::function<void(status)> done) {
  self->request(self->state.deps.journal, self->state.deps.timeout, append_atom::value,
                event_batch{std::move(events)})
      .await(
          [=](event_batch& committed) {
            auto& st = self->state;
            status applied;
            for (const auto& e : committed.events) {
              if (applied = events::evolve_revisions(st.local, e); !applied.ok()) break;
              if (applied = events::check_invariants(*st.record(), st.local); !applied.ok()) break;
            }
            if (!applied.ok()) spdlog::error("revision fold refused its own event: {}", applied.to_string());
            if (const auto* r = st.record()) {
              self->send(st.deps.registry, current_view(self));
              if (r->draining() && r->leases.empty())  // the last lease went: delete now
                self->send(self, caf::tick_atom::value);
            }
            done(applied);
          },
          [=](caf::error& err) { done(to_status(err)); });
}

/// Runs a decision: nothing to change -> the current view; else persist.
template <class Reply>
void run(rev_pointer self, result<decision> decided, caf::typed_response_promise<Reply> rp,
         std::function<Reply()> reply) {
  if (!decided) {
    rp.deliver(to_error(decided.error()));
    return;
  }
  if (!decided->changes()) {
    rp.deliver(reply());
    return;
  }
  persist(self, std::move(decided->events), [=](status s) mutable {
    if (s.ok()) rp.deliver(reply()); else rp.deliver(to_error(s));
  });
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

/// A lease of this revision as a reply (an ended one carries only its id).
lease_view lease_reply(rev_pointer self, uint64_t lease_id) {
  lease_view out{self->state.id, {}};
  out.lease.id = lease_id;
  if (const auto* r = self->state.record())
    if (auto it = r->leases.find(lease_id); it != r->leases.end()) out.lease = it->second;
  return out;
}

/// The lease a holder got: its newest one in the fold.
lease_view holder_reply(rev_pointer self, const std::string& holder) {
  lease_view out{self->state.id, {}};
  if (const auto* l = lease_of_holder(*self->state.record(), holder)) out.lease = *l;
  return out;
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
  {
    self->state.id = id;
    self->state.local = std::move(initial);
    self->state.deps = std::move(deps);
    if (const auto* r = self->state.record(); r && r->availability == v1::DELETING)
      self->send(self, caf::tick_atom::value);  // a crash interrupted the deletion
    return {
        [=](begin_import& cmd) {
          auto rp = self->make_response_promise<revision_view>();
          run<revision_view>(self, decide_begin(self->state.record(), cmd, context(self)), rp,
                             [=] { return current_view(self); });
          return rp;
        },
        [=](commit_import& cmd) -> caf::result<revision_view> {
          auto checked = precheck_commit(self->state.record(), cmd);
          if (!checked) return to_error(checked.error());
          if (!checked->needs_group_check) return current_view(self);
          auto normalized = checked->normalized;
          std::vector<std::string> keys = normalized.payload_keys;
          keys.push_back(normalized.manifest.manifest_key);
          auto rp = self->make_response_promise<revision_view>();
          const auto& r = *self->state.record();
          self->request(self->state.deps.store, self->state.deps.timeout, group_atom::value,
                        r.id.tenant, r.payload_group_id, keys)
              .await(
                  [=](group_snapshot& group) mutable {
                    const auto& r = *self->state.record();
                    if (auto st = validate_commit_group(r, normalized, group); !st.ok()) {
                      rp.deliver(to_error(st));
                      return;
                    }
                    run<revision_view>(self, decide_commit(r, normalized, group, context(self)), rp,
                                       [=] { return current_view(self); });
                  },
                  [=](caf::error& err) mutable { rp.deliver(err); });
          return rp;
        },
        [=](abort_import& cmd) -> caf::result<removal_result> {
          auto decided = decide_abort(self->state.record(), cmd, context(self));
          if (!decided) return to_error(decided.error());
          auto rp = self->make_response_promise<removal_result>();
          auto extra = cleaned_keys(cmd.keys_to_remove);  // as the event records them
          if (!decided->changes()) {
            delete_and_reply(self, extra, rp);
            return rp;
          }
          persist(self, std::move(decided->events), [=](status s) mutable {
            if (!s.ok()) {
              rp.deliver(to_error(s));
              return;
            }
            delete_and_reply(self, extra, rp);
          });
          return rp;
        },
        [=](update_policy& cmd) {
          auto rp = self->make_response_promise<revision_view>();
          run<revision_view>(self, decide_update_policy(self->state.record(), cmd, context(self)),
                             rp, [=] { return current_view(self); });
          return rp;
        },
        [=](remove_revision& cmd) -> caf::result<removal_result> {
          auto decided = decide_remove(self->state.record(), cmd, context(self));
          if (!decided) return to_error(decided.error());
          auto rp = self->make_response_promise<removal_result>();
          // A drain replies at once; the reconciler deletes when it ends.
          auto reply = [=]() mutable {
            if (self->state.record()->draining()) rp.deliver(removal_result{current_view(self), {}, {}});
            else delete_and_reply(self, {}, rp);
          };
          if (!decided->changes()) {
            reply();
            return rp;
          }
          persist(self, std::move(decided->events), [=](status s) mutable {
            if (s.ok()) reply(); else rp.deliver(to_error(s));
          });
          return rp;
        },
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
        [=](acquire_lease& cmd) {
          auto rp = self->make_response_promise<lease_view>();
          run<lease_view>(self, decide_acquire(self->state.record(), cmd, context(self)), rp,
                          [=] { return holder_reply(self, cmd.holder); });
          return rp;
        },
        [=](renew_lease& cmd) {
          auto rp = self->make_response_promise<lease_view>();
          run<lease_view>(self, decide_renew(*self->state.record(), cmd, context(self)), rp,
                          [=] { return lease_reply(self, cmd.lease_id); });
          return rp;
        },
        [=](release_lease& cmd) {
          auto rp = self->make_response_promise<lease_view>();
          auto before = lease_reply(self, cmd.lease_id);
          run<lease_view>(self, decide_release(*self->state.record(), cmd, context(self)), rp,
                          [=] { return before; });
          return rp;
        },
        [=](revoke_lease& cmd) {
          auto rp = self->make_response_promise<lease_view>();
          auto before = lease_reply(self, cmd.lease_id);
          run<lease_view>(self, decide_revoke(*self->state.record(), cmd, context(self)), rp,
                          [=] { return before; });
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
        [=](caf::tick_atom) {
          const auto* r = self->state.record();
          if (!r) return;
          auto decided = decide_reconcile(*r, context(self));
          if (!decided.changes()) return continue_deletion(self);
          persist(self, std::move(decided.events), [=](status s) {
            if (s.ok()) return continue_deletion(self);
            spdlog::warn("reconciling {} failed: {}; the next round retries",
                         events::canonical_text(self->state.id), s.to_string());
          });
        },
    };
  }
}

}  // namespace weightd::actors
