#include "persistence/directory_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace weightd::persistence {

result<directory_lock> directory_lock::take(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  auto path = dir / "weightd.lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return status{errc::internal, "cannot open " + path.string() + ": " + std::strerror(errno)};
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return status{errc::busy, "another weightd uses " + dir.string() +
                                  "; stop it or give this one other directories"};
  }
  return directory_lock{fd};
}

directory_lock& directory_lock::operator=(directory_lock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

directory_lock::~directory_lock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace weightd::persistence
