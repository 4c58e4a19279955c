// The revision decisions about where its bytes live: UpdatePolicy, Migrate
// and the reconciler's automatic moves (declared in revision_decide.hpp).
#include <set>

#include "core/decide_words.hpp"
#include "core/lease_facts.hpp"
#include "core/migration_plan.hpp"
#include "core/revision_decide.hpp"
#include "core/validate.hpp"

namespace weightd::actors {

namespace v1 = events::v1;
using events::revision_record;
using namespace decide_words;

// ------------------------------------------------------------ UpdatePolicy

result<decision> decide_update_policy(const revision_record* current,
                                      const events::revision_index& fold, const update_policy& cmd,
                                      const decide_context& ctx) {
  auto policy = cmd.policy;
  if (auto st = normalize_policy(policy, "policy"); !st.ok()) return st;
  if (!current || current->availability == v1::DELETED) return not_found(cmd.id);
  if (!current->visible())
    return status{errc::not_ready, name(cmd.id) + " is " + state_name(current->availability) +
                                       "; its policy changes once it is READY"};
  auto digest = request_digest("UpdatePolicy", {policy_text(policy)});
  bool retry = false;
  if (auto st = check_generation(*current, cmd.expected_generation, digest, retry); !st.ok())
    return st;
  if (retry || current->policy == policy) return decision{};
  if (current->retiring()) return retiring_busy(*current);
  if (current->draining())
    return status{errc::not_ready, name(cmd.id) + " is being removed (its leases are draining)"};
  auto cancelled = give_way(*current, fold, "UpdatePolicy", cmd.principal, cmd.request_id, ctx);
  if (!cancelled) return cancelled.error();
  if (auto st = mixed_needs_units(policy, current->affinity_units, "its payloads form");
      !st.ok())
    return st;
  decision d{std::move(*cancelled)};
  auto e = revision_envelope(cmd.id, ctx.now_ms, cmd.principal, cmd.request_id);
  auto* p = e.mutable_policy_updated();
  *p->mutable_id() = cmd.id.to_proto();
  *p->mutable_policy() = policy.to_proto();
  p->set_request_digest(digest);
  bool converge = policy.mode == v1::MIGRATION_AUTO &&
                  (current->residency != policy.preferred ||
                   (policy.preferred == v1::RESIDENCY_MIXED &&
                    current->observed_hot_ratio != policy.mixed_hot_ratio));
  if (converge && current->residency != policy.preferred) {
    *p->mutable_operation() = migration_toward(*current, policy, current->affinity_units, ctx);
    if (p->operation().operation_id() == 0) return operation_ids_exhausted();
  }
  d.events.push_back(std::move(e));
  return d;
}

// ----------------------------------------------------------------- Migrate

int warmth(v1::Residency residency) {
  switch (residency) {
    case v1::RESIDENCY_HOT: return 2;
    case v1::RESIDENCY_MIXED: return 1;
    default: return 0;
  }
}

const events::operation_record* newest_operation(const events::revision_index& fold,
                                                 const events::revision_key& id) {
  const auto* r = fold.find(id);
  if (r && r->operation_id)
    if (auto it = fold.operations.find(r->operation_id); it != fold.operations.end()) return &it->second;
  const events::operation_record* newest = nullptr;
  for (const auto& [op_id, op] : fold.operations)
    if (op.revision == id) newest = &op;  // ids ascend
  return newest;
}

result<decision> decide_migrate(const revision_record* current, const events::revision_index& fold,
                                const migrate_revision& cmd, const decide_context& ctx) {
  if (cmd.target != v1::RESIDENCY_HOT && cmd.target != v1::RESIDENCY_COLD &&
      cmd.target != v1::RESIDENCY_MIXED)
    return status{errc::invalid_argument, "target must be HOT, COLD or MIXED"};
  double ratio = 0;
  if (cmd.target == v1::RESIDENCY_MIXED) {
    ratio = cmd.mixed_hot_ratio;
    if (ratio == 0 && current) ratio = current->policy.mixed_hot_ratio;
    if (!(ratio > 0 && ratio < 1))
      return status{errc::invalid_argument, "mixed_hot_ratio must be within (0, 1)"};
  }
  if (!current || current->availability == v1::DELETED) return not_found(cmd.id);
  if (!current->visible())
    return status{errc::not_ready, name(cmd.id) + " is " + state_name(current->availability) +
                                       "; only a READY or DEGRADED revision migrates"};
  if (current->retiring()) return retiring_busy(*current);
  if (current->policy.mode == v1::MIGRATION_PINNED)
    return status{errc::policy_unsatisfiable,
                  name(cmd.id) + " is PINNED: it does not migrate after its initial "
                                 "convergence; set its mode to MANUAL or AUTO first"};
  // The fence first: a stale generation is refused whatever is running.
  auto digest = request_digest("Migrate", {std::to_string(cmd.target), ratio_text(ratio)});
  bool retry = false;
  if (auto st = check_generation(*current, cmd.expected_generation, digest, retry); !st.ok())
    return st;
  if (retry) return decision{};
  if (current->operation_id) {
    const auto& op = fold.operations.at(current->operation_id);
    if (!op.automatic && op.target == cmd.target && op.target_hot_ratio == ratio)
      return decision{};  // a user's migration there is running: the same one
  }
  auto cancelled = give_way(*current, fold, "Migrate", cmd.principal, cmd.request_id, ctx);
  if (!cancelled) return cancelled.error();
  if (current->draining())
    return status{errc::not_ready, name(cmd.id) + " is being removed (its leases are draining)"};
  if (cmd.target == v1::RESIDENCY_MIXED)
    if (auto st = mixed_needs_units({cmd.target, ratio, current->policy.mode},
                                    current->affinity_units, "its payloads form");
        !st.ok())
      return st;
  decision d{std::move(*cancelled)};
  auto e = revision_envelope(cmd.id, ctx.now_ms, cmd.principal, cmd.request_id);
  auto* p = e.mutable_operation_started();
  *p = operation_toward(*current, cmd.target, ratio, current->affinity_units, ctx);
  if (p->operation_id() == 0) return operation_ids_exhausted();
  p->set_request_digest(digest);
  d.events.push_back(std::move(e));
  return d;
}

std::optional<v1::Envelope> automatic_migration(const revision_record& r, v1::Residency target,
                                                double ratio, const std::string& reason,
                                                const decide_context& ctx) {
  auto e = revision_envelope(r.id, ctx.now_ms, "", "");
  auto* p = e.mutable_operation_started();
  *p = operation_toward(r, target, ratio, r.affinity_units, ctx);
  if (p->operation_id() == 0) return std::nullopt;  // ids exhausted: nothing automatic starts
  p->set_automatic(true);
  p->set_reason(reason);
  return e;
}

decision decide_auto_migrate(const revision_record* current, const auto_migrate& cmd,
                             const decide_context& ctx) {
  if (!current || current->availability != v1::READY || current->operation_id ||
      current->draining() || current->policy.mode != v1::MIGRATION_AUTO)
    return {};
  bool demotion = warmth(cmd.target) < warmth(current->residency);
  if (demotion && !live_leases(*current, ctx.now_ms).empty()) return {};  // a reader came
  if (cmd.target == current->residency && cmd.target != v1::RESIDENCY_MIXED) return {};
  if (cmd.target == v1::RESIDENCY_MIXED && current->affinity_units < 2) return {};
  auto e = automatic_migration(*current, cmd.target, cmd.mixed_hot_ratio, cmd.reason, ctx);
  if (!e) return {};
  return decision{{std::move(*e)}};
}

}  // namespace weightd::actors
