// The weightd under test: a child process on free loopback ports, with its
// data directory and HOT tier given by the harness, that can be SIGKILLed
// and started again on the same directories. Its log goes to a file per
// incarnation (weightd-<n>.log in the work directory).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include "events/status.hpp"

namespace weightd::kill9 {

namespace fs = std::filesystem;

struct store_dirs {
  fs::path data;  // the journal (data/journal) and the COLD tier (data/cold)
  fs::path hot;   // the HOT tier
  fs::path logs;
  fs::path journal() const { return data / "journal"; }
  fs::path cold() const { return data / "cold"; }
};

class daemon_process {
 public:
  daemon_process(std::string weightd_path, store_dirs dirs, std::vector<std::string> flags);
  daemon_process(const daemon_process&) = delete;
  daemon_process& operator=(const daemon_process&) = delete;
  ~daemon_process();

  /// Starts it on new free ports and waits (up to a minute) until it answers
  /// Status; an error if it exits or never answers, with its log's tail.
  status start();

  /// kill -9: no shutdown of any kind. An error when it had already died by
  /// itself (a crash under load is the worst finding of all).
  status kill_hard();

  /// SIGTERM and the exit code (-1 when it died of a signal or was not running).
  int stop();

  bool running() const { return pid_ > 0; }
  const std::string& address() const { return address_; }
  int incarnation() const { return incarnation_; }
  /// The log of the current (or last) incarnation.
  fs::path log_path() const;
  /// The last `lines` lines of that log.
  std::string log_tail(size_t lines = 15) const;
  /// orphan_files_removed from the "weightd ready" line (-1 when absent).
  long orphan_files_removed_at_start() const;

 private:
  std::string weightd_;
  store_dirs dirs_;
  std::vector<std::string> flags_;
  pid_t pid_ = -1;
  int incarnation_ = 0;
  std::string address_;
};

}  // namespace weightd::kill9
