// The journal's record layer and event decoding take whatever bytes a disk
// holds: a damaged record must be DATA_LOSS (or a clean decode), never a
// crash, an exception or a read past the input. A record that decodes
// re-encodes to bytes that decode to the same envelope.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "quiet_protobuf.hpp"
#include "events/evolve.hpp"
#include "events/upcast.hpp"
#include "persistence/event_codec.hpp"
#include "persistence/record.hpp"

using namespace weightd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // The first 8 bytes (when there are) are the seq the record is stored under.
  uint64_t seq = size >= 8 ? persistence::read_be64(bytes) : 1;
  std::string_view record = size >= 8 ? bytes.substr(8) : bytes;

  (void)persistence::decode_record(persistence::be64(seq), record);
  auto decoded = persistence::decode_event(seq, record);
  if (!decoded.ok()) {
    if (decoded.error().message().empty()) __builtin_trap();  // every error says what
    return 0;
  }
  // What decodes may be looked at like replay does.
  (void)events::stream_of(*decoded);
  auto copy = *decoded;
  (void)events::upcast(copy);
  copy.set_global_seq(seq);
  auto again = persistence::decode_event(seq, persistence::encode_event(copy));
  if (!again.ok()) __builtin_trap();
  return 0;
}
