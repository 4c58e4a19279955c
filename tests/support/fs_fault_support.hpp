// Helpers for the tests that run weightd on real, small filesystems and on
// damaged journal files: a tmpfs of its own (mounted by the test, unmounted
// in the destructor), filler files, a weightd started with any flags and its
// log kept, and a weightd run until it exits (for startups that must fail).
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "api/common/loopback.hpp"
#include "support.hpp"

namespace weightd::test {

/// A tmpfs of `size` mounted on a fresh directory, unmounted (lazily, so also
/// while something still holds a file in it) and removed at scope end.
/// `ok()` is false when mounting is not possible here (not root, or no
/// CAP_SYS_ADMIN); `why()` then says why.
class small_fs {
 public:
  explicit small_fs(const std::filesystem::path& dir, const std::string& size = "8m")
      : dir_(dir) {
    std::filesystem::create_directories(dir_);
    if (geteuid() != 0) {
      why_ = "not root (mounting a tmpfs needs root)";
      return;
    }
    auto options = "size=" + size;
    if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, options.c_str()) != 0) {
      why_ = "mount -t tmpfs -o " + options + " tmpfs " + dir_.string() + " failed: " +
             std::strerror(errno);
      return;
    }
    mounted_ = true;
  }
  ~small_fs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  small_fs(const small_fs&) = delete;
  small_fs& operator=(const small_fs&) = delete;

  bool ok() const { return mounted_; }
  const std::string& why() const { return why_; }
  const std::filesystem::path& path() const { return dir_; }

  /// Bytes that can still be written (a tmpfs keeps no root reserve).
  uint64_t free_bytes() const {
    struct statvfs s{};
    if (::statvfs(dir_.c_str(), &s) != 0) return 0;
    return static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
  }

 private:
  std::filesystem::path dir_;
  bool mounted_ = false;
  std::string why_;
};

/// Skips the calling test case (with a MESSAGE) unless `fs` is mounted.
#define REQUIRE_SMALL_FS_OR_SKIP(fs)                                    \
  if (!(fs).ok()) {                                                     \
    MESSAGE("skipped: this test needs its own tmpfs: " << (fs).why()); \
    return;                                                             \
  }

/// Writes real bytes to `path` until the filesystem is full (ENOSPC);
/// returns how many were written.
inline uint64_t fill_until_full(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  std::string chunk(1 << 20, 'f');
  uint64_t total = 0;
  for (size_t size : {size_t{1} << 20, size_t{4096}, size_t{1}}) {
    for (;;) {
      ssize_t n = ::write(fd, chunk.data(), size);
      if (n <= 0) break;
      total += static_cast<uint64_t>(n);
    }
  }
  ::fsync(fd);
  ::close(fd);
  return total;
}

/// Writes a filler file to `fs` that leaves about `leave` bytes free.
inline void leave_free(const small_fs& fs, const std::filesystem::path& filler, uint64_t leave) {
  auto free = fs.free_bytes();
  REQUIRE(free > leave);
  write_file(filler, std::string(free - leave, 'f'));
  CHECK(fs.free_bytes() <= leave + 4096);
}

/// Regular files under `dir` (recursively), weightd.lock files not counted.
inline size_t count_files(const std::filesystem::path& dir) {
  size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file() && it->path().filename() != "weightd.lock") ++n;
  return n;
}

/// The flags of a weightd on free loopback ports with data in `data` and its
/// HOT tier in `hot`; `extra` adds or overrides flags (--cold-dir, ...).
inline std::vector<std::string> daemon_flags(const std::filesystem::path& data,
                                             const std::filesystem::path& hot,
                                             std::vector<std::string> extra = {}) {
  std::vector<std::string> flags{"--data-dir", data.string(), "--hot-dir", hot.string(),
                                 "--log-level", "info"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  return flags;
}

/// How a weightd process ended.
struct daemon_exit {
  bool exited = false;    // exited by itself (not killed by a signal)
  int exit_code = -1;     // when exited
  int signal = 0;         // when killed by a signal
  bool timed_out = false; // still running at the deadline (then SIGKILLed)
};

inline daemon_exit to_daemon_exit(int wstatus) {
  daemon_exit e;
  if (WIFEXITED(wstatus)) {
    e.exited = true;
    e.exit_code = WEXITSTATUS(wstatus);
  } else if (WIFSIGNALED(wstatus)) {
    e.signal = WTERMSIG(wstatus);
  }
  return e;
}

/// Starts weightd with `flags` (plus --listen/--http-listen), stdout and
/// stderr into `log`.
inline pid_t spawn_weightd(std::vector<std::string> flags, const std::string& address,
                           const std::string& http, const std::filesystem::path& log) {
  flags.insert(flags.end(), {"--listen", address, "--http-listen", http});
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    std::vector<char*> argv{const_cast<char*>(WEIGHTD_DAEMON)};
    for (auto& f : flags) argv.push_back(f.data());
    argv.push_back(nullptr);
    execv(WEIGHTD_DAEMON, argv.data());
    _exit(127);
  }
  return pid;
}

