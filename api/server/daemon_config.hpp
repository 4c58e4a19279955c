// The daemon's configuration: flags and an optional config file (CLI11; the
// file uses the flags' long names as keys, TOML/INI syntax, no sections).
//
// The struct's initializers are the one home of every default (SPEC §8); the
// flags' help texts print them from there. Durations are milliseconds and
// sizes are bytes inside the program; on the command line and in the config
// file both take units (SPEC §10): `30s`, `250ms`, `5m`, `64MiB`, `8GiB`.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "api/common/units.hpp"
#include "api/server/stream_limits.hpp"
#include "events/status.hpp"
#include "persistence/journal_backend.hpp"

namespace weightd::api {

struct daemon_config {
  using milliseconds = std::chrono::milliseconds;
  static constexpr uint64_t MiB = 1ull << 20;
  static constexpr uint64_t GiB = 1ull << 30;

  std::string listen = "127.0.0.1:7070";
  std::string http_listen = "127.0.0.1:7071";
  bool http_listen_public = false;  // a non-loopback --http-listen only with this
  // SPEC §9: tokens (CSV token,name,tenant,role; re-read on SIGHUP) and TLS.
  std::string auth_tokens_file;
  std::string tls_cert_file, tls_key_file, tls_client_ca_file;
  // SPEC §11: set, weightd is a standby copying this leader's journal
  // (token file: the leader's admin token; CA: the leader's TLS CA).
  std::string follow;
  std::string follow_token_file, follow_tls_ca_file;
  // A standby's copies of the replicas (SPEC §11 Bytes): objects at once,
  // and bytes per second from the leader (0 = no limit).
  unsigned mirror_parallelism = 4;
  uint64_t mirror_rate_bytes = 0;
  // A leader's acknowledgement (SPEC §11): standbys that must hold a write
  // before it is answered, and how long it waits for them.
  unsigned sync_standbys = 0;
  milliseconds sync_timeout{5'000};
  std::string data_dir = "./var";
  std::string journal_dir;  // default: <data_dir>/journal
  std::string journal_sync = "sync";
  uint64_t journal_initial_map_bytes = 64 * MiB;
  uint64_t journal_max_map_bytes = 1024 * GiB;
  std::string hot_dir;  // default: /dev/shm/weightd-<port of --listen>
  uint64_t hot_capacity_bytes = 1 * GiB;
  std::string cold_dir;  // default: <data_dir>/cold
  uint64_t cold_capacity_bytes = 0;  // 0 = as much as the disk holds
  std::string verify_on_start = "checksum";
  unsigned io_workers = 4;
  uint64_t snapshot_every = 10'000;  // events between whole-state snapshots (0 = never)
  std::string log_level = "info";
  unsigned threads = 0;  // CAF workers; 0 = number of cores

  // Reconciler: a bounded round every interval; IMPORTING revisions idle this
  // long are aborted; an AUTO revision waits the cooldown after its last migration.
  milliseconds reconcile_interval{1'000};
  uint32_t reconcile_max_actions = 64;
  milliseconds import_abandon{5 * 60'000};
  milliseconds auto_cooldown{30'000};
  // One migration round moves at most this many members and bytes.
  uint32_t migration_round_members = 64;
  uint64_t migration_round_bytes = 1 * GiB;
  uint64_t migration_rate_bytes = 0;  // bytes per second one migration copies (0 = no limit)
  // HOT pressure above the high watermark; eviction goes down to high − ratio,
  // promotion only under high − 2 × ratio (so the two never oscillate).
  double high_watermark = 0.90;
  double eviction_ratio = 0.05;
  uint64_t scrub_rate_bytes = 64 * MiB;  // bytes re-checked per second (0 = no scrub)
  milliseconds object_read_lease{10'000};     // a Get protects the object this long
  milliseconds lease_recovery_grace{10'000};  // leases live at a crash last at least this long

  // Limits per client (SPEC §9): open object streams in all and per
  // connection, a Put silent this long is ended, and one tenant's puts in
  // flight reserve at most this fraction of a tier (one put alone always may).
  // Their defaults are stream_limit_options' own (one place each).
  uint32_t max_streams = stream_limit_options{}.max_streams;
  uint32_t max_streams_per_connection = stream_limit_options{}.max_streams_per_connection;
  uint32_t max_puts_per_tenant = stream_limit_options{}.max_puts_per_tenant;
  uint64_t get_buffer_bytes = stream_limit_options{}.get_buffer_bytes;  // Get chunks in flight
  milliseconds put_idle_timeout = stream_limit_options{}.put_idle_timeout;
  milliseconds watch_stall_timeout = stream_limit_options{}.watch_stall_timeout;
  double tenant_reserve_ratio = 0.5;
  bool local_reads = true;  // OpenLocal: same-host readers map the tier files (SPEC §4)

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

/// weightd's exit code for every configuration error: a bad flag or value, a
/// bad combination, an unknown config key or section, an unreadable config
/// file (EX_USAGE of sysexits.h; 70, EX_SOFTWARE, is a core actor stopping).
constexpr int kConfigErrorExit = 64;

/// Declares every flag on `app` (and --config for a file of them, and
/// --version printing "weightd <version>" when `version` is not empty). After
/// a parse, `config` holds the values, already checked with validate(): a bad
/// value or combination fails the parse with an error naming the flag, and so
/// does an unknown key or section in the config file.
void add_daemon_options(CLI::App& app, daemon_config& config, const std::string& version = "");

/// Parses weightd's command line (and its config file) into the options
/// add_daemon_options declared. std::nullopt: start the daemon. Otherwise
/// the process's exit code: 0 after --help or --version (printed on `out`),
/// kConfigErrorExit after any configuration error, printed on `err` as one
/// line "weightd: <what is wrong, naming the flag or key>".
std::optional<int> parse_daemon_command_line(CLI::App& app, int argc, const char* const* argv,
                                             std::ostream& out, std::ostream& err);

/// The checks that involve more than one flag (each flag's own range is
/// checked as it is parsed). "" when the combination is fine, else what is
/// wrong, naming the flags.
std::string validate(const daemon_config& config);

}  // namespace weightd::api
