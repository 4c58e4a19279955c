// Hex digests shared by every layer (identity names, request digests, object
// checksums): one implementation, lowercase hex.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace weightd::events {

/// Lowercase hex of `n` bytes.
std::string to_hex(const unsigned char* bytes, size_t n);

/// Lowercase hex of sha256(data).
std::string sha256_hex(std::string_view data);

}  // namespace weightd::events
