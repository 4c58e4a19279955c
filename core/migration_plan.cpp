#include "core/migration_plan.hpp"

#include <algorithm>
#include <map>

#include "core/mixed_plan.hpp"

namespace weightd::actors {

namespace v1 = events::v1;

bool payload_unit::all_hot() const {
  return std::all_of(members.begin(), members.end(), [](const auto& m) { return m.hot; });
}
bool payload_unit::any_hot() const {
  return std::any_of(members.begin(), members.end(), [](const auto& m) { return m.hot; });
}
bool payload_unit::all_cold() const {
  return std::all_of(members.begin(), members.end(), [](const auto& m) { return m.cold; });
}

std::string unit_id_of(const events::object_record& payload) {
  return payload.affinity_id.empty() ? "key:" + payload.ref.key : payload.affinity_id;
}

std::vector<payload_unit> units_of(const group_snapshot& group, const std::string& manifest_key) {
  std::map<std::string, payload_unit> by_id;
  for (const auto& m : group.members) {  // members come ordered by key
    if (m.ref.key == manifest_key) continue;
    auto& u = by_id[unit_id_of(m)];
    u.id = unit_id_of(m);
    u.bytes += m.size;
    u.members.push_back(m);
  }
  std::vector<payload_unit> out;
  for (auto& [id, u] : by_id) out.push_back(std::move(u));
  return out;
}

residency_observation observe(const group_snapshot& group, const events::revision_record& r) {
  residency_observation o;
  uint64_t payload_bytes = 0, readable = 0, hot_count = 0;
  for (const auto& m : group.members) {
    if (!m.readable() && o.unreadable.empty()) o.unreadable = m.ref.key;
    if (m.ref.key == r.manifest.manifest_key) continue;
    payload_bytes += m.size;
    if (!m.readable()) continue;
    ++readable;
    if (m.hot) {
      ++hot_count;
      o.hot_bytes += m.size;
    }
  }
  if (readable == 0) o.residency = v1::RESIDENCY_ABSENT;
  else if (hot_count == readable) o.residency = v1::RESIDENCY_HOT;
  else if (hot_count == 0) o.residency = v1::RESIDENCY_COLD;
  else o.residency = v1::RESIDENCY_MIXED;
  o.hot_ratio = payload_bytes ? static_cast<double>(o.hot_bytes) / static_cast<double>(payload_bytes) : 0;
  return o;
}

result<std::set<std::string>> hot_units_for(v1::Residency target, double ratio,
                                            const std::vector<payload_unit>& units) {
  std::set<std::string> hot;
  if (target == v1::RESIDENCY_HOT)
    for (const auto& u : units) hot.insert(u.id);
  if (target != v1::RESIDENCY_MIXED) return hot;
  std::vector<planner_unit> input;
  for (const auto& u : units) input.push_back({u.id, u.bytes});
  auto plan = plan_mixed(std::move(input), ratio);
  if (!plan) return plan.error();
  hot.insert(plan->hot.begin(), plan->hot.end());
  return hot;
}

namespace {

/// What `u` still needs to end HOT (or COLD); empty when it is there.
unit_work work_for(const payload_unit& u, bool end_hot, bool leases_live) {
  unit_work w{u.id, u.bytes, {}, {}, {}};
  for (const auto& m : u.members) {
    if (end_hot) {
      if (!m.hot) w.to_hot.push_back(m.ref.key);
    } else {
      if (!m.cold) w.to_cold.push_back(m.ref.key);
      if (m.hot && !leases_live) w.drop_hot.push_back(m.ref.key);
    }
  }
  return w;
}

bool at_target(const payload_unit& u, bool end_hot) {
  return end_hot ? u.all_hot() : (u.all_cold() && !u.any_hot());
}

}  // namespace

round_plan plan_round(const events::revision_record& r, const events::operation_record& op,
                      const group_snapshot& group, bool leases_live,
                      const migration_limits& limits) {
  round_plan plan;
  auto units = units_of(group, r.manifest.manifest_key);
  plan.total_units = units.size();
  for (const auto& u : units) plan.total_bytes += u.bytes;
  for (const auto& m : group.members)
    if (!m.readable()) {
      plan.paused = "member '" + m.ref.key + "' has no readable replica; the operation waits "
                    "until a repair makes it readable";
      return plan;
    }
  auto hot = hot_units_for(op.target, op.target_hot_ratio, units);
  if (!hot) {
    plan.paused = hot.error().message();
    return plan;
  }
  // The manifest keeps a HOT replica whatever the target.
  bool manifest_hot = true;
  for (const auto& m : group.members)
    if (m.ref.key == r.manifest.manifest_key && !m.hot) {
      manifest_hot = false;
      plan.work.push_back({m.ref.key, m.size, {m.ref.key}, {}, {}});
    }
  // Units in order from the one after the cursor, wrapping around.
  auto start = std::upper_bound(units.begin(), units.end(), op.cursor,
                                [](const std::string& c, const payload_unit& u) { return c < u.id; });
  std::vector<const payload_unit*> order;
  for (auto it = start; it != units.end(); ++it) order.push_back(&*it);
  for (auto it = units.begin(); it != start; ++it) order.push_back(&*it);
  uint64_t members = 0, bytes = 0;
  size_t held_back = 0;
  bool full = false;  // the round has its share; later units are only counted
  for (const auto* u : order) {
    bool end_hot = hot->count(u->id) > 0;
    if (at_target(*u, end_hot)) {
      ++plan.units_at_target;
      plan.bytes_at_target += u->bytes;
      continue;
    }
    auto w = work_for(*u, end_hot, leases_live);
    if (w.to_hot.empty() && w.to_cold.empty() && w.drop_hot.empty()) {
      ++held_back;  // only its HOT drop is left, and a lease holds it
      continue;
    }
    bool first = plan.work.size() == (manifest_hot ? 0u : 1u);
    size_t n = w.to_hot.size() + w.to_cold.size() + w.drop_hot.size();
    if (full || (!first && (members + n > limits.round_members ||
                            bytes + u->bytes > limits.round_bytes))) {
      full = true;  // the next round starts here
      continue;
    }
    members += n;
    bytes += u->bytes;
    plan.cursor = u->id;
    plan.work.push_back(std::move(w));
  }
  if (held_back)
    plan.waiting = std::to_string(held_back) + (held_back == 1 ? " unit waits" : " units wait") +
                   " for the revision's live leases to end before its HOT replicas are dropped";
  plan.complete = manifest_hot && plan.units_at_target == plan.total_units;
  return plan;
}

}  // namespace weightd::actors
