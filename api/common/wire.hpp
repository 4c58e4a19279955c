// The sizes both ends of an object stream agree on.
#pragma once

#include <cstddef>

namespace weightd::api {

/// The largest Put chunk the server accepts.
inline constexpr size_t kMaxChunkBytes = 4u << 20;
/// The largest chunk Get sends: with framing well under a stock gRPC client's
/// 4 MiB receive limit (a Python or Go reader needs no option).
inline constexpr size_t kGetChunkBytes = 1u << 20;
/// The first chunk of a Get; later ones double up to kGetChunkBytes.
inline constexpr size_t kFirstGetChunkBytes = 16u << 10;
/// HTTP/2 stream window of both ends: a few chunks in flight keep a
/// transfer streaming instead of waiting for window updates.
inline constexpr size_t kStreamWindowBytes = 16u << 20;

}  // namespace weightd::api
