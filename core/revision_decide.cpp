#include "core/revision_decide.hpp"

#include "core/decide_words.hpp"

#include <cstdio>
#include <set>

#include "core/lease_facts.hpp"
#include "core/migration_plan.hpp"
#include "core/validate.hpp"
#include "events/digest.hpp"

namespace weightd::actors {

namespace v1 = events::v1;
using events::revision_record;

using namespace decide_words;

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
