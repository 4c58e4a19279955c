#include "actors/registry.hpp"

#include "actors/errors.hpp"

namespace weightd::actors {

const char* registry_state::name = "weightd.registry";

namespace v1 = events::v1;

namespace {

using reg_pointer = registry_actor::stateful_pointer<registry_state>;

/// The part of the global fold that belongs to one revision.
events::revision_index slice(const events::revision_index& all, const events::revision_key& id) {
  events::revision_index one;
  const auto& r = all.revisions.at(id);
  one.revisions[id] = r;
  for (const auto& [op_id, op] : all.operations)
    if (op.revision == id) one.operations[op_id] = op;
  if (r.availability != v1::DELETED) one.groups[r.payload_group_id] = id;
  one.last_operation_id = all.last_operation_id;
  one.last_lease_id = all.last_lease_id;
  return one;
}

/// Tells the object store's guard what the revision's state means for its group.
void update_guard(reg_pointer self, const events::revision_record& r) {
  auto store = self->state.deps.store;
  auto owner = events::canonical_text(r.id);
  if (r.availability == v1::DELETED)
    self->send(store, guard_atom::value, r.id.tenant, r.payload_group_id);
  else
    self->send(store, guard_atom::value, r.id.tenant, r.payload_group_id,
               managed_group{owner, r.availability == v1::IMPORTING});
}

/// The actor of `id`: existing, woken from its fold, or new.
revision_actor actor_for(reg_pointer self, const events::revision_key& id) {
  auto& st = self->state;
  if (auto it = st.actors.find(id); it != st.actors.end()) return it->second;
  events::revision_index initial;
  if (auto it = st.dormant.find(id); it != st.dormant.end()) {
    initial = std::move(it->second);
    st.dormant.erase(it);
  }
  // Linked: they stop with the registry.
  auto actor = self->spawn<caf::linked>(revision_impl, id, std::move(initial), st.deps);
  st.actors.emplace(id, actor);
  return actor;
}

/// Checks the command's identity (defaults filled) and hands the command to
/// the revision's actor, which answers the client directly.
template <class Reply, class Command>
caf::result<Reply> route(reg_pointer self, Command& cmd) {
  auto checked = events::checked_revision_key(cmd.id.to_proto());
  if (!checked) return to_error(checked.error());
  cmd.id = *checked;
  return self->delegate(actor_for(self, cmd.id), std::move(cmd));
}

/// Keeps the view of a revision and the lease ids it holds.
void learn(reg_pointer self, revision_view view) {
  auto& st = self->state;
  bool guard_changes = true;
  if (auto old = st.views.find(view.record.id); old != st.views.end()) {
    for (const auto& [lease_id, l] : old->second.record.leases) st.lease_owners.erase(lease_id);
    guard_changes = old->second.record.availability != view.record.availability;
  }
  for (const auto& [lease_id, l] : view.record.leases) st.lease_owners[lease_id] = view.record.id;
  if (guard_changes) update_guard(self, view.record);  // leases do not concern the guard
  st.views[view.record.id] = std::move(view);
}

/// Hands a lease command to the revision holding the lease. A lease held by
/// nobody is answered by `not_held(issued)`: issued = the id was handed out,
/// so the lease has ended (released, expired or revoked).
template <class Command>
caf::result<lease_view> route_lease(reg_pointer self, Command& cmd,
                                    std::function<caf::result<lease_view>(bool)> not_held) {
  auto& st = self->state;
  if (cmd.lease_id == 0) return to_error({errc::invalid_argument, "lease_id must be at least 1"});
  if (auto it = st.lease_owners.find(cmd.lease_id); it != st.lease_owners.end())
    return self->delegate(actor_for(self, it->second), std::move(cmd));
  return not_held(cmd.lease_id <= st.deps.lease_ids->load());
}

caf::error unknown_lease(uint64_t id) {
  return to_error({errc::not_found, "lease " + std::to_string(id) +
                                        " does not exist; acquire one with AcquireLease"});
}

/// Does the reconciler have work for this revision now?
bool needs_reconcile(const revision_view& v, int64_t now_ms) {
  const auto& r = v.record;
  if (r.availability == v1::DELETING) return true;
  if (v.nearest_lease_expiry_ms && v.nearest_lease_expiry_ms <= now_ms) return true;
  return r.draining() && (r.leases.empty() || r.drain_deadline_ms <= now_ms);
}

/// One reconciler round: at most kReconcileActions revisions, continuing
/// where the last round stopped so none starves.
void reconcile_round(reg_pointer self) {
  constexpr size_t kReconcileActions = 64;
  auto& st = self->state;
  auto now = st.deps.now_ms();
  std::vector<events::revision_key> due;
  auto scan = [&](auto from, auto to) {
    for (auto it = from; it != to && due.size() < kReconcileActions; ++it)
      if (needs_reconcile(it->second, now)) due.push_back(it->first);
  };
  auto start = st.views.upper_bound(st.reconcile_cursor);
  scan(start, st.views.end());
  scan(st.views.begin(), start);
  for (const auto& id : due) self->send(actor_for(self, id), caf::tick_atom::value);
  st.reconcile_cursor = due.size() == kReconcileActions ? due.back() : events::revision_key{};
}

/// Opaque page token: hex of LP(resource) LP(revision) LP(generation).
std::string page_token(const events::revision_key& k) {
  auto raw = events::length_prefixed(k.resource) + events::length_prefixed(k.revision) +
             events::length_prefixed(std::to_string(k.generation));
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : raw) {
    hex += digits[c >> 4];
    hex += digits[c & 0xf];
  }
  return hex;
}

result<events::revision_key> parse_page_token(const std::string& token, events::revision_key base) {
  auto bad = status{errc::invalid_argument, "page_token is not one this server handed out"};
  if (token.size() % 2) return bad;
  std::string raw;
  for (size_t i = 0; i < token.size(); i += 2) {
    auto nibble = [](char c) { return c >= 'a' ? c - 'a' + 10 : c - '0'; };
    raw += static_cast<char>(nibble(token[i]) * 16 + nibble(token[i + 1]));
  }
  std::vector<std::string> parts;
  for (size_t at = 0; at < raw.size() && parts.size() < 3;) {
    auto colon = raw.find(':', at);
    if (colon == std::string::npos) return bad;
    size_t len = std::stoull(raw.substr(at, colon - at));
    if (colon + 1 + len + 1 > raw.size()) return bad;
    parts.push_back(raw.substr(colon + 1, len));
    at = colon + 1 + len + 1;
  }
  if (parts.size() != 3) return bad;
  base.resource = parts[0];
  base.revision = parts[1];
  base.generation = std::stoull(parts[2]);
  return base;
}

caf::result<revision_page> list(reg_pointer self, list_revisions& q) {
  for (auto [field, value] : {std::pair{"tenant", &q.tenant}, std::pair{"ns", &q.ns}}) {
    if (value->empty()) *value = "default";
    if (value->size() > 1024)
      return to_error({errc::invalid_argument, std::string{field} + " is longer than 1024 bytes"});
  }
  if (q.limit > 1000)
    return to_error({errc::invalid_argument, "limit must be at most 1000 (0 means 100)"});
  uint32_t limit = q.limit ? q.limit : 100;
  std::set<v1::Availability> states(q.states.begin(), q.states.end());
  if (states.empty()) states = {v1::READY, v1::DEGRADED};
  events::revision_key start{q.tenant, q.ns, q.resource, "", 0};
  bool after = false;
  if (!q.page_token.empty()) {
    auto parsed = parse_page_token(q.page_token, start);
    if (!parsed) return to_error(parsed.error());
    start = *parsed;
    after = true;
  }
  revision_page page;
  auto& views = self->state.views;
  for (auto it = after ? views.upper_bound(start) : views.lower_bound(start); it != views.end();
       ++it) {
    const auto& k = it->first;
    if (k.tenant != q.tenant || k.ns != q.ns || (!q.resource.empty() && k.resource != q.resource))
      break;
    if (!states.count(it->second.record.availability)) continue;
    if (page.revisions.size() == limit) {
      page.next_page_token = page_token(page.revisions.back().record.id);
      break;
    }
    page.revisions.push_back(it->second);
  }
  return page;
}

}  // namespace

