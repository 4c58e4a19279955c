#include "core/revision_decide.hpp"

#include <cstdio>
#include <set>

#include "core/lease_facts.hpp"
#include "core/migration_plan.hpp"
#include "core/validate.hpp"
#include "events/digest.hpp"

namespace weightd::actors {

namespace v1 = events::v1;
using events::revision_record;

namespace {

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

/// expected vs current generation, with the idempotent-retry rule.
/// Returns ok to proceed, or an error; sets `retry` when the request is the
/// one behind the last event (reply with the record as it is).
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

/// Fills defaults and checks a policy; `field` prefixes errors.
/// UpdatePolicy and Migrate on an upsert's retiring base.
status retiring_busy(const revision_record& r) {
  return {errc::busy, name(r.id) + " retires: upsert claim '" + r.retired_by +
                          "' replaced it with a higher generation; it is deleted once its " +
                          "leases end, and takes no policy change or migration meanwhile"};
}

/// "operation 8 (MIGRATING to COLD)": a running operation, for messages.
std::string operation_text(const events::operation_record& op) {
  return "operation " + std::to_string(op.id) + " (" + v1::OperationKind_Name(op.kind) + " to " +
         v1::Residency_Name(op.target) + ")";
}

/// SPEC §4 «Automatic work never blocks a user»: the operation running on `r`
/// gives way to a user's `command` (RemoveRevision, UpdatePolicy, Migrate) —
/// one the system started is cancelled by an event naming the command, to be
/// persisted before the command's own — or blocks it: BUSY for one a user
/// started. No operation: nothing to do.
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

/// The one builder of OperationStarted.
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

/// SPEC §5: ids never wrap; starting an operation after the last id changes nothing.
status operation_ids_exhausted() {
  return {errc::generation_exhausted,
          "operation ids are exhausted: 2^64-1 were handed out and none is ever reused"};
}

std::string ratio_text(double ratio) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", ratio);
  return text;
}

/// Distinct affinity units among the payload members (a payload without an
/// affinity id is a unit of its own).
uint64_t affinity_units(const group_snapshot& group, const std::string& manifest_key) {
  std::set<std::string> units;
  for (const auto& m : group.members)
    if (m.ref.key != manifest_key)
      units.insert(m.affinity_id.empty() ? "key:" + m.ref.key : "id:" + m.affinity_id);
  return units.size();
}

}  // namespace

std::string request_digest(const std::string& operation, const std::vector<std::string>& args) {
  std::string all = events::length_prefixed(operation);
  for (const auto& a : args) all += events::length_prefixed(a);
  return events::sha256_hex(all);
}

// ------------------------------------------------------------- BeginImport

result<decision> decide_begin(const revision_record* current, const begin_import& cmd,
                              const decide_context& ctx) {
  if (cmd.expected_payload_count < 1)
    return status{errc::invalid_argument, "expected_payload_count must be at least 1"};
  if (cmd.expected_logical_bytes < 1)
    return status{errc::invalid_argument, "expected_logical_bytes must be at least 1"};
  auto group = events::payload_group_id(cmd.id);
  if (!cmd.payload_group_id.empty() && cmd.payload_group_id != group)
    return status{errc::invalid_argument,
                  "payload_group_id is not the canonical one for " + name(cmd.id) + " (" + group +
                      "); leave it empty and the server fills it"};
  auto policy = cmd.has_policy ? cmd.policy : ctx.default_policy;
  if (auto st = normalize_policy(policy, "policy"); !st.ok()) return st;
  if (auto st = mixed_needs_units(policy, cmd.affinity_count, "affinity_count is"); !st.ok())
    return st;
  auto digest = request_digest("BeginImport", {group, std::to_string(cmd.expected_payload_count),
                                               std::to_string(cmd.expected_logical_bytes),
                                               policy_text(policy),
                                               std::to_string(cmd.affinity_count)});
  if (current && current->availability != v1::DELETED) {
    bool same = current->payload_group_id == group &&
                current->expected_payload_count == cmd.expected_payload_count &&
                current->expected_logical_bytes == cmd.expected_logical_bytes &&
                current->affinity_count == cmd.affinity_count && current->policy == policy;
    if (same && (current->availability == v1::IMPORTING || current->availability == v1::READY))
      return decision{};
    return status{errc::conflict, name(cmd.id) + " already exists (" +
                                      state_name(current->availability) +
                                      ") with other parameters; use another generation"};
  }
  if (current && current->metadata_generation == std::numeric_limits<uint64_t>::max())
    return status{errc::generation_exhausted,
                  name(cmd.id) + " cannot be imported again: its metadata generation is at the "
                                 "maximum; use another weight_generation"};
  auto e = revision_envelope(cmd.id, ctx.now_ms, cmd.principal, cmd.request_id);
  auto* p = e.mutable_import_begun();
  *p->mutable_id() = cmd.id.to_proto();
  p->set_payload_group_id(group);
  p->set_expected_payload_count(cmd.expected_payload_count);
  p->set_expected_logical_bytes(cmd.expected_logical_bytes);
  *p->mutable_policy() = policy.to_proto();
  p->set_affinity_count(cmd.affinity_count);
  p->set_request_digest(digest);
  return decision{{std::move(e)}};
}

