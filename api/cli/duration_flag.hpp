// Durations in weightctl's flags (SPEC §10): "30s", "5m", "250ms", "1h", "2d";
// a plain number keeps meaning milliseconds (the flags' old spelling).
#pragma once

#include <cstdint>
#include <string>

#include "events/status.hpp"

namespace weightd::api {

/// `text` in milliseconds, or INVALID_ARGUMENT naming `flag` and the units.
result<uint64_t> parse_duration_ms(const std::string& text, const std::string& flag);

}  // namespace weightd::api