registry_actor spawn_registry(caf::actor_system& sys, const events::revision_index& recovered,
                              revision_deps deps) {
  return sys.spawn([recovered, deps](reg_pointer self) mutable -> registry_actor::behavior_type {
    auto& st = self->state;
    st.deps = std::move(deps);
    st.deps.registry = caf::actor_cast<revision_listener>(self);
    for (const auto& [id, record] : recovered.revisions) {
      auto part = slice(recovered, id);
      st.views[id] = view_of(record, part);
      for (const auto& [lease_id, l] : record.leases) st.lease_owners[lease_id] = id;
      update_guard(self, record);
      st.dormant[id] = std::move(part);
      if (record.availability != v1::DELETED) actor_for(self, id);
    }
    // The first round runs at once: it resumes what a crash interrupted
    // (deletions, drains) and expires leases that lapsed meanwhile.
    self->send(self, caf::tick_atom::value);
    return {
        [=](begin_import& cmd) { return route<revision_view>(self, cmd); },
        [=](commit_import& cmd) { return route<revision_view>(self, cmd); },
        [=](abort_import& cmd) { return route<removal_result>(self, cmd); },
        [=](update_policy& cmd) { return route<revision_view>(self, cmd); },
        [=](remove_revision& cmd) { return route<removal_result>(self, cmd); },
        [=](get_revision& cmd) -> caf::result<revision_view> {
          auto checked = events::checked_revision_key(cmd.id.to_proto());
          if (checked && !self->state.views.count(*checked))  // no actor for a mere lookup
            return to_error({errc::not_found, "revision " + events::canonical_text(*checked) +
                                                  " does not exist"});
          return route<revision_view>(self, cmd);
        },
        [=](list_revisions& q) { return list(self, q); },
        [=](stats_atom) {
          registry_stats out;
          for (const auto& [id, v] : self->state.views)
            ++out.revisions[v1::Availability_Name(v.record.availability)];
          out.live_leases = self->state.lease_owners.size();
          return out;
        },
        [=](acquire_lease& cmd) { return route<lease_view>(self, cmd); },
        [=](renew_lease& cmd) {
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
        [=](list_leases& cmd) -> caf::result<lease_list> {
          auto checked = events::checked_revision_key(cmd.id.to_proto());
          if (checked && !self->state.views.count(*checked))
            return to_error({errc::not_found, "revision " + events::canonical_text(*checked) +
                                                  " does not exist"});
          return route<lease_list>(self, cmd);
        },
        [=](caf::tick_atom) {
          reconcile_round(self);
          self->delayed_send(self, self->state.deps.reconcile_interval, caf::tick_atom::value);
        },
        [=](revision_view& view) { learn(self, std::move(view)); },
    };
  });
}

}  // namespace weightd::actors
