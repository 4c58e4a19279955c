// Human-readable renderings shared by weightctl's commands.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/common/enum_names.hpp"
#include "events/events.pb.h"

namespace weightd::api {

/// "1.5 GiB", "512 B".
std::string format_bytes(uint64_t bytes);

/// A table column's width: `minimum`, or wider for the longest cell, so that
/// a long id or holder never runs into the next column.
size_t column_width(size_t minimum, const std::vector<std::string>& cells);

/// "1 object", "3 objects": a count with its noun in the right number.
std::string count_of(uint64_t n, const std::string& one, const std::string& many);

/// "2026-12-03T17:10:00Z (in 59 s)" / "(3 min ago)": a UTC time to the
/// second and how far it is from now_ms (default: the clock's now).
std::string format_time(int64_t ms, int64_t now_ms = 0);

/// "59 s", "3 min", "2 h", "4 d" (rounded down; the magnitude of `ms`).
std::string format_span(int64_t ms);

/// Milliseconds since the epoch, now.
int64_t now_epoch_ms();

/// One line per event: "#12 2026-...Z system#1 writer_started {...}".
std::string format_event_line(const events::v1::Envelope& e);

/// The envelope as one line of JSON (json_output.hpp's rules).
std::string format_event_json(const events::v1::Envelope& e);

/// A JSON string literal for `s` (quotes included).
std::string json_string(const std::string& s);

}  // namespace weightd::api
