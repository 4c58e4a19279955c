#include "core/upsert_decide.hpp"

#include "core/lease_facts.hpp"

namespace weightd::actors {

namespace v1 = events::v1;

namespace {

std::string lineage_name(const events::revision_key& id) {
  return "lineage " + events::canonical_text(events::lineage_key(id));
}

std::string digest_of(const begin_upsert& cmd, const v1::ImportBegun& target) {
  auto params = target;
  params.clear_request_digest();
  return request_digest("BeginUpsert", {events::canonical_text(cmd.base),
                                        std::to_string(cmd.expected_generation),
                                        std::to_string(cmd.target_generation),
                                        std::to_string(cmd.mode), params.SerializeAsString()});
}

bool gone(const events::revision_record* r) {
  return !r || r->availability == v1::DELETED;
}

}  // namespace

std::string claim_text(const events::upsert_claim& c) {
  return events::mode_name(c.mode()) + " claim '" + c.request_id() + "' (generation " +
         std::to_string(c.base_generation()) + " -> " + std::to_string(c.target_generation()) +
         ", " + events::phase_name(c.phase) + ")";
}

result<begin_upsert_decision> decide_begin_upsert(const events::lineage_record& lineage,
                                                  const events::revision_record* base,
                                                  const events::revision_record* target,
                                                  const begin_upsert& cmd,
                                                  const decide_context& ctx) {
  if (cmd.request_id.empty())
    return status{errc::invalid_argument,
                  "request_id is required: it names the claim, and a retry with the same "
                  "request_id returns it"};
  if (cmd.target_generation == 0)
    return status{errc::invalid_argument, "target_generation must be at least 1"};
  auto target_cmd = cmd.target;
  target_cmd.id = cmd.base;
  target_cmd.id.generation = cmd.target_generation;
  // The target's parameters as BeginImport would record them (defaults in).
  auto imported = decide_begin(nullptr, target_cmd, ctx);
  if (!imported) return imported.error();
  const auto& params = imported->events.front().import_begun();
  auto digest = digest_of(cmd, params);
  const auto& claim = lineage.claim;
  if (claim && claim->request_id() == cmd.request_id) {
    if (claim->claimed.request_digest() == digest) return begin_upsert_decision{true, {}};
    return status{errc::conflict, "request_id '" + cmd.request_id + "' names another claim (" +
                                      claim_text(*claim) + "); use a new request_id"};
  }
  if (claim && !claim->finished())
    return status{errc::busy, lineage_name(cmd.base) + " has an unfinished " + claim_text(*claim) +
                                  "; wait for it to complete, or AbortUpsert it"};
  auto base_name = "revision " + events::canonical_text(cmd.base);
  if (!base) return status{errc::not_found, base_name + " does not exist"};
  if (!base->visible())
    return status{errc::not_ready, base_name + " is " + v1::Availability_Name(base->availability) +
                                       "; only a READY or DEGRADED revision is replaced"};
  if (base->retiring())
    return status{errc::not_ready, base_name + " retires already (claim '" + base->retired_by + "')"};
  if (cmd.expected_generation != base->metadata_generation)
    return status{errc::stale_generation,
                  "expected_metadata_generation " + std::to_string(cmd.expected_generation) +
                      " is not current (" + base_name + " is at " +
                      std::to_string(base->metadata_generation) + "); re-read it and retry"};
  if (cmd.target_generation <= cmd.base.generation)
    return status{errc::invalid_argument,
                  "target_generation " + std::to_string(cmd.target_generation) +
                      " must be above the base's weight_generation " +
                      std::to_string(cmd.base.generation)};
  if (cmd.target_generation <= lineage.watermark)
    return status{errc::conflict, "target_generation " + std::to_string(cmd.target_generation) +
                                      " is not above the watermark " +
                                      std::to_string(lineage.watermark) + " of " +
                                      lineage_name(cmd.base) + " (its highest committed " +
                                      "generation); choose a higher one"};
  if (!gone(target))
    return status{errc::conflict, "revision " + events::canonical_text(target_cmd.id) +
                                      " exists already (" +
                                      v1::Availability_Name(target->availability) +
                                      "); choose another target_generation"};
  if (cmd.mode == v1::UPSERT_DELETE_FIRST) {
    if (!live_leases(*base, ctx.now_ms).empty())
      return status{errc::busy, base_name + " has " + lease_blockers(*base, ctx.now_ms) +
                                    "; DELETE_FIRST deletes it first: retry once they end, or "
                                    "use PUT_FIRST"};
    if (base->operation_id)
      return status{errc::busy, "operation " + std::to_string(base->operation_id) +
                                    " is running on " + base_name +
                                    "; wait for it or cancel it, then retry"};
  }
  begin_upsert_decision out;
  out.claimed = revision_envelope(cmd.base, ctx.now_ms, cmd.principal, cmd.request_id);
  auto* p = out.claimed.mutable_upsert_claimed();
  *p->mutable_base() = cmd.base.to_proto();
  p->set_target_generation(cmd.target_generation);
  p->set_mode(cmd.mode);
  p->set_request_id(cmd.request_id);
  p->set_request_digest(digest);
  *p->mutable_target_import() = params;
  return out;
}

v1::Envelope claim_phase_event(const events::upsert_claim& claim, v1::ClaimPhase phase,
                               const std::string& reason, int64_t now_ms,
                               const std::string& principal) {
  auto e = revision_envelope(claim.base(), now_ms, principal, claim.request_id());
  auto* p = e.mutable_claim_phase_changed();
  *p->mutable_base() = claim.claimed.base();
  p->set_request_id(claim.request_id());
  p->set_phase(phase);
  p->set_reason(reason);
  return e;
}

begin_import target_import(const events::upsert_claim& claim, const std::string& principal) {
  const auto& p = claim.claimed.target_import();
  begin_import cmd;
  cmd.id = claim.target();
  cmd.payload_group_id = p.payload_group_id();
  cmd.expected_payload_count = p.expected_payload_count();
  cmd.expected_logical_bytes = p.expected_logical_bytes();
  cmd.has_policy = true;
  cmd.policy = events::policy::from_proto(p.policy());
  cmd.affinity_count = p.affinity_count();
  cmd.principal = principal;
  cmd.request_id = claim.request_id();
  return cmd;
}

upsert_next next_upsert_step(const events::upsert_claim& c, const events::revision_record* base,
                             const events::revision_record* target) {
  using s = upsert_step;
  if (c.finished()) return {};
  auto target_aborted = [&] {
    return target && (target->availability == v1::DELETING || target->availability == v1::DELETED);
  };
  auto ended = [](v1::ClaimPhase phase) { return upsert_next{s::phase, phase, ""}; };
  if (c.mode() == v1::UPSERT_DELETE_FIRST) {
    if (c.phase == v1::CLAIM_DELETING_BASE) {
      if (gone(base)) return {s::begin_target, v1::CLAIM_IMPORTING_TARGET, ""};
      if (base->visible()) return {s::remove_base, {}, ""};
      return {};  // DELETING: its actor removes the members
    }
    // IMPORTING_TARGET
    if (target && target->visible()) return ended(v1::CLAIM_COMPLETED);
    if (!target || target_aborted())
      return {s::abort, v1::CLAIM_ABORTED, "the target's import ended without a commit"};
    return {};
  }
  switch (c.phase) {
    case v1::CLAIM_IMPORTING_TARGET:
      if (target && target->visible()) return ended(v1::CLAIM_RETIRING_BASE);  // committed directly
      if (!target || target_aborted())
        return {s::abort, v1::CLAIM_ABORTED,
                "the target's import ended without a commit; the base is untouched"};
      return {};
    case v1::CLAIM_RETIRING_BASE:
      if (gone(base)) return ended(v1::CLAIM_COMPLETED);
      if (base->availability == v1::DELETING) return ended(v1::CLAIM_DELETING_BASE);
      if (base->retired_by != c.request_id()) return {s::retire_base, {}, ""};
      return {};  // its leases drain
    case v1::CLAIM_DELETING_BASE:
      if (gone(base)) return ended(v1::CLAIM_COMPLETED);
      return {};
    default: return {};
  }
}

}  // namespace weightd::actors
