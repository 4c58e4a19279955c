#include "actors/registry.hpp"

#include <malloc.h>
#include <spdlog/spdlog.h>

#include "actors/errors.hpp"
#include "core/lease_decide.hpp"
#include "core/reads.hpp"
#include "core/validate.hpp"

namespace weightd::actors {

const char* registry_state::name = "weightd.registry";

namespace v1 = events::v1;

namespace {

using reg_pointer = registry_actor::stateful_pointer<registry_state>;

/// Tells the object store's guard what the revision's state means for its group.
void update_guard(reg_pointer self, const events::revision_record& r) {
  auto store = self->state.deps.store;
  auto owner = events::canonical_text(r.id);
  if (r.availability == v1::DELETED)
    self->send(store, guard_atom::value, r.id.tenant, r.payload_group_id);
  else
    self->send(store, guard_atom::value, r.id.tenant, r.payload_group_id,
               managed_group{owner, r.availability == v1::IMPORTING, r.policy.preferred});
}

/// The actor of `id`: existing, woken from its recovered fold (the part of
/// the global fold that belongs to it), or new.
revision_actor actor_for(reg_pointer self, const events::revision_key& id) {
  auto& st = self->state;
  if (auto it = st.actors.find(id); it != st.actors.end()) return it->second;
  events::revision_index initial;
  if (auto view = st.views.find(id); view != st.views.end()) {
    const auto& r = view->second.record;
    initial.revisions[id] = r;
    if (r.availability != v1::DELETED) initial.groups[r.payload_group_id] = id;
    if (auto ops = st.dormant_operations.find(id); ops != st.dormant_operations.end()) {
      initial.operations = std::move(ops->second);
      st.dormant_operations.erase(ops);
    }
    initial.last_operation_id = st.recovered_last_operation_id;
    initial.last_lease_id = st.recovered_last_lease_id;
  }
  // Linked: they stop with the registry.
  auto actor = self->spawn<caf::linked>(revision_impl, id, std::move(initial), st.deps);
  st.actors.emplace(id, actor);
  return actor;
}

/// node::stop closed the gate (stop_gate.hpp): commands that change state
/// are refused, reads are still answered.
bool stopping(reg_pointer self) { return self->state.deps.gate->closed(); }
caf::error stopping_error() {
  return to_error({errc::busy, "weightd is stopping and accepts no new command; retry once it "
                               "is back"});
}

/// Checks the message's identity (defaults filled) and hands it to the
/// revision's actor, which answers the client directly.
template <class Reply, class Message>
caf::result<Reply> hand_over(reg_pointer self, Message& msg) {
  auto checked = events::checked_revision_key(msg.id.to_proto());
  if (!checked) return to_error(checked.error());
  msg.id = *checked;
  return self->delegate(actor_for(self, msg.id), std::move(msg));
}

/// A command for one revision: handed over unless the node is stopping.
template <class Reply, class Command>
caf::result<Reply> route(reg_pointer self, Command& cmd) {
  if (stopping(self)) return stopping_error();
  if (auto st = check_command(cmd); !st.ok()) return to_error(st);
  return hand_over<Reply>(self, cmd);
}

/// A read of one revision: NOT_FOUND when the registry never saw it (no
/// actor is spawned for a mere lookup), else routed like a command.
template <class Reply, class Command>
caf::result<Reply> route_known(reg_pointer self, Command& cmd) {
  auto checked = events::checked_revision_key(cmd.id.to_proto());
  if (checked && !self->state.views.count(*checked))
    return to_error({errc::not_found,
                     "revision " + events::canonical_text(*checked) + " does not exist"});
  return hand_over<Reply>(self, cmd);
}

/// The actor of a lineage: existing, woken from its fold, or new.
lineage_actor lineage_actor_for(reg_pointer self, const events::revision_key& id) {
  auto& st = self->state;
  auto key = events::lineage_key(id);
  if (auto it = st.lineage_actors.find(key); it != st.lineage_actors.end()) return it->second;
  events::lineage_record initial;
  if (auto it = st.dormant_lineages.find(key); it != st.dormant_lineages.end()) {
    initial = std::move(it->second);
    st.dormant_lineages.erase(it);
  }
  lineage_deps deps{st.deps.journal, caf::actor_cast<registry_actor>(self), st.deps.now_ms,
                    st.deps.default_policy, st.deps.timeout, st.deps.reconcile_interval,
                    st.deps.gate};
  auto actor = self->spawn<caf::linked>(lineage_impl, key, std::move(initial), std::move(deps));
  st.lineage_actors.emplace(key, actor);
  return actor;
}

/// A lineage the store has heard of: an actor, a record, or a revision of it.
bool lineage_known(reg_pointer self, const events::revision_key& key) {
  auto& st = self->state;
  auto first = st.views.lower_bound(key);
  return st.lineage_actors.count(key) || st.dormant_lineages.count(key) ||
         (first != st.views.end() && first->first.same_lineage(key));
}

/// Checks a lineage command's identity and hands it to the lineage's actor.
/// A lineage nobody ever imported into is NOT_FOUND: no actor is spawned for
/// a request naming it (bad input must not grow the daemon).
template <class Reply, class Command>
caf::result<Reply> route_lineage(reg_pointer self, Command& cmd, events::revision_key& id,
                                 const char* field) {
  if (auto st = check_command(cmd); !st.ok()) return to_error(st);
  auto checked = checked_lineage_id(id, field);
  if (!checked) return to_error(checked.error());
  id = *checked;
  auto key = events::lineage_key(id);
  if (!lineage_known(self, key)) return to_error(unknown_lineage(key));
  return self->delegate(lineage_actor_for(self, id), std::move(cmd));
}

/// Keeps the view of a revision and the lease ids it holds.
void learn(reg_pointer self, revision_view view) {
  auto& st = self->state;
  bool guard_changes = true, lineage_changes = true;
  if (auto old = st.views.find(view.record.id); old != st.views.end()) {
    for (const auto& [lease_id, l] : old->second.record.leases) st.lease_owners.erase(lease_id);
    guard_changes = old->second.record.availability != view.record.availability;
    lineage_changes = guard_changes || old->second.record.retired_by != view.record.retired_by;
  }
  // The lineage's watermark and claim follow availability (and retirement).
  // A lineage without an actor (no upsert asked for it since the start) is
  // a record here: a commit raises its watermark in place, no actor is spawned.
  if (lineage_changes) {
    auto key = events::lineage_key(view.record.id);
    if (auto it = st.lineage_actors.find(key); it != st.lineage_actors.end()) {
      self->send(it->second, view);
    } else if (view.record.visible()) {
      auto& dormant = st.dormant_lineages[key];
      dormant.lineage = key;
      events::advance_watermark(dormant, view.record.id.generation);
    }
  }
  for (const auto& [lease_id, l] : view.record.leases) st.lease_owners[lease_id] = view.record.id;
  if (view.operation) st.operation_owners[view.operation->id] = view.record.id;
  if (guard_changes) update_guard(self, view.record);  // leases do not concern the guard
  st.views[view.record.id] = std::move(view);
}

/// Hands a lease command to the revision holding the lease. A lease held by
/// nobody is answered by `not_held(issued)`: issued = the id was handed out,
/// so the lease has ended (released, expired or revoked).
caf::error unknown_lease(uint64_t id) {
  return to_error({errc::not_found, "lease " + std::to_string(id) +
                                        " does not exist; acquire one with AcquireLease"});
}

template <class Command>
caf::result<lease_view> route_lease(reg_pointer self, Command& cmd,
                                    std::function<caf::result<lease_view>(bool)> not_held) {
  auto& st = self->state;
  if (stopping(self)) return stopping_error();
  // Bad input is INVALID_ARGUMENT whatever the lease id names.
  if (auto st = check_command(cmd); !st.ok()) return to_error(st);
  if (cmd.lease_id == 0) return to_error({errc::invalid_argument, "lease_id must be at least 1"});
  if (auto it = st.lease_owners.find(cmd.lease_id); it != st.lease_owners.end()) {
    if (!cmd.caller_tenant.empty() && it->second.tenant != cmd.caller_tenant)
      return not_held(false);  // another tenant's: as if it had never been issued
    return self->delegate(actor_for(self, it->second), std::move(cmd));
  }
  return not_held(cmd.lease_id <= st.deps.lease_ids->load());
}

/// Hands an operation command to the revision that owns the operation.
template <class Command>
caf::result<events::operation_record> route_operation(reg_pointer self, Command& cmd) {
  auto& st = self->state;
  if (auto checked = check_command(cmd); !checked.ok()) return to_error(checked);
  auto it = st.operation_owners.find(cmd.operation_id);
  const auto* owner = it == st.operation_owners.end() ? nullptr : &it->second;
  if (auto visible = check_operation_visible(cmd.operation_id, owner, cmd.caller_tenant);
      !visible.ok())
    return to_error(visible);
  return self->delegate(actor_for(self, it->second), std::move(cmd));
}


/// Carries a round's decisions out: ticks, and residency moves that the
/// revisions re-check before they start them.
void take(reg_pointer self, const reconcile_report& report) {
  auto& st = self->state;
  for (const auto& d : report.decisions) {
    if (is_tick(d)) {
      self->send(actor_for(self, d.id), caf::tick_atom::value);
      continue;
    }
    auto id = d.id;
    const auto& policy = st.views.at(d.id).record.policy;
    self->request(actor_for(self, d.id), st.deps.timeout,
                  auto_migrate{d.id, d.target, policy.mixed_hot_ratio, d.action + ": " + d.reason})
        .then(
            // A move it started is logged as "migration started ... by=reconciler
            // reason=..." when its event commits (revision_change_log.hpp).
            [](events::operation_record&) {},
            [=](caf::error& err) {
              spdlog::warn("reconciler {} of {} failed: {}", d.action, events::canonical_text(id),
                           to_status(err).to_string());
            });
  }
  st.reconcile_cursor = report.decisions.size() >= st.reconciler.max_actions
                            ? report.decisions.back().id
                            : events::revision_key{};
}

/// Ticks the revisions whose payload groups lost a replica: each looks at
/// its replicas (READY <-> DEGRADED, REPAIRING).
void look_at_damaged_groups(reg_pointer self) {
  auto& st = self->state;
  self->request(st.deps.store, st.deps.timeout, damaged_atom::value)
      .then([=](damaged_groups& damaged) {
        if (damaged.groups.empty()) return;
        std::set<events::group_ref> wanted(damaged.groups.begin(), damaged.groups.end());
        for (const auto& [id, view] : self->state.views)
          if (view.record.visible() &&
              wanted.count({view.record.id.tenant, view.record.payload_group_id}))
            self->send(actor_for(self, id), caf::tick_atom::value);
      },
      [=](caf::error& err) {
        spdlog::warn("damaged groups not fetched: {}; the next round asks again",
                     to_status(err).to_string());
      });
}

/// One reconciler round: the store's HOT usage, then the decisions; `reply`
/// gets the report (taken unless dry_run).
void reconcile_round(reg_pointer self, bool dry_run, std::function<void(reconcile_report)> reply) {
  auto& st = self->state;
  self->request(st.deps.store, st.deps.timeout, stats_atom::value)
      .then(
          [=](store_stats& stats) {
            auto& st = self->state;
            uint64_t failures = stats.spills + stats.hot_allocation_failures;
            hot_tier_usage hot{stats.hot.used_bytes, stats.hot.reserved_bytes,
                               stats.hot.capacity_bytes, failures > st.allocation_failures_seen};
            auto report = plan_reconcile(st.views, st.reconcile_cursor, st.deps.now_ms(), hot,
                                         st.reconciler);
            if (!dry_run) {
              st.allocation_failures_seen = failures;
              st.deps.promotion_headroom->store(report.promotion_headroom_bytes);
              take(self, report);
              look_at_damaged_groups(self);
            }
            if (reply) reply(std::move(report));
          },
          [=](caf::error& err) {
            spdlog::warn("reconciler round skipped: the object store did not answer: {}",
                         to_status(err).to_string());
            if (reply) reply({});
          });
}


caf::result<revision_page> list(reg_pointer self, const list_revisions& q) {
  auto planned = plan_listing(q);
  if (!planned) return to_error(planned.error());
  return list_page(self->state.views, *planned, [](const revision_view& v) { return v; });
}

}  // namespace

registry_actor spawn_registry(caf::actor_system& sys, events::revision_index recovered,
                              revision_deps deps, reconciler_config reconciler,
                              events::lineage_index lineages) {
  return sys.spawn([recovered = std::move(recovered), deps = std::move(deps), reconciler,
                    lineages = std::move(lineages)](reg_pointer self) mutable -> registry_actor::behavior_type {
    auto& st = self->state;
    st.deps = std::move(deps);
    st.deps.registry = caf::actor_cast<revision_listener>(self);
    st.reconciler = reconciler;
    st.dormant_lineages = std::move(lineages.lineages);
    // A claim a crash interrupted resumes: nothing else would take its next
    // step. (Waking a lineage takes it out of dormant_lineages: keys first.)
    std::vector<events::revision_key> interrupted;
    for (const auto& [key, l] : st.dormant_lineages)
      if (l.claim && !l.claim->finished()) interrupted.push_back(key);
    for (const auto& key : interrupted) self->send(lineage_actor_for(self, key), caf::tick_atom::value);
    st.recovered_last_operation_id = recovered.last_operation_id;
    st.recovered_last_lease_id = recovered.last_lease_id;
    for (const auto& [op_id, op] : recovered.operations) {
      st.operation_owners[op_id] = op.revision;
      st.dormant_operations[op.revision][op_id] = op;
    }
    static const events::revision_index no_operations;
    for (const auto& [id, record] : recovered.revisions) {
      auto ops = st.dormant_operations.find(id);
      if (ops == st.dormant_operations.end()) {
        st.views[id] = view_of(record, no_operations);
      } else {
        events::revision_index with_operations;  // view_of reads only the operations
        with_operations.operations = ops->second;
        st.views[id] = view_of(record, with_operations);
      }
      for (const auto& [lease_id, l] : record.leases) st.lease_owners[lease_id] = id;
      update_guard(self, record);
      // Revisions wake on demand (a command, a reconciler tick): at 100 000
      // revisions an actor each would cost memory and start-up time for
      // nothing. Only work a crash interrupted starts now: an operation
      // resumes from its cursor, a deletion goes on (nothing else would run
      // the operation; the reconciler's round would find the deletion too).
      if (record.operation_id || record.availability == v1::DELETING)
        self->send(actor_for(self, id), caf::tick_atom::value);
    }
    // The first round runs at once: it resumes what a crash interrupted
    // (deletions, drains) and expires leases that lapsed meanwhile.
    self->send(self, caf::tick_atom::value);
    // The recovered fold is in the views now; this function object lives as
    // long as the actor, so it lets go of its copy (and the heap's free
    // pages go back to the system: at 100 000 revisions that is most of
    // what the fold allocated).
    recovered = {};
    lineages = {};
    ::malloc_trim(0);
    return {
        [=](begin_import& cmd) { return route<revision_view>(self, cmd); },
        [=](commit_import& cmd) { return route<revision_view>(self, cmd); },
        [=](abort_import& cmd) { return route<removal_result>(self, cmd); },
        [=](update_policy& cmd) { return route<revision_view>(self, cmd); },
        [=](retire_revision& cmd) { return route<revision_view>(self, cmd); },
        [=](remove_revision& cmd) { return route<removal_result>(self, cmd); },
        [=](get_revision& cmd) -> caf::result<revision_view> {
          // From the view the revision sent before it answered its last
          // command: read-your-writes without a hop (and no actor is woken).
          auto checked = events::checked_revision_key(cmd.id.to_proto());
          if (!checked) return to_error(checked.error());
          cmd.id = *checked;
          auto it = self->state.views.find(cmd.id);
          auto reply = get_reply(it == self->state.views.end() ? nullptr : &it->second, cmd);
          if (!reply) return to_error(reply.error());
          return std::move(*reply);
        },
        [=](list_revisions& q) { return list(self, q); },
        [=](stats_atom) {
          registry_stats out;
          for (const auto& [id, v] : self->state.views) {
            ++out.revisions[v1::Availability_Name(v.record.availability)];
            if (v.record.visible()) ++out.residency[v1::Residency_Name(v.record.residency)];
            if (v.operation) ++out.operations["RUNNING"];
            if (v.operation && (!out.oldest_running_operation_ms ||
                                v.operation->started_at_ms < out.oldest_running_operation_ms))
              out.oldest_running_operation_ms = v.operation->started_at_ms;
          }
          out.live_leases = self->state.lease_owners.size();
          return out;
        },
        [=](migrate_revision& cmd) { return route<events::operation_record>(self, cmd); },
        [=](get_operation& cmd) { return route_operation(self, cmd); },
        [=](cancel_operation& cmd) -> caf::result<events::operation_record> {
          if (stopping(self)) return stopping_error();
          return route_operation(self, cmd);
        },
        [=](auto_migrate& cmd) { return route<events::operation_record>(self, cmd); },
        [=](reconcile_request& req) -> caf::result<reconcile_report> {
          if (!req.dry_run && stopping(self)) return stopping_error();
          auto rp = self->make_response_promise<reconcile_report>();
          reconcile_round(self, req.dry_run, [=](reconcile_report report) mutable { rp.deliver(report); });
          return rp;
        },
        [=](acquire_lease& cmd) { return route<lease_view>(self, cmd); },
        [=](renew_lease& cmd) -> caf::result<lease_view> {
          auto id = cmd.lease_id;
          return route_lease(self, cmd, [id](bool issued) -> caf::result<lease_view> {
            if (!issued) return unknown_lease(id);
            return to_error({errc::lease_expired, "lease " + std::to_string(id) +
                                                      " has ended; acquire a new lease"});
          });
        },
        [=](release_lease& cmd) {
          auto id = cmd.lease_id;
          return route_lease(self, cmd, [id](bool) -> caf::result<lease_view> {
            lease_view ended;  // releasing an unknown or ended lease succeeds (idempotent)
            ended.lease.id = id;
            return ended;
          });
        },
        [=](revoke_lease& cmd) {
          auto id = cmd.lease_id;
          return route_lease(self, cmd, [id](bool issued) -> caf::result<lease_view> {
            if (!issued) return unknown_lease(id);
            return to_error({errc::not_found,
                             "lease " + std::to_string(id) + " is not live (it has ended)"});
          });
        },
        [=](open_local& cmd) { return route_known<local_listing>(self, cmd); },
        [=](list_leases& cmd) { return route_known<lease_list>(self, cmd); },
        [=](caf::tick_atom) {
          if (stopping(self)) return;  // automatic work starts nothing once stopping
          reconcile_round(self, false, nullptr);
          self->delayed_send(self, self->state.reconciler.interval, caf::tick_atom::value);
        },
        [=](revision_view& view) { learn(self, std::move(view)); },
        [=](begin_upsert& cmd) -> caf::result<lineage_view> {
          if (stopping(self)) return stopping_error();
          return route_lineage<lineage_view>(self, cmd, cmd.base, "base");
        },
        [=](commit_upsert& cmd) -> caf::result<revision_view> {
          if (stopping(self)) return stopping_error();
          return route_lineage<revision_view>(self, cmd, cmd.commit.id, "target");
        },
        [=](abort_upsert& cmd) -> caf::result<lineage_view> {
          if (stopping(self)) return stopping_error();
          return route_lineage<lineage_view>(self, cmd, cmd.base, "base");
        },
        [=](get_lineage& cmd) { return route_lineage<lineage_view>(self, cmd, cmd.lineage, "lineage"); },
    };
  });
}

}  // namespace weightd::actors
