// The real weightd binary on free loopback ports, for end-to-end tests:
// started in a data directory, reachable through ctl(), stopped with SIGTERM.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "api/client/client.hpp"
#include "api/common/loopback.hpp"
#include "support.hpp"

namespace weightd::test {

/// How a test starts weightd beyond its data directory.
struct daemon_options {
  std::vector<std::string> flags;  // more weightd flags (after the defaults: they win)
  std::vector<std::string> env;    // NAME=value added to weightd's environment
  std::filesystem::path log_file;  // weightd's stdout and stderr (default: the test's own)
  std::string log_level = "warn";
  bool wait = true;                // return once it answers `weightctl status`
  std::string listen;              // gRPC host:port ("" = a free loopback port)
  std::string ctl_flags;           // weightctl flags for every ctl() (a token, TLS files)
};

struct running_daemon {
  pid_t pid = -1;
  std::string address;       // gRPC, host:port
  std::string http_address;  // /metrics and /healthz, host:port
  std::filesystem::path log_file;
  double stop_seconds = 0;   // how long the last stop() took
  std::string ctl_flags;     // given to every ctl()

  /// Starts weightd with its data (and HOT tier, in hot/) under `dir`, with
  /// the given capacities in bytes, and waits until it answers.
  explicit running_daemon(const std::filesystem::path& dir,
                          const std::string& hot_capacity = "1073741824",
                          const std::string& cold_capacity = "0")
      : running_daemon(dir, with_capacities(hot_capacity, cold_capacity)) {}

  running_daemon(const std::filesystem::path& dir, daemon_options o)
      : log_file(o.log_file), ctl_flags(o.ctl_flags) {
    address = o.listen.empty() ? "127.0.0.1:" + std::to_string(api::free_loopback_port())
                               : o.listen;
    http_address = "127.0.0.1:" + std::to_string(api::free_loopback_port());
    std::vector<std::string> args{WEIGHTD_DAEMON, "--data-dir",    dir.string(),
                                  "--hot-dir",    (dir / "hot").string(),
                                  "--listen",     address,        "--http-listen",
                                  http_address,   "--log-level",  o.log_level};
    args.insert(args.end(), o.flags.begin(), o.flags.end());
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      for (auto& e : o.env) putenv(e.data());
      if (!o.log_file.empty()) {
        int fd = ::open(o.log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0) _exit(126);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
      }
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(WEIGHTD_DAEMON, argv.data());
      _exit(127);
    }
    if (o.wait) serving();
  }
  static daemon_options with_capacities(const std::string& hot, const std::string& cold) {
    daemon_options o;
    o.flags = {"--hot-capacity-bytes", hot, "--cold-capacity-bytes", cold};
    return o;
  }
  running_daemon(const running_daemon&) = delete;
  running_daemon& operator=(const running_daemon&) = delete;
  ~running_daemon() { stop(); }

  /// Waits (up to 10 s) until it answers `weightctl status`.
  bool serving() const {
    for (int i = 0; i < 400; ++i) {
      if (ctl("status").exit_code == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return false;
  }

  /// SIGTERM, then the daemon's exit code (-1: killed after 10 s, or a signal);
  /// stop_seconds says how long it took.
  int stop() {
    if (pid <= 0) return -1;
    auto start = std::chrono::steady_clock::now();
    kill(pid, SIGTERM);
    int status = 0;
    bool exited = false;
    for (int i = 0; i < 1000 && !exited; ++i) {
      exited = waitpid(pid, &status, WNOHANG) == pid;
      if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!exited) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
    stop_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    pid = -1;
    return exited && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  /// A C++ client's options for this daemon.
  api::client_options client_options() const {
    api::client_options o;
    o.address = address;
    return o;
  }

  /// Runs weightctl against this daemon.
  run_result ctl(const std::string& args) const {
    return run_command(std::string{WEIGHTD_WEIGHTCTL} + " --address " + address + " " +
                       (ctl_flags.empty() ? "" : ctl_flags + " ") + args);
  }
};

}  // namespace weightd::test
