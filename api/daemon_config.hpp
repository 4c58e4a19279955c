// The daemon's configuration: flags and an optional config file (CLI11; the
// file uses the flags' long names as keys, TOML/INI syntax). Defaults are
// SPEC §8's.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "persistence/journal_backend.hpp"

namespace weightd::api {

struct daemon_config {
  std::string listen = "127.0.0.1:7070";
  std::string http_listen = "127.0.0.1:7071";
  std::string data_dir = "./var";
  std::string journal_dir;  // default: <data_dir>/journal
  std::string journal_sync = "sync";
  uint64_t journal_initial_map_bytes = 64ull << 20;
  uint64_t journal_max_map_bytes = 1ull << 40;
  std::string hot_dir;  // default: /dev/shm/weightd-<port of --listen>
  uint64_t hot_capacity_bytes = 1ull << 30;
  std::string cold_dir;  // default: <data_dir>/cold
  uint64_t cold_capacity_bytes = 0;
  std::string verify_on_start = "checksum";
  unsigned io_workers = 4;
  uint64_t snapshot_every = 10'000;
  uint64_t lease_recovery_grace_ms = 10'000;
  uint64_t reconcile_interval_ms = 1'000;
  std::string log_level = "info";
  unsigned threads = 0;  // CAF workers; 0 = number of cores

  std::string journal_path() const {
    return journal_dir.empty() ? data_dir + "/journal" : journal_dir;
  }
  std::string cold_path() const { return cold_dir.empty() ? data_dir + "/cold" : cold_dir; }
  std::string hot_path() const {
    if (!hot_dir.empty()) return hot_dir;
    return "/dev/shm/weightd-" + listen.substr(listen.rfind(':') + 1);
  }
  persistence::durability durability() const {
    return journal_sync == "nosync" ? persistence::durability::nosync
                                    : persistence::durability::sync;
  }
};

/// Declares every flag on `app` (and --config for a file of them).
void add_daemon_options(CLI::App& app, daemon_config& config);

}  // namespace weightd::api
