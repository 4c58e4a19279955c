// The upload step of `weightctl import`: payload objects sent in parallel.
//
// `jobs` workers, each with its own client, take the next payload; the first
// failure stops them all and is returned. A put refused because the tenant's
// puts in flight hold its share of the tier (RESOURCE_EXHAUSTED,
// --tenant-reserve-ratio) is this import's own parallelism on a small tier:
// it waits for one of the other uploads to finish and tries again; alone in
// flight, the refusal stands. An interrupt (interrupted()) stops every worker
// at its next chunk; the caller then sees interrupted() and decides.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "api/cli/progress.hpp"
#include "api/client/client.hpp"

namespace weightd::api {

/// One payload: where its bytes are in which file, and its header.
struct payload_put {
  v1::PutHeader header;
  std::filesystem::path source;
  uint64_t offset = 0;
  uint64_t size = 0;
  std::string file;          // the manifest path, shown by the progress line
  uint64_t file_number = 1;  // 1-based, shown by the progress line
};

/// Puts every payload of `puts`; `already_done` bytes (a resumed run's) count
/// as sent on `bar`. `stored(key)` runs (from a worker) for each stored one.
status put_payloads(const client_options& connection, const std::vector<payload_put>& puts,
                    unsigned jobs, progress_line& bar, uint64_t already_done,
                    const std::function<void(const std::string&)>& stored);

}  // namespace weightd::api
