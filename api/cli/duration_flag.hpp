// Durations in weightctl's flags (SPEC §10): "30s", "5m", "250ms", "1h", read
// by the daemon's own parser (api/common/units.hpp). A bare number is refused
// as the daemon refuses it, naming the flag and the units: `--ttl 60` is not
// silently 60 ms.
#pragma once

#include <cstdint>
#include <string>

#include "events/status.hpp"

namespace weightd::api {

/// `text` in milliseconds, or INVALID_ARGUMENT naming `flag` and the units.
result<uint64_t> parse_duration_ms(const std::string& text, const std::string& flag);

}  // namespace weightd::api
