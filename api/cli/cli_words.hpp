// The daemon speaks RPC in its messages ("use RemoveRevision", "pass
// drain_timeout_ms", "134217728 bytes", "access at 1796284281079 ms"); a
// person at weightctl wants its commands, flags, sizes and times. The daemon's
// messages stay as they are (other clients read them): weightctl translates
// the hints it knows here, in one place.
#pragma once

#include <cstdint>
#include <string>

namespace weightd::api {

/// `message` with RPC names and request fields replaced by weightctl's
/// commands and flags, byte counts as sizes ("128.0 MiB") and epoch
/// milliseconds as times ("2026-12-03T17:10:00Z (3 min ago)").
std::string in_cli_words(const std::string& message, int64_t now_ms = 0);

}  // namespace weightd::api
