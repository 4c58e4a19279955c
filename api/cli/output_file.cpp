#include "api/cli/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "api/cli/exit_codes.hpp"

namespace weightd::api {

namespace {

constexpr int kMaxSymlinkHops = 40;  // as the kernel's own limit (ELOOP)

/// PATH with every symlink of its last component followed; a relative link
/// is relative to the directory holding it. Sets `os_error` on a loop.
std::string follow_symlinks(std::string path, int& os_error) {
  for (int hop = 0; hop < kMaxSymlinkHops; ++hop) {
    struct stat st{};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return path;
    std::string link(static_cast<size_t>(st.st_size > 0 ? st.st_size : 4096), '\0');
    auto n = ::readlink(path.c_str(), link.data(), link.size());
    if (n < 0) return path;
    link.resize(static_cast<size_t>(n));
    if (!link.empty() && link.front() != '/') {
      auto slash = path.rfind('/');
      if (slash != std::string::npos) link = path.substr(0, slash + 1) + link;
    }
    path = link;
  }
  os_error = ELOOP;
  return path;
}

}  // namespace

output_file::output_file(const std::string& path) : named_(path) {
  if (path == "-") {
    std::cout.flush();  // nothing of ours may come after bytes already in its buffer
    fd_ = STDOUT_FILENO;
    owns_fd_ = false;
    in_place_ = true;
    target_ = "standard output";
    return;
  }
  int loop = 0;
  target_ = follow_symlinks(path, loop);
  if (loop != 0) {
    fail("cannot write", named_, loop);
    return;
  }
  struct stat st{};
  bool exists = ::stat(target_.c_str(), &st) == 0;
  if (!exists && errno != ENOENT) {  // ENOTDIR: a path under a regular file, EACCES, ...
    fail("cannot write", named_, errno);
    return;
  }
  if (exists && !S_ISREG(st.st_mode)) {  // a device, FIFO or socket: never replaced
    in_place_ = true;
    fd_ = ::open(target_.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd_ < 0) fail("cannot open", named_, errno);
    return;
  }
  temp_ = target_ + ".weightd-partial";
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOCTTY | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    int e = errno;
    temp_.clear();  // nothing was created, nothing to remove
    fail("cannot write", named_, e);
    return;
  }
  if (exists) ::fchmod(fd_, st.st_mode & 07777);  // the replaced file's mode stays
}

output_file::~output_file() {
  if (!committed_) discard();
}

bool output_file::fail(const std::string& what, const std::string& path, int os_error) {
  if (error_.empty()) {
    auto shown = path == "standard output" ? path : "'" + path + "'";
    error_ = what + " " + shown + ": " + std::strerror(os_error);
  }
  return false;
}

bool output_file::write(std::string_view bytes) {
  if (!ok() || fd_ < 0) return false;
  while (!bytes.empty()) {
    auto n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("cannot write", in_place_ ? target_ : named_, n < 0 ? errno : EIO);
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool output_file::close() {
  if (fd_ < 0) return ok();
  int fd = fd_;
  fd_ = -1;
  if (!owns_fd_) return ok();
  if (::close(fd) != 0 && errno != EINTR) return fail("cannot write", named_, errno);
  return ok();
}

bool output_file::commit() {
  if (!close()) return false;
  if (!temp_.empty() && ::rename(temp_.c_str(), target_.c_str()) != 0)
    return fail("cannot rename the download over", named_, errno);
  committed_ = true;
  return true;
}

void output_file::discard() {
  close();
  if (!temp_.empty()) ::unlink(temp_.c_str());
  committed_ = true;  // nothing left to do
}

int fail_local(std::ostream& err, const std::string& message) {
  err << "weightctl: " << message << "\n";
  return kExitLocalFile;
}

int check_stdout(std::ostream& err) {
  errno = 0;
  std::cout.flush();
  if (std::cout) return 0;
  int e = errno != 0 ? errno : EIO;
  return fail_local(err, std::string{"cannot write standard output: "} + std::strerror(e));
}

}  // namespace weightd::api
