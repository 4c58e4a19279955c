// decide for lineage replacement (SPEC §4 upsert): pure functions of the
// lineage's record, its base's and target's records and the command. The
// lineage actor (lineage.hpp) carries out what they decide.
#pragma once

#include <string>

#include "core/messages.hpp"
#include "core/revision_decide.hpp"
#include "events/lineage_fold.hpp"

namespace weightd::actors {

/// BeginUpsert decided: the same request again (reply with the existing
/// claim), or the UpsertClaimed event to commit with the claim's first step.
struct begin_upsert_decision {
  bool retry = false;
  events::v1::Envelope claimed;  // when !retry
};

/// The SPEC §4 rules of BeginUpsert, in this order: request_id required; the
/// same request_id and arguments -> the existing claim (other arguments ->
/// CONFLICT); an unfinished claim -> BUSY; an unknown base -> NOT_FOUND, one
/// that is not READY/DEGRADED (or retires) -> NOT_READY; the base's
/// generation fence; target generation <= the base's -> INVALID_ARGUMENT
/// naming target_generation, <= the watermark -> CONFLICT naming it; an
/// existing target -> CONFLICT; DELETE_FIRST: a live lease or an operation on
/// the base -> BUSY; then the target's import parameters as BeginImport checks
/// them. Nothing is decided before every rule passed (no claim is left).
result<begin_upsert_decision> decide_begin_upsert(const events::lineage_record& lineage,
                                                  const events::revision_record* base,
                                                  const events::revision_record* target,
                                                  const begin_upsert& cmd,
                                                  const decide_context& ctx);

/// A ClaimPhaseChanged of the claim (ABORTED with the reason).
events::v1::Envelope claim_phase_event(const events::upsert_claim& claim,
                                       events::v1::ClaimPhase phase, const std::string& reason,
                                       int64_t now_ms, const std::string& principal);

/// The BeginImport of the claim's target, with the claim's phase event along.
begin_import target_import(const events::upsert_claim& claim, const std::string& principal);

/// What an unfinished claim does next, given its base and target as they are
/// now (null = unknown). Called after every command, every change of a
/// lineage revision and at startup, so a crash at any step resumes.
enum class upsert_step {
  wait,          // for the client (upload, CommitUpsert) or the base's leases
  begin_target,  // DELETE_FIRST: the base is gone; begin the target (phase IMPORTING_TARGET along)
  retire_base,   // PUT_FIRST: the target is READY; the base stops granting leases
  remove_base,   // DELETE_FIRST: delete the base (no lease, no operation)
  phase,         // record `phase`: the revisions moved on
  abort,         // the target's import ended without a commit: ABORTED with `reason`
};
struct upsert_next {
  upsert_step step = upsert_step::wait;
  events::v1::ClaimPhase phase = events::v1::CLAIM_PHASE_UNSPECIFIED;
  std::string reason;
};
upsert_next next_upsert_step(const events::upsert_claim& claim,
                             const events::revision_record* base,
                             const events::revision_record* target);


/// "PUT_FIRST claim 'r1' (generation 3 -> 4, IMPORTING_TARGET)": for messages.
std::string claim_text(const events::upsert_claim& claim);

}  // namespace weightd::actors