// ------------------------------------------------------------ CommitImport

result<commit_precheck> precheck_commit(const revision_record* current, const commit_import& cmd) {
  // The request's own fields first: bad input is INVALID_ARGUMENT whatever
  // the store holds.
  commit_precheck out{false, cmd};
  auto& m = out.normalized.manifest;
  if (m.manifest_key != events::manifest_key(cmd.id))
    return status{errc::invalid_argument, "manifest.manifest_key is not canonical; for " +
                                              name(cmd.id) + " it is " +
                                              events::manifest_key(cmd.id)};
  if (auto st = check_hex("manifest.manifest_sha256", m.manifest_sha256, 64); !st.ok()) return st;
  if (auto st = check_hex("manifest.payload_keys_sha256", m.payload_keys_sha256, 64); !st.ok())
    return st;
  if (m.payload_count < 1)
    return status{errc::invalid_argument, "manifest.payload_count must be at least 1"};
  if (m.logical_bytes < 1)
    return status{errc::invalid_argument, "manifest.logical_bytes must be at least 1"};
  std::set<std::string> seen;
  for (const auto& key : cmd.payload_keys) {
    if (auto st = check_key("payload_keys[]", key); !st.ok()) return st;
    if (key == m.manifest_key)
      return status{errc::invalid_argument, "payload_keys must not contain the manifest key"};
    if (!seen.insert(key).second)
      return status{errc::invalid_argument, "payload_keys lists '" + key + "' twice"};
  }
  if (!current || current->availability == v1::DELETED) return not_found(cmd.id);
  if (m.payload_group_id.empty()) m.payload_group_id = current->payload_group_id;
  if (m.payload_group_id != current->payload_group_id)
    return status{errc::invalid_argument, "manifest.payload_group_id is not the canonical " +
                                              current->payload_group_id + "; leave it empty"};
  if (current->visible()) {
    bool same = current->manifest == m && current->payload_keys == cmd.payload_keys;
    if (!same)
      return status{errc::conflict, name(cmd.id) + " is already committed with another manifest"};
    if (cmd.expected_generation + 1 == current->metadata_generation ||
        cmd.expected_generation == current->metadata_generation)
      return out;  // idempotent: already committed with this manifest
    bool ignored = false;
    return check_generation(*current, cmd.expected_generation, "", ignored);
  }
  if (current->availability != v1::IMPORTING)
    return status{errc::conflict, name(cmd.id) + " is " + state_name(current->availability) +
                                      " and cannot be committed"};
  bool retry = false;
  if (auto st = check_generation(*current, cmd.expected_generation, "", retry); !st.ok()) return st;
  if (m.payload_count != current->expected_payload_count)
    return status{errc::conflict, "manifest.payload_count " + std::to_string(m.payload_count) +
                                      " differs from BeginImport's expected_payload_count " +
                                      std::to_string(current->expected_payload_count)};
  if (m.logical_bytes != current->expected_logical_bytes)
    return status{errc::conflict, "manifest.logical_bytes " + std::to_string(m.logical_bytes) +
                                      " differs from BeginImport's expected_logical_bytes " +
                                      std::to_string(current->expected_logical_bytes)};
  if (cmd.payload_keys.size() != m.payload_count)
    return status{errc::conflict, "payload_keys lists " + std::to_string(cmd.payload_keys.size()) +
                                      " keys but manifest.payload_count is " +
                                      std::to_string(m.payload_count)};
  if (events::payload_keys_sha256(cmd.payload_keys) != m.payload_keys_sha256)
    return status{errc::conflict,
                  "manifest.payload_keys_sha256 does not match the listed payload_keys"};
  out.needs_group_check = true;
  return out;
}

