// What `weightctl import` and `upsert` ask before and around their steps
// (import_command.cpp): the policy asked for, the IMPORTING revision --resume
// continues, the upsert's claim, and whether a stored payload is the file's.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <utility>

#include "api/cli/online_commands.hpp"
#include "api/client/client.hpp"
#include "events/identity.hpp"

namespace weightd::api {

/// The policy the user asked for with --preferred/--ratio/--mode (none: the daemon's default).
result<std::optional<events::v1::Policy>> requested_policy(const policy_args& policy);

/// With --resume: the IMPORTING revision `text` names (without #generation:
/// the lineage's highest, if it is IMPORTING); none means an ordinary import.
result<std::optional<std::pair<events::revision_key, v1::RevisionView>>> importing_revision(
    client& c, const std::string& text);

/// `weightctl upsert`: the base it replaces and the claim's request id.
struct upsert_plan {
  events::revision_key base;
  v1::RevisionView base_view;
  std::string request_id;
};

/// The claim of `plan` on the lineage as the daemon has it now.
result<v1::UpsertClaim> claim_now(client& c, const upsert_plan& plan);

/// Polls the claim until it leaves `phases` (DELETE_FIRST's base deletion,
/// PUT_FIRST's retirement with --wait); says once on `err` that it waits.
result<v1::UpsertClaim> wait_for_claim(client& c, const upsert_plan& plan,
                                       const std::set<std::string>& phases, bool quiet,
                                       std::ostream& err);

/// Whether `size` bytes of `file` from `offset` (one payload) are the bytes of
/// the stored object `info`, for --resume: by its sha256 when the store
/// recorded one, else by the xxh3-64 the store keeps of every object (the
/// manifest's sha256 of each file is still checked by every export).
result<bool> stored_matches(const std::filesystem::path& file, uint64_t offset, uint64_t size,
                            const v1::ObjectInfo& info);

}  // namespace weightd::api
