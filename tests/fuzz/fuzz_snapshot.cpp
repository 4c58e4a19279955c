// A snapshot is trusted only after check_snapshot: whatever bytes it holds,
// decoding and checking must end in a state or an error, never a crash. A
// state that passes the check encodes to bytes that decode to the same state.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "quiet_protobuf.hpp"
#include "events/state_codec.hpp"
#include "persistence/event_codec.hpp"

using namespace weightd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::string stream, body;
  int64_t timestamp_ms = 0;
  // Either a whole snapshot record body, or the state bytes themselves.
  if (persistence::decode_snapshot_body(bytes, stream, timestamp_ms, body)) bytes = body;
  auto state = events::decode_state(bytes);
  if (!state.ok()) return 0;
  if (!events::check_snapshot(*state).ok()) return 0;
  auto again = events::decode_state(events::encode_state(*state));
  if (!again.ok() || !(*again == *state)) __builtin_trap();
  return 0;
}
