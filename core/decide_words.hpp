// The words and checks the revision decisions share (revision_decide.cpp,
// policy_decide.cpp): names in messages, the generation rule of idempotent
// retries, policy defaults, the one builder of OperationStarted. Pure, no CAF.
#pragma once

#include <string>
#include <vector>

#include "core/decision.hpp"
#include "core/messages.hpp"
#include "events/revision_fold.hpp"

namespace weightd::actors::decide_words {

namespace v1 = events::v1;
using events::revision_record;

/// "revision ns/resource@rev#gen": how messages name a revision.
std::string name(const events::revision_key& id);

/// READY, IMPORTING, ...
const char* state_name(v1::Availability a);

/// A policy as one word of a request digest.
std::string policy_text(const events::policy& p);

/// NOT_FOUND naming the revision.
status not_found(const events::revision_key& id);

/// expected vs current generation, with the idempotent-retry rule.
/// Returns ok to proceed, or an error; sets `retry` when the request is the
/// one behind the last event (reply with the record as it is).
status check_generation(const revision_record& r, uint64_t expected, const std::string& digest,
                        bool& retry);

/// UpdatePolicy and Migrate on an upsert's retiring base.
status retiring_busy(const revision_record& r);

/// "operation 8 (MIGRATING to COLD)": a running operation, for messages.
std::string operation_text(const events::operation_record& op);

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
                                           const decide_context& ctx);

/// Fills defaults and checks a policy; `field` prefixes errors.
status normalize_policy(events::policy& p, const std::string& field);

/// POLICY_UNSATISFIABLE when MIXED has fewer than 2 affinity units (`what` is
/// how the message says where the count came from).
status mixed_needs_units(const events::policy& p, uint64_t units, const std::string& what);

/// The one builder of OperationStarted.
v1::OperationStarted operation_toward(const revision_record& r, v1::Residency target, double ratio,
                                      uint64_t units, const decide_context& ctx);

/// operation_toward() the policy's residency (and ratio).
v1::OperationStarted migration_toward(const revision_record& r, const events::policy& p,
                                      uint64_t units, const decide_context& ctx);

/// SPEC §5: ids never wrap; starting an operation after the last id changes nothing.
status operation_ids_exhausted();

/// A ratio with every digit it has (messages and digests).
std::string ratio_text(double ratio);

/// Distinct affinity units among the payload members (a payload without an
/// affinity id is a unit of its own).
uint64_t affinity_units(const group_snapshot& group, const std::string& manifest_key);

}  // namespace weightd::actors::decide_words