/// A weightd started with any flags; reachable through ctl() and healthz(),
/// its log in log(), stopped with SIGTERM.
class fault_daemon {
 public:
  fault_daemon(std::vector<std::string> flags, const std::filesystem::path& log)
      : log_(log) {
    address_ = "127.0.0.1:" + std::to_string(api::free_loopback_port());
    http_port_ = api::free_loopback_port();
    pid_ = spawn_weightd(std::move(flags), address_, "127.0.0.1:" + std::to_string(http_port_),
                         log_);
    for (int i = 0; i < 200; ++i) {
      if (ctl("status").exit_code == 0) {
        serving_ = true;
        break;
      }
      int wstatus = 0;
      if (waitpid(pid_, &wstatus, WNOHANG) == pid_) {  // it gave up
        exit_ = to_daemon_exit(wstatus);
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
  }
  fault_daemon(const fault_daemon&) = delete;
  fault_daemon& operator=(const fault_daemon&) = delete;
  ~fault_daemon() { stop(); }

  bool serving() const { return serving_; }
  const std::string& address() const { return address_; }

  run_result ctl(const std::string& args) const {
    return run_command(std::string{WEIGHTD_WEIGHTCTL} + " --address " + address_ + " " + args);
  }

  /// GET /healthz: status and body (status -1 when it does not answer).
  std::pair<int, std::string> healthz() const {
    httplib::Client http("127.0.0.1", http_port_);
    http.set_connection_timeout(2);
    http.set_read_timeout(5);
    auto res = http.Get("/healthz");
    if (!res) return {-1, ""};
    return {res->status, res->body};
  }

  /// SIGTERM, then how it ended (SIGKILL after 20 s).
  daemon_exit stop() {
    if (pid_ <= 0) return exit_;
    kill(pid_, SIGTERM);
    int wstatus = 0;
    for (int i = 0; i < 2000; ++i) {
      if (waitpid(pid_, &wstatus, WNOHANG) == pid_) {
        exit_ = to_daemon_exit(wstatus);
        pid_ = -1;
        return exit_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, &wstatus, 0);
    pid_ = -1;
    exit_ = to_daemon_exit(wstatus);
    exit_.timed_out = true;
    return exit_;
  }

  std::string log() const { return read_file(log_); }

 private:
  std::filesystem::path log_;
  std::string address_;
  int http_port_ = 0;
  pid_t pid_ = -1;
  bool serving_ = false;
  daemon_exit exit_;
};

/// Runs weightd with `flags` until it exits by itself; one that still runs
/// after `seconds` (it started serving) is stopped with SIGTERM and reported
/// as timed_out. `log` receives its output.
inline daemon_exit run_weightd_to_exit(std::vector<std::string> flags,
                                       const std::filesystem::path& log, int seconds = 5) {
  auto address = "127.0.0.1:" + std::to_string(api::free_loopback_port());
  auto http = "127.0.0.1:" + std::to_string(api::free_loopback_port());
  pid_t pid = spawn_weightd(std::move(flags), address, http, log);
  int wstatus = 0;
  for (int i = 0; i < seconds * 100; ++i) {
    if (waitpid(pid, &wstatus, WNOHANG) == pid) return to_daemon_exit(wstatus);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGTERM);
  waitpid(pid, &wstatus, 0);
  auto e = to_daemon_exit(wstatus);
  e.timed_out = true;
  return e;
}

/// `weightctl --journal-dir DIR ARGS` (offline).
inline run_result offline_ctl(const std::filesystem::path& journal, const std::string& args) {
  return run_command(std::string{WEIGHTD_WEIGHTCTL} + " --journal-dir " + journal.string() + " " +
                     args);
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace weightd::test
