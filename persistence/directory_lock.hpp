// One weightd per directory: an exclusive flock on <dir>/weightd.lock, held
// for as long as the lock lives. Two daemons sharing a journal or a tier
// would corrupt each other's view of the store; a leader and a standby
// pointed at one data directory are refused the same way.
#pragma once

#include <filesystem>

#include "events/status.hpp"

namespace weightd::persistence {

class directory_lock {
 public:
  /// Creates `dir` if needed and locks it; BUSY when another process holds it.
  static result<directory_lock> take(const std::filesystem::path& dir);

  directory_lock() = default;
  directory_lock(directory_lock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  directory_lock& operator=(directory_lock&& other) noexcept;
  directory_lock(const directory_lock&) = delete;
  directory_lock& operator=(const directory_lock&) = delete;
  ~directory_lock();

 private:
  explicit directory_lock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace weightd::persistence
