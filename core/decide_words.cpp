#include "core/decide_words.hpp"

#include <cstdio>
#include <set>

namespace weightd::actors::decide_words {

using events::revision_record;

std::string name(const events::revision_key& id) { return "revision " + events::canonical_text(id); }

const char* state_name(v1::Availability a) { return v1::Availability_Name(a).c_str(); }

std::string policy_text(const events::policy& p) {
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.17g", p.mixed_hot_ratio);
  return std::to_string(p.preferred) + "/" + ratio + "/" + std::to_string(p.mode);
}

status not_found(const events::revision_key& id) {
  return {errc::not_found, name(id) + " does not exist"};
}

status check_generation(const revision_record& r, uint64_t expected, const std::string& digest,
                        bool& retry) {
  retry = false;
  if (expected == r.metadata_generation) return {};
  if (expected + 1 == r.metadata_generation && digest == r.last_request_digest) {
    retry = true;
    return {};
  }
  return {errc::stale_generation,
          "expected_metadata_generation " + std::to_string(expected) + " is not current (" +
              name(r.id) + " is at " + std::to_string(r.metadata_generation) +
              "); re-read the revision and retry"};
}

status retiring_busy(const revision_record& r) {
  return {errc::busy, name(r.id) + " retires: upsert claim '" + r.retired_by +
                          "' replaced it with a higher generation; it is deleted once its " +
                          "leases end, and takes no policy change or migration meanwhile"};
}

std::string operation_text(const events::operation_record& op) {
  return "operation " + std::to_string(op.id) + " (" + v1::OperationKind_Name(op.kind) + " to " +
         v1::Residency_Name(op.target) + ")";
}

result<std::vector<v1::Envelope>> give_way(const revision_record& r,
                                           const events::revision_index& fold,
                                           const std::string& command,
                                           const std::string& principal,
                                           const std::string& request_id,
                                           const decide_context& ctx) {
  if (!r.operation_id) return std::vector<v1::Envelope>{};
  const auto& op = fold.operations.at(r.operation_id);
  if (!op.automatic)
    return status{errc::busy, operation_text(op) + " is running on " + name(r.id) +
                                  "; wait for it or cancel it, then retry"};
  auto e = revision_envelope(r.id, ctx.now_ms, principal, request_id);
  auto* p = e.mutable_operation_cancelled();
  *p->mutable_id() = r.id.to_proto();
  p->set_operation_id(op.id);
  p->set_message("cancelled by " + command +
                 (principal.empty() ? "" : " of '" + principal + "'") +
                 ": automatic work gives way to a user's command");
  return std::vector<v1::Envelope>{std::move(e)};
}

status normalize_policy(events::policy& p, const std::string& field) {
  if (p.preferred == v1::RESIDENCY_UNKNOWN) p.preferred = v1::RESIDENCY_HOT;
  if (p.preferred != v1::RESIDENCY_HOT && p.preferred != v1::RESIDENCY_COLD &&
      p.preferred != v1::RESIDENCY_MIXED)
    return {errc::invalid_argument, field + ".preferred_residency must be HOT, COLD or MIXED"};
  if (p.mixed_hot_ratio == 0 && p.preferred != v1::RESIDENCY_MIXED) p.mixed_hot_ratio = 0.5;
  if (!(p.mixed_hot_ratio > 0 && p.mixed_hot_ratio < 1))
    return {errc::invalid_argument, field + ".mixed_hot_ratio must be within (0, 1)"};
  if (!v1::MigrationMode_IsValid(p.mode))
    return {errc::invalid_argument, field + ".migration_mode must be AUTO, PINNED or MANUAL"};
  return {};
}

status mixed_needs_units(const events::policy& p, uint64_t units, const std::string& what) {
  if (p.preferred == v1::RESIDENCY_MIXED && units < 2)
    return {errc::policy_unsatisfiable,
            "policy MIXED needs at least 2 affinity units but " + what + " " +
                std::to_string(units) + "; choose HOT or COLD"};
  return {};
}

v1::OperationStarted operation_toward(const revision_record& r, v1::Residency target, double ratio,
                                      uint64_t units, const decide_context& ctx) {
  v1::OperationStarted op;
  *op.mutable_id() = r.id.to_proto();
  op.set_operation_id(ctx.next_operation_id());
  op.set_kind(v1::MIGRATING);
  op.set_target(target);
  op.set_target_hot_ratio(target == v1::RESIDENCY_MIXED ? ratio : 0);
  op.set_total_units(units);
  op.set_total_bytes(r.manifest.logical_bytes);
  return op;
}

v1::OperationStarted migration_toward(const revision_record& r, const events::policy& p,
                                      uint64_t units, const decide_context& ctx) {
  return operation_toward(r, p.preferred, p.mixed_hot_ratio, units, ctx);
}

status operation_ids_exhausted() {
  return {errc::generation_exhausted,
          "operation ids are exhausted: 2^64-1 were handed out and none is ever reused"};
}

std::string ratio_text(double ratio) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", ratio);
  return text;
}

uint64_t affinity_units(const group_snapshot& group, const std::string& manifest_key) {
  std::set<std::string> units;
  for (const auto& m : group.members)
    if (m.ref.key != manifest_key)
      units.insert(m.affinity_id.empty() ? "key:" + m.ref.key : "id:" + m.affinity_id);
  return units.size();
}

}  // namespace weightd::actors::decide_words
