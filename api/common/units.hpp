// Numbers with units, as the daemon's flags and config file and weightctl's
// flags all read them (SPEC §10): one parser for each, one list of units.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "events/status.hpp"

namespace weightd::api {

/// "250ms", "30s", "5m", "1h", "1.5s" (a whole number of milliseconds). A
/// bare number is refused — is `30` seconds or milliseconds? — except `0`.
result<std::chrono::milliseconds> parse_duration(std::string_view text);

/// A byte count: "4096" (bytes), "64KiB", "1MiB", "8GiB", "1TiB" (powers of 2),
/// "1kB"/"1KB", "1MB", "1GB", "1TB" (powers of 10), "512B"; "1.5GiB" when it is
/// a whole number of bytes.
result<uint64_t> parse_size(std::string_view text);

/// The shortest exact spelling parse_duration reads back: "5m", "30s", "250ms".
std::string format_duration(std::chrono::milliseconds d);

/// The shortest exact spelling parse_size reads back: "1GiB", "64MiB", "1000".
std::string format_size(uint64_t bytes);

}  // namespace weightd::api
