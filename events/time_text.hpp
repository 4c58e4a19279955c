// Times as people read them in messages, logs and the CLI.
#pragma once

#include <cstdint>
#include <string>

namespace weightd::events {

/// "2026-12-02T10:34:20.123Z" (UTC, milliseconds) for ms since the epoch.
std::string utc_text(int64_t ms);

}  // namespace weightd::events
