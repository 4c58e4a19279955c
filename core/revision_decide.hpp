// decide: a revision command against the current record -> the events that
// express it, "nothing to change" (reply with the record as it is), or an
// error. Pure functions of (record, command, context): the revision actor
// persists what they return and applies it with evolve_revisions().
#pragma once

#include <chrono>

#include <functional>
#include <optional>
#include <vector>

#include "core/decision.hpp"
#include "core/messages.hpp"
#include "events/revision_fold.hpp"

namespace weightd::actors {

/// sha256 over LP(operation) and LP(each argument): what makes two requests
/// "the same request" for idempotent retries.
std::string request_digest(const std::string& operation, const std::vector<std::string>& args);

result<decision> decide_begin(const events::revision_record* current, const begin_import& cmd,
                              const decide_context& ctx);

/// CommitImport, step 1 (no object store needed): input, state, generation.
/// A decision with no events means "already committed: reply as is";
/// `needs_group_check` means step 2 must run.
struct commit_precheck {
  bool needs_group_check = false;
  commit_import normalized;  // payload_group_id filled in
};
result<commit_precheck> precheck_commit(const events::revision_record* current,
                                        const commit_import& cmd);

/// CommitImport, step 2: the group as the object store has it (SPEC §4).
status validate_commit_group(const events::revision_record& r, const commit_import& cmd,
                             const group_snapshot& group);

/// CommitImport, step 3: the events (READY + HOT; an operation toward the
/// preferred residency when it is not HOT); GENERATION_EXHAUSTED when that
/// operation would need an id after the last.
result<decision> decide_commit(const events::revision_record& r, const commit_import& cmd,
                       const group_snapshot& group, const decide_context& ctx);

/// keys_to_remove as AbortImport uses them: empty strings dropped, duplicates
/// removed, order kept.
std::vector<std::string> cleaned_keys(const std::vector<std::string>& keys);

result<decision> decide_abort(const events::revision_record* current, const abort_import& cmd,
                              const decide_context& ctx);

/// An IMPORTING revision idle past the abandon timeout (no event since
/// `r.updated_at_ms`, no put since `last_put_ms`) is aborted by the reconciler.
decision decide_abandon(const events::revision_record& r, int64_t last_put_ms,
                        std::chrono::milliseconds abandon, const decide_context& ctx);

/// UpdatePolicy, Migrate and RemoveRevision cancel an automatic operation
/// (an event naming the command, first in the decision) and are BUSY for one
/// a user started (SPEC §4 «Automatic work never blocks a user»).
result<decision> decide_update_policy(const events::revision_record* current,
                                      const events::revision_index& fold,
                                      const update_policy& cmd, const decide_context& ctx);

/// Retirement of an upsert's base: the running operation cancelled, then
/// RetirementStarted; nothing when the same claim retires it already or it
/// is going away anyway.
result<decision> decide_retire(const events::revision_record* current,
                               const retire_revision& cmd, const decide_context& ctx);

result<decision> decide_remove(const events::revision_record* current,
                               const events::revision_index& fold, const remove_revision& cmd,
                               const decide_context& ctx);

/// Migrate (SPEC §4): an OperationStarted toward the target, or nothing when
/// the active operation already has that target (the reply is the revision's
/// active or newest operation).
result<decision> decide_migrate(const events::revision_record* current,
                                const events::revision_index& fold, const migrate_revision& cmd,
                                const decide_context& ctx);

/// The reconciler's move, re-checked against the current record: nothing
/// when the revision is no longer eligible (it changed since the round).
decision decide_auto_migrate(const events::revision_record* current, const auto_migrate& cmd,
                             const decide_context& ctx);

/// An automatic OperationStarted toward `target` (no generation change);
/// nothing once operation ids are exhausted.
std::optional<events::v1::Envelope> automatic_migration(const events::revision_record& r,
                                                        events::v1::Residency target, double ratio,
                                                        const std::string& reason,
                                                        const decide_context& ctx);

/// HOT > MIXED > COLD: how much of a revision memory holds.
int warmth(events::v1::Residency residency);

/// The operation a Migrate reply shows: the active one, else the newest.
const events::operation_record* newest_operation(const events::revision_index& fold,
                                                 const events::revision_key& id);

}  // namespace weightd::actors
