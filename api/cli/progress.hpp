// The progress line of weightctl's transfers (import, export, obj put/get,
// migrate --wait), SPEC §10.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <utility>
#include <string>

namespace weightd::api {

/// Progress on stderr. On a terminal: one line fitted to its width, redrawn
/// at most 10 times a second, with percent, bytes, rate, ETA ("--" until a
/// rate is known) and file n/m. Not on a terminal: one line per file, as it
/// starts. Quiet: nothing. show() and end() may be called from several
/// threads.
class progress_line {
 public:
  explicit progress_line(uint64_t total_bytes, uint64_t total_files = 1, bool quiet = false);
  /// `done` bytes of the total so far; `what` is the file being moved, the
  /// `file`-th (1-based) of the total (0: count files by `what` changing).
  /// Not on a terminal, each (file, what) is printed once.
  void show(uint64_t done, const std::string& what, uint64_t file = 0);
  /// Ends the line (a newline on a terminal, once drawn).
  void end();

 private:
  void draw(uint64_t done, const std::string& what, uint64_t file);

  std::mutex mutex_;
  uint64_t total_, files_;
  bool quiet_, tty_;
  bool drawn_ = false;
  uint64_t files_seen_ = 0;
  std::string last_what_;
  std::set<std::pair<uint64_t, std::string>> logged_;  // not on a terminal: the lines printed
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace weightd::api
