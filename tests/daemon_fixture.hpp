// The real weightd binary on free loopback ports, for end-to-end tests:
// started in a data directory, reachable through ctl(), stopped with SIGTERM.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "api/common/loopback.hpp"
#include "support.hpp"

namespace weightd::test {

struct running_daemon {
  pid_t pid = -1;
  std::string address;

  /// Starts weightd with its data (and HOT tier, in hot/) under `dir` and
  /// waits until it answers `weightctl status`.
  explicit running_daemon(const std::filesystem::path& dir,
                          const std::string& hot_capacity = "1073741824",
                          const std::string& cold_capacity = "0") {
    address = "127.0.0.1:" + std::to_string(api::free_loopback_port());
    auto http = "127.0.0.1:" + std::to_string(api::free_loopback_port());
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      auto data = dir.string(), hot = (dir / "hot").string();
      execl(WEIGHTD_DAEMON, WEIGHTD_DAEMON, "--data-dir", data.c_str(), "--hot-dir", hot.c_str(),
            "--listen", address.c_str(), "--http-listen", http.c_str(),
            "--hot-capacity-bytes", hot_capacity.c_str(), "--cold-capacity-bytes",
            cold_capacity.c_str(), "--log-level", "warn",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 200 && ctl("status").exit_code != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  running_daemon(const running_daemon&) = delete;
  running_daemon& operator=(const running_daemon&) = delete;

  /// SIGTERM, then the daemon's exit code.
  int stop() {
    if (pid <= 0) return -1;
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  ~running_daemon() { stop(); }

  /// Runs weightctl against this daemon.
  run_result ctl(const std::string& args) {
    return run_command(std::string{WEIGHTD_WEIGHTCTL} + " --address " + address + " " + args);
  }
};

}  // namespace weightd::test
