// The progress line of weightctl's transfers (import, export, obj put/get,
// migrate --wait).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace weightd::api {

/// Progress on stderr when it is a terminal: bytes, rate, ETA.
struct progress_line {
  uint64_t total;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  bool tty;
  explicit progress_line(uint64_t total_bytes);
  void show(uint64_t done, const std::string& what);
  void end();
};

}  // namespace weightd::api
