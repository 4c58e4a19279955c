// Envelope <-> stored record, shared by every backend (see FORMAT.md).
#pragma once

#include "persistence/journal_backend.hpp"

#include <string>
#include <string_view>

#include "events/events.pb.h"
#include "events/status.hpp"

namespace weightd::persistence {

/// The record stored under be64(seq) for `e` (whose global_seq is seq).
std::string encode_event(const events::v1::Envelope& e);

/// Decodes, verifies and upcasts the record stored under be64(seq); a bad
/// checksum or unparsable body is DATA_LOSS naming the seq.
result<events::v1::Envelope> decode_event(uint64_t seq, std::string_view record);

/// Snapshot record body: be64(timestamp_ms) ‖ be32(len(stream)) ‖ stream ‖ data.
std::string encode_snapshot_body(std::string_view stream, int64_t timestamp_ms,
                                 std::string_view data);
bool decode_snapshot_body(std::string_view body, std::string& stream, int64_t& timestamp_ms,
                          std::string& data);

}  // namespace weightd::persistence

namespace weightd::persistence {
/// Fills what the journal owns in an envelope about to be written (assign),
/// or checks that a copied one carries exactly these seqs: INVALID_ARGUMENT
/// naming both when it does not. `epoch` is the highest epoch the journal
/// holds: an assigned envelope without one gets it, and one below it is
/// refused (DATA_LOSS, SPEC §11 fencing); a higher one raises it.
status stamp_event(events::v1::Envelope& e, uint64_t global_seq, uint64_t stream_seq,
                   uint64_t writer_id, numbering how, uint64_t& epoch);
}  // namespace weightd::persistence
