// Human-readable renderings shared by weightctl's commands.
#pragma once

#include <cstdint>
#include <string>

#include "api/common/enum_names.hpp"
#include "events/events.pb.h"

namespace weightd::api {

/// "1.5 GiB", "512 B".
std::string format_bytes(uint64_t bytes);

/// One line per event: "#12 2026-...Z system#1 writer_started {...}".
std::string format_event_line(const events::v1::Envelope& e);

/// The envelope as one line of JSON (proto field names).
std::string format_event_json(const events::v1::Envelope& e);

/// A JSON string literal for `s` (quotes included).
std::string json_string(const std::string& s);

}  // namespace weightd::api
