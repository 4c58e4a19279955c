// Checksummed records (see FORMAT.md): u8 version ‖ be64(xxh3_64(key ‖ body)) ‖ body.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace weightd::persistence {

/// Big-endian encodings: keys sort numerically under memcmp.
std::string be64(uint64_t value);
uint64_t read_be64(std::string_view bytes);  // bytes.size() >= 8

/// Wraps `body` in a record whose checksum covers `key` and `body`.
std::string encode_record(std::string_view key, std::string_view body);

/// The body of a record stored under `key`, or nothing when the record is
/// truncated, of an unknown version, or fails its checksum.
std::optional<std::string_view> decode_record(std::string_view key, std::string_view record);

/// The 16-byte key prefix of a stream (XXH3-128 of its name).
std::string stream_hash(std::string_view stream);

}  // namespace weightd::persistence
