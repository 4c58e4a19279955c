#include "events/lineage_fold.hpp"

#include <algorithm>

#include "events/event_type.hpp"

namespace weightd::events {

namespace {

using P = v1::Envelope::PayloadCase;

status refuse(const v1::Envelope& e, const std::string& why) {
  return {errc::internal, "event seq " + std::to_string(e.global_seq()) + " (" +
                              event_type_name(e) + ") does not apply: " + why};
}

/// The phases a claim of `mode` goes through, in order (ABORTED aside).
int rank(v1::UpsertMode mode, v1::ClaimPhase phase) {
  if (mode == v1::UPSERT_DELETE_FIRST) {
    switch (phase) {
      case v1::CLAIM_DELETING_BASE: return 1;
      case v1::CLAIM_IMPORTING_TARGET: return 2;
      case v1::CLAIM_COMPLETED: return 3;
      default: return 0;
    }
  }
  switch (phase) {
    case v1::CLAIM_IMPORTING_TARGET: return 1;
    case v1::CLAIM_RETIRING_BASE: return 2;
    case v1::CLAIM_DELETING_BASE: return 3;
    case v1::CLAIM_COMPLETED: return 4;
    default: return 0;
  }
}

}  // namespace

revision_key lineage_key(const revision_key& id) {
  auto l = id;
  l.generation = 0;
  return l;
}

bool upsert_claim::committed() const {
  return mode() == v1::UPSERT_PUT_FIRST && phase != v1::CLAIM_IMPORTING_TARGET &&
         phase != v1::CLAIM_ABORTED && phase != v1::CLAIM_PHASE_UNSPECIFIED;
}

bool operator==(const upsert_claim& a, const upsert_claim& b) {
  return a.claimed.SerializeAsString() == b.claimed.SerializeAsString() && a.phase == b.phase &&
         a.reason == b.reason && a.claimed_at_ms == b.claimed_at_ms &&
         a.updated_at_ms == b.updated_at_ms;
}

bool is_lineage_event(const v1::Envelope& e) {
  return e.payload_case() == P::kUpsertClaimed || e.payload_case() == P::kClaimPhaseChanged;
}

revision_key lineage_base_of(const v1::Envelope& e) {
  return revision_key::from_proto(e.payload_case() == P::kUpsertClaimed
                                      ? e.upsert_claimed().base()
                                      : e.claim_phase_changed().base());
}

void advance_watermark(lineage_record& lineage, uint64_t generation) {
  lineage.watermark = std::max(lineage.watermark, generation);
}

status evolve_lineages(lineage_index& index, const v1::Envelope& e) {
  if (e.payload_case() == P::kImportCommitted) {
    auto id = revision_key::from_proto(e.import_committed().id());
    auto& l = index.lineages[lineage_key(id)];
    l.lineage = lineage_key(id);
    advance_watermark(l, id.generation);
    return {};
  }
  if (!is_lineage_event(e)) return {};
  auto base = lineage_base_of(e);
  auto key = lineage_key(base);
  if (e.payload_case() == P::kUpsertClaimed) {
    const auto& p = e.upsert_claimed();
    auto& l = index.lineages[key];
    l.lineage = key;
    if (l.claim && !l.claim->finished())
      return refuse(e, "claim '" + l.claim->request_id() + "' of the lineage is unfinished");
    if (p.request_id().empty()) return refuse(e, "a claim without a request id");
    if (p.target_generation() <= base.generation)
      return refuse(e, "the target generation is not above the base's");
    if (p.target_generation() <= l.watermark)
      return refuse(e, "the target generation is not above the watermark " +
                           std::to_string(l.watermark));
    upsert_claim c;
    c.claimed = p;
    c.phase = p.mode() == v1::UPSERT_DELETE_FIRST ? v1::CLAIM_DELETING_BASE
                                                  : v1::CLAIM_IMPORTING_TARGET;
    c.claimed_at_ms = c.updated_at_ms = e.timestamp_ms();
    l.claim = std::move(c);
    return {};
  }
  const auto& p = e.claim_phase_changed();
  auto it = index.lineages.find(key);
  if (it == index.lineages.end() || !it->second.claim ||
      it->second.claim->request_id() != p.request_id())
    return refuse(e, "no claim '" + p.request_id() + "' on the lineage");
  auto& c = *it->second.claim;
  if (c.finished()) return refuse(e, "the claim has ended");
  if (p.phase() == v1::CLAIM_ABORTED) {
    if (c.committed()) return refuse(e, "a committed claim cannot be aborted");
  } else if (rank(c.mode(), p.phase()) <= rank(c.mode(), c.phase)) {
    return refuse(e, "the claim does not go from " + phase_name(c.phase) + " to " +
                         phase_name(p.phase()));
  }
  c.phase = p.phase();
  c.reason = p.reason();
  c.updated_at_ms = e.timestamp_ms();
  if (auto st = check_invariants(it->second); !st.ok()) return refuse(e, st.message());
  return {};
}

status check_invariants(const lineage_record& l) {
  auto violation = [&](const std::string& what) {
    return status{errc::internal, "invariant violated by lineage " + canonical_text(l.lineage) +
                                      ": " + what};
  };
  if (!l.claim) return {};
  const auto& c = *l.claim;
  if (c.target_generation() <= c.base_generation())
    return violation("claim '" + c.request_id() + "' targets a generation not above its base");
  if ((c.committed() || c.phase == v1::CLAIM_COMPLETED) && l.watermark < c.target_generation())
    return violation("claim '" + c.request_id() + "' is " + phase_name(c.phase) +
                     " but the watermark " + std::to_string(l.watermark) +
                     " is below its target generation");
  return {};
}

std::string phase_name(v1::ClaimPhase phase) {
  auto name = v1::ClaimPhase_Name(phase);
  return name.rfind("CLAIM_", 0) == 0 ? name.substr(6) : name;
}

std::string mode_name(v1::UpsertMode mode) {
  auto name = v1::UpsertMode_Name(mode);
  return name.rfind("UPSERT_", 0) == 0 ? name.substr(7) : name;
}

}  // namespace weightd::events
