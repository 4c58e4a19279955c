#include "persistence/record.hpp"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

namespace weightd::persistence {

namespace {
constexpr uint8_t kRecordVersion = 1;
constexpr size_t kHeaderBytes = 1 + 8;

uint64_t record_checksum(std::string_view key, std::string_view body) {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, key.data(), key.size());
  XXH3_64bits_update(&state, body.data(), body.size());
  return XXH3_64bits_digest(&state);
}
}  // namespace

std::string be64(uint64_t value) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i, value >>= 8) out[i] = static_cast<char>(value & 0xff);
  return out;
}

uint64_t read_be64(std::string_view bytes) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value = (value << 8) | static_cast<uint8_t>(bytes[i]);
  return value;
}

std::string encode_record(std::string_view key, std::string_view body) {
  std::string out;
  out.reserve(kHeaderBytes + body.size());
  out.push_back(static_cast<char>(kRecordVersion));
  out += be64(record_checksum(key, body));
  out.append(body.data(), body.size());
  return out;
}

std::optional<std::string_view> decode_record(std::string_view key, std::string_view record) {
  if (record.size() < kHeaderBytes) return std::nullopt;
  if (static_cast<uint8_t>(record[0]) != kRecordVersion) return std::nullopt;
  auto body = record.substr(kHeaderBytes);
  if (read_be64(record.substr(1, 8)) != record_checksum(key, body)) return std::nullopt;
  return body;
}

std::string stream_hash(std::string_view stream) {
  XXH128_hash_t h = XXH3_128bits(stream.data(), stream.size());
  return be64(h.high64) + be64(h.low64);
}

}  // namespace weightd::persistence
