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

/// sha256 of bytes that arrive in pieces (streams, files read in chunks).
class sha256_stream {
 public:
  sha256_stream();
  ~sha256_stream();
  sha256_stream(const sha256_stream&) = delete;
  sha256_stream& operator=(const sha256_stream&) = delete;
  void update(const void* data, size_t n);
  void update(std::string_view data) { update(data.data(), data.size()); }
  /// Lowercase hex of everything so far; the stream starts over afterwards.
  std::string hex();

 private:
  struct context;
  context* ctx_;
};

}  // namespace weightd::events
