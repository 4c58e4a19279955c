// store_state <-> StateSnapshot (events.proto): the snapshot format.
#pragma once

#include <string>
#include <string_view>

#include "events/state.hpp"
#include "events/status.hpp"

namespace weightd::events {

/// The stream under which whole-state snapshots are stored.
inline constexpr const char* kStateSnapshotStream = "state";

std::string encode_state(const store_state& state);

/// Decodes a snapshot; derived indexes are rebuilt. A snapshot from a newer
/// schema or one that does not parse is refused (callers replay instead).
result<store_state> decode_state(std::string_view bytes);

}  // namespace weightd::events
