#include "core/replica_observation.hpp"

#include <set>

#include "core/migration_plan.hpp"

namespace weightd::actors {

namespace v1 = events::v1;

namespace {

/// The first member the revision needs that has no readable replica ("" = none).
std::string first_unreadable(const events::revision_record& r, const group_snapshot& group) {
  std::set<std::string> present;
  for (const auto& m : group.members) {
    if (!m.readable()) return m.ref.key;
    present.insert(m.ref.key);
  }
  if (!present.count(r.manifest.manifest_key)) return r.manifest.manifest_key;
  for (const auto& key : r.payload_keys)
    if (!present.count(key)) return key;
  return "";
}

/// Why the revision needs HOT replicas back from COLD ("" = it does not).
std::string repair_reason(const events::revision_record& r, const group_snapshot& group,
                          const residency_observation& seen) {
  for (const auto& m : group.members)
    if (m.ref.key == r.manifest.manifest_key && !m.hot)
      return "the HOT replica of the manifest '" + m.ref.key + "' vanished";
  if (r.residency == v1::RESIDENCY_HOT)
    for (const auto& m : group.members)
      if (!m.hot) return "the HOT replica of '" + m.ref.key + "' vanished";
  // A tenth of a percent of slack: a ratio is a quotient of byte counts.
  if (r.residency == v1::RESIDENCY_MIXED && seen.hot_ratio + 1e-3 < r.observed_hot_ratio)
    return "HOT replicas vanished: hot ratio " + std::to_string(seen.hot_ratio) + " < " +
           std::to_string(r.observed_hot_ratio);
  return "";
}

v1::Envelope availability_event(const events::revision_record& r, v1::Availability a,
                                const std::string& why, const decide_context& ctx) {
  auto e = revision_envelope(r.id, ctx.now_ms, "", "");
  auto* p = e.mutable_availability_observed();
  *p->mutable_id() = r.id.to_proto();
  p->set_availability(a);
  p->set_reason(why);
  return e;
}

}  // namespace

namespace {

/// ResidencyObserved when `seen` differs from the record; nothing otherwise.
std::optional<v1::Envelope> residency_event(const events::revision_record& r,
                                            const residency_observation& seen, int64_t now_ms) {
  if (seen.residency == r.residency && seen.hot_ratio == r.observed_hot_ratio) return std::nullopt;
  auto e = revision_envelope(r.id, now_ms, "", "");
  auto* p = e.mutable_residency_observed();
  *p->mutable_id() = r.id.to_proto();
  p->set_residency(seen.residency);
  p->set_observed_hot_ratio(seen.hot_ratio);
  return e;
}

}  // namespace

std::optional<v1::Envelope> residency_change(const events::revision_record& r,
                                             const group_snapshot& group, int64_t now_ms) {
  auto seen = observe(group, r);
  if (seen.residency == v1::RESIDENCY_ABSENT) return std::nullopt;
  return residency_event(r, seen, now_ms);
}

observation_decision decide_observation(const events::revision_record& r,
                                        const group_snapshot& group, const decide_context& ctx) {
  observation_decision out;
  if (!r.visible()) return out;
  auto unreadable = first_unreadable(r, group);
  auto seen = observe(group, r);
  if (!unreadable.empty()) {
    if (r.availability == v1::READY)
      out.events.push_back(availability_event(
          r, v1::DEGRADED, "'" + unreadable + "' has no readable replica", ctx));
    // The residency counts the readable payloads, ABSENT once none is left
    // (after DEGRADED: a READY revision is never ABSENT). An operation
    // records residency at its end.
    if (!r.operation_id)
      if (auto e = residency_event(r, seen, ctx.now_ms)) out.events.push_back(std::move(*e));
    return out;
  }
  auto ready_again = [&] {
    if (r.availability == v1::DEGRADED)
      out.events.push_back(availability_event(r, v1::READY, "every member is readable again", ctx));
  };
  if (r.operation_id) {
    ready_again();
    return out;
  }
  if (r.residency != v1::RESIDENCY_ABSENT) {
    out.repair = repair_reason(r, group, seen);
    if (!out.repair.empty()) {
      auto e = automatic_migration(r, r.residency, r.observed_hot_ratio,
                                   out.repair + "; re-promoting from COLD", ctx);
      ready_again();
      if (!e) return out;  // operation ids exhausted: the repair cannot start
      e->mutable_operation_started()->set_kind(v1::REPAIRING);
      out.events.push_back(std::move(*e));
      return out;
    }
  }
  // The residency first: a revision back from ABSENT turns READY with its new one.
  if (seen.residency != v1::RESIDENCY_ABSENT)
    if (auto e = residency_event(r, seen, ctx.now_ms)) out.events.push_back(std::move(*e));
  ready_again();
  return out;
}

}  // namespace weightd::actors