status validate_commit_group(const revision_record& r, const commit_import& cmd,
                             const group_snapshot& group) {
  const auto& m = cmd.manifest;
  const auto& gid = r.payload_group_id;
  if (group.members.empty())
    return {errc::not_found,
            "group " + gid + " has no objects; put the payloads and the manifest first"};
  std::map<std::string, const events::object_record*> members;
  for (const auto& o : group.members) members[o.ref.key] = &o;
  // Missing pieces: NOT_FOUND (or CONFLICT when they exist outside the group).
  auto locate = [&](const std::string& key, const std::string& what) -> status {
    if (members.count(key)) return {};
    if (auto out = group.outside.find(key); out != group.outside.end())
      return {errc::conflict, what + " '" + key + "' is outside group " + gid +
                                  " (its group is '" + out->second.group_id + "')"};
    return {errc::not_found, what + " '" + key + "' not found; put it before committing"};
  };
  if (auto st = locate(m.manifest_key, "manifest"); !st.ok()) return st;
  for (const auto& key : cmd.payload_keys)
    if (auto st = locate(key, "payload"); !st.ok()) return st;
  // Mismatches: CONFLICT, naming which.
  std::set<std::string> expected(cmd.payload_keys.begin(), cmd.payload_keys.end());
  expected.insert(m.manifest_key);
  for (const auto& [key, o] : members)
    if (!expected.count(key))
      return {errc::conflict, "group " + gid + " has a stray member '" + key +
                                  "' that payload_keys does not list; remove it or list it"};
  const auto& manifest = *members.at(m.manifest_key);
  if (manifest.data_type != v1::DATA_TYPE_METADATA)
    return {errc::conflict, "the manifest object must have data_type METADATA"};
  uint64_t bytes = 0;
  for (const auto& key : cmd.payload_keys) {
    const auto& o = *members.at(key);
    if (o.data_type != v1::DATA_TYPE_WEIGHT)
      return {errc::conflict, "payload '" + key + "' must have data_type WEIGHT"};
    bytes += o.size;
  }
  if (bytes != m.logical_bytes)
    return {errc::conflict, "the payloads hold " + std::to_string(bytes) +
                                " bytes but manifest.logical_bytes is " +
                                std::to_string(m.logical_bytes)};
  if (manifest.sha256 != m.manifest_sha256)
    return {errc::conflict, "the manifest object's sha256 is " + manifest.sha256 +
                                ", not manifest.manifest_sha256 " + m.manifest_sha256};
  if (r.affinity_count > 0) {
    auto units = affinity_units(group, m.manifest_key);
    if (units != r.affinity_count)
      return {errc::conflict, "the payloads carry " + std::to_string(units) +
                                  " distinct affinity ids but BeginImport said affinity_count " +
                                  std::to_string(r.affinity_count)};
  }
  // Everything is there but not readable: NOT_READY.
  for (const auto& [key, o] : members)
    if (!o->readable())
      return {errc::not_ready, "member '" + key + "' has no readable replica; put it again"};
  return {};
}

