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

/// The checks a decoded snapshot must pass before a restart trusts it (the
/// content, where the record checksum only covers the bytes): every enum in
/// range, every SPEC §3 invariant, canonical group ids and manifest keys,
/// the id allocators at or above every id in use, running operations that
/// agree with their revisions, the byte sums of the object index. The first
/// failure, named; DATA_LOSS.
status check_snapshot(const store_state& state);

}  // namespace weightd::events
