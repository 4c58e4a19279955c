// SPEC §11 Divergence, a former leader's step back. Its journal went on past
// the point where the current leader's history left it (the leader says
// where: the first leadership_taken above its epoch, FollowResponse
// .divergence). Those events were never the store's history: under
// --sync-standbys >= 1 none was acknowledged. They are set aside, not lost:
//   1. written to <data>/diverged-<epoch>.ndjson, one event per line as
//      `weightctl journal dump --json` prints them (and `journal dump --file`
//      reads them back), through a temporary file, fsynced, renamed, the
//      directory fsynced;
//   2. only then removed from the journal (truncate_after, one transaction).
// A crash between the two leaves the file and the whole journal: the next
// connection does it again and writes the same file.
#pragma once

#include <filesystem>

#include "api/weightd.pb.h"
#include "persistence/journal_backend.hpp"

namespace weightd::api {

/// The file the events past `divergence` go to, in `data_dir`.
std::filesystem::path diverged_file(const std::filesystem::path& data_dir,
                                    const v1::Divergence& divergence);

/// Sets the journal's events past divergence.last_common_seq aside (see
/// above); returns how many.
result<uint64_t> set_aside_diverged(persistence::journal_backend& journal,
                                    const v1::Divergence& divergence,
                                    const std::filesystem::path& data_dir);

}  // namespace weightd::api