result<decision> decide_commit(const revision_record& r, const commit_import& cmd,
                       const group_snapshot& group, const decide_context& ctx) {
  auto digest = request_digest("CommitImport", {cmd.manifest.manifest_sha256,
                                                cmd.manifest.payload_keys_sha256});
  auto units = affinity_units(group, cmd.manifest.manifest_key);
  auto e = revision_envelope(r.id, ctx.now_ms, cmd.principal, cmd.request_id);
  auto* p = e.mutable_import_committed();
  *p->mutable_id() = r.id.to_proto();
  *p->mutable_manifest() = cmd.manifest.to_proto();
  for (const auto& k : cmd.payload_keys) p->add_payload_keys(k);
  p->set_request_digest(digest);
  p->set_affinity_units(units);
  auto ready = r;
  ready.manifest = cmd.manifest;
  auto seen = observe(group, ready);  // spilled or COLD-written members count
  p->set_residency(seen.residency);
  p->set_observed_hot_ratio(seen.hot_ratio);
  // Initial convergence toward COLD or MIXED (MIXED always: the planner picks
  // the units); a HOT revision with spilled members is promoted on relief.
  bool there = r.policy.preferred == v1::RESIDENCY_COLD && seen.residency == v1::RESIDENCY_COLD;
  if (r.policy.preferred != v1::RESIDENCY_HOT && !there) {
    *p->mutable_operation() = migration_toward(ready, r.policy, units, ctx);
    if (p->operation().operation_id() == 0) return operation_ids_exhausted();
  }
  return decision{{std::move(e)}};
}

// ------------------------------------------------------------- AbortImport

std::vector<std::string> cleaned_keys(const std::vector<std::string>& keys) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& k : keys)
    if (!k.empty() && seen.insert(k).second) out.push_back(k);
  return out;
}

result<decision> decide_abort(const revision_record* current, const abort_import& cmd,
                              const decide_context& ctx) {
  for (const auto& key : cmd.keys_to_remove)
    if (key.size() > kMaxKeyBytes)
      return status{errc::invalid_argument, "keys_to_remove has a key longer than 4096 bytes"};
  if (!current) return not_found(cmd.id);
  if (current->availability == v1::DELETING || current->availability == v1::DELETED)
    return decision{};  // already going away
  if (current->availability != v1::IMPORTING)
    return status{errc::conflict, name(cmd.id) + " is " + state_name(current->availability) +
                                      "; only an IMPORTING revision is aborted (use "
                                      "RemoveRevision)"};
  auto keys = cleaned_keys(cmd.keys_to_remove);
  auto digest = request_digest("AbortImport", keys);
  bool retry = false;
  if (auto st = check_generation(*current, cmd.expected_generation, digest, retry); !st.ok())
    return st;
  auto e = revision_envelope(cmd.id, ctx.now_ms, cmd.principal, cmd.request_id);
  auto* p = e.mutable_import_aborted();
  *p->mutable_id() = cmd.id.to_proto();
  for (const auto& k : keys) p->add_keys_to_remove(k);
  p->set_request_digest(digest);
  return decision{{std::move(e)}};
}

decision decide_abandon(const revision_record& r, int64_t last_put_ms,
                        std::chrono::milliseconds abandon, const decide_context& ctx) {
  if (r.availability != v1::IMPORTING) return {};
  if (ctx.now_ms - std::max(r.updated_at_ms, last_put_ms) < abandon.count()) return {};
  auto e = revision_envelope(r.id, ctx.now_ms, "weightd", "");
  auto* p = e.mutable_import_aborted();
  *p->mutable_id() = r.id.to_proto();
  p->set_request_digest(request_digest("AbortImport", {}));
  p->set_reason("abandoned: no change and no put for " +
                std::to_string((ctx.now_ms - std::max(r.updated_at_ms, last_put_ms)) / 1000) +
                " s (--import-abandon)");
  return decision{{std::move(e)}};
}

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

// ------------------------------------------------------------- retirement

