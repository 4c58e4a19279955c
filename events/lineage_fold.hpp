// Lineages (SPEC §4 Lineage replacement): per (tenant, ns, resource,
// revision), the committed-generation watermark and the newest upsert claim,
// as the journal folds them. The watermark is the highest generation an
// ImportCommitted made READY — it never decreases, also when that revision is
// deleted later; a claim is UpsertClaimed followed by its ClaimPhaseChanged
// events, and at most one claim per lineage is unfinished.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "events/events.pb.h"
#include "events/identity.hpp"
#include "events/status.hpp"

namespace weightd::events {

/// A lineage's address: a revision key with generation 0.
revision_key lineage_key(const revision_key& id);

struct upsert_claim {
  v1::UpsertClaimed claimed;  // base, target generation, mode, request id, import parameters
  v1::ClaimPhase phase = v1::CLAIM_PHASE_UNSPECIFIED;
  std::string reason;  // why it was aborted
  int64_t claimed_at_ms = 0, updated_at_ms = 0;

  const std::string& request_id() const { return claimed.request_id(); }
  v1::UpsertMode mode() const { return claimed.mode(); }
  uint64_t base_generation() const { return claimed.base().weight_generation(); }
  uint64_t target_generation() const { return claimed.target_generation(); }
  revision_key base() const { return revision_key::from_proto(claimed.base()); }
  revision_key target() const {
    auto t = base();
    t.generation = target_generation();
    return t;
  }
  bool finished() const { return phase == v1::CLAIM_COMPLETED || phase == v1::CLAIM_ABORTED; }
  /// PUT_FIRST past IMPORTING_TARGET: the target is committed, the base goes.
  bool committed() const;
  friend bool operator==(const upsert_claim& a, const upsert_claim& b);
};

struct lineage_record {
  revision_key lineage;
  uint64_t watermark = 0;
  std::optional<upsert_claim> claim;  // the newest, finished ones too
  friend bool operator==(const lineage_record& a, const lineage_record& b) {
    return a.lineage == b.lineage && a.watermark == b.watermark && a.claim == b.claim;
  }
  friend bool operator!=(const lineage_record& a, const lineage_record& b) { return !(a == b); }
};

struct lineage_index {
  std::map<revision_key, lineage_record> lineages;  // by lineage_key
  const lineage_record* find(const revision_key& lineage) const {
    auto it = lineages.find(lineage);
    return it == lineages.end() ? nullptr : &it->second;
  }
  friend bool operator==(const lineage_index& a, const lineage_index& b) {
    return a.lineages == b.lineages;
  }
};

/// True for UpsertClaimed and ClaimPhaseChanged.
bool is_lineage_event(const v1::Envelope& e);

/// The claim's base revision (lineage events live in its stream).
revision_key lineage_base_of(const v1::Envelope& e);

/// The watermark rule: a commit of `generation` raises it, nothing lowers it.
void advance_watermark(lineage_record& lineage, uint64_t generation);

/// Applies a lineage event, or an ImportCommitted (the watermark); other
/// events do not concern lineages. Refuses (with the seq) what cannot apply.
status evolve_lineages(lineage_index& index, const v1::Envelope& e);

/// One lineage's invariants: a claim's target above its base; a committed
/// PUT_FIRST claim or a completed one at or below the watermark.
status check_invariants(const lineage_record& l);

/// The phase as SPEC §4 names it ("IMPORTING_TARGET", ...).
std::string phase_name(v1::ClaimPhase phase);
std::string mode_name(v1::UpsertMode mode);

}  // namespace weightd::events