result<decision> decide_retire(const revision_record* current, const retire_revision& cmd,
                               const decide_context& ctx) {
  if (cmd.upsert_request_id.empty())
    return status{errc::invalid_argument, "upsert_request_id is required to retire a revision"};
  if (!current || current->availability == v1::DELETED || current->availability == v1::DELETING)
    return decision{};  // gone or going: nothing left to retire
  if (current->availability == v1::IMPORTING)
    return status{errc::not_ready, name(cmd.id) + " is IMPORTING; only a READY revision retires"};
  if (current->retired_by == cmd.upsert_request_id) return decision{};
  if (!current->retired_by.empty())
    return status{errc::conflict, name(cmd.id) + " retires already (claim '" +
                                      current->retired_by + "')"};
  decision d;
  if (current->operation_id) {
    auto e = revision_envelope(cmd.id, ctx.now_ms, cmd.principal, cmd.request_id);
    auto* p = e.mutable_operation_cancelled();
    *p->mutable_id() = cmd.id.to_proto();
    p->set_operation_id(current->operation_id);
    p->set_message("the revision retires: upsert claim '" + cmd.upsert_request_id +
                   "' committed generation " + std::to_string(cmd.target_generation));
    d.events.push_back(std::move(e));
  }
  auto e = revision_envelope(cmd.id, ctx.now_ms, cmd.principal, cmd.request_id);
  auto* p = e.mutable_retirement_started();
  *p->mutable_id() = cmd.id.to_proto();
  p->set_upsert_request_id(cmd.upsert_request_id);
  p->set_target_generation(cmd.target_generation);
  p->set_request_digest(request_digest("RetireRevision", {cmd.upsert_request_id}));
  d.events.push_back(std::move(e));
  return d;
}

// ---------------------------------------------------------- RemoveRevision

result<decision> decide_remove(const revision_record* current,
                               const events::revision_index& fold, const remove_revision& cmd,
                               const decide_context& ctx) {
  if (cmd.drain_timeout_ms < 0)
    return status{errc::invalid_argument, "drain_timeout_ms must not be negative"};
  if (!current) return not_found(cmd.id);
  if (current->availability == v1::DELETING || current->availability == v1::DELETED ||
      current->draining())
    return decision{};  // already going away
  if (current->availability == v1::IMPORTING)
    return status{errc::not_ready, name(cmd.id) + " is IMPORTING; use AbortImport"};
  auto digest = request_digest("RemoveRevision", {std::to_string(cmd.drain_timeout_ms)});
  bool retry = false;
  if (auto st = check_generation(*current, cmd.expected_generation, digest, retry); !st.ok())
    return st;
  // BUSY names every blocker: a user's operation and the live leases.
  bool leased = !live_leases(*current, ctx.now_ms).empty();
  auto cancelled = give_way(*current, fold, "RemoveRevision", cmd.principal, cmd.request_id, ctx);
  if (!cancelled && leased && cmd.drain_timeout_ms == 0)
    return status{errc::busy, cancelled.error().message() + "; and " + name(cmd.id) + " has " +
                                  lease_blockers(*current, ctx.now_ms) +
                                  "; retry after the operation ends and the leases are released"};
  if (!cancelled) return cancelled.error();
  if (leased && cmd.drain_timeout_ms == 0)
    return status{errc::busy, name(cmd.id) + " has " + lease_blockers(*current, ctx.now_ms) +
                                  "; retry after they are released, or pass drain_timeout_ms "
                                  "to delete once they drain"};
  decision d{std::move(*cancelled)};
  if (!leased) {  // a delete leaves no lease behind
    auto lapsed = expire_lapsed(*current, ctx);
    d.events.insert(d.events.end(), lapsed.begin(), lapsed.end());
  }
  auto e = revision_envelope(cmd.id, ctx.now_ms, cmd.principal, cmd.request_id);
  auto* p = e.mutable_removal_started();
  *p->mutable_id() = cmd.id.to_proto();
  p->set_request_digest(digest);
  if (leased) p->set_drain_deadline_ms(ctx.now_ms + cmd.drain_timeout_ms);
  d.events.push_back(std::move(e));
  return d;
}

}  // namespace weightd::actors
