#include "api/daemon_config.hpp"

namespace weightd::api {

void add_daemon_options(CLI::App& app, daemon_config& c) {
  app.set_config("--config", "", "Read flags from this file (keys are the long flag names)");
  app.add_option("--listen", c.listen, "gRPC address (loopback only in this build)")
      ->capture_default_str();
  app.add_option("--http-listen", c.http_listen, "HTTP address of /metrics and /healthz")
      ->capture_default_str();
  app.add_option("--data-dir", c.data_dir, "Directory for the journal and the COLD tier")
      ->capture_default_str();
  app.add_option("--journal-dir", c.journal_dir,
                 "Journal directory (default: <data-dir>/journal)");
  app.add_option("--journal-sync", c.journal_sync,
                 "sync: every acknowledged change is on disk (default); nosync: faster, a "
                 "machine crash may lose the last changes (benchmarks and tests only)")
      ->check(CLI::IsMember({"sync", "nosync"}))
      ->capture_default_str();
  app.add_option("--journal-initial-map-bytes", c.journal_initial_map_bytes,
                 "Initial size of the journal's memory map; it doubles when full")
      ->capture_default_str();
  app.add_option("--journal-max-map-bytes", c.journal_max_map_bytes,
                 "Largest size the journal may grow to")
      ->capture_default_str();
  app.add_option("--hot-dir", c.hot_dir,
                 "HOT (memory) tier directory, on tmpfs: bytes survive a daemon restart, not a "
                 "reboot (default: /dev/shm/weightd-<port>)");
  app.add_option("--hot-capacity-bytes", c.hot_capacity_bytes,
                 "Bytes the HOT tier may hold; eviction keeps it below the high watermark")
      ->capture_default_str();
  app.add_option("--cold-dir", c.cold_dir, "COLD (disk) tier directory (default: <data-dir>/cold)");
  app.add_option("--cold-capacity-bytes", c.cold_capacity_bytes,
                 "Bytes the COLD tier may hold (0 = as much as the disk holds)")
      ->capture_default_str();
  app.add_option("--verify-on-start", c.verify_on_start,
                 "At startup, check every replica's size and checksum (checksum) or only its "
                 "size (size: faster for large COLD tiers)")
      ->check(CLI::IsMember({"checksum", "size"}))
      ->capture_default_str();
  app.add_option("--io-workers", c.io_workers, "Threads for blocking file work (fsync, copies)")
      ->check(CLI::Range(1u, 64u))
      ->capture_default_str();
  app.add_option("--snapshot-every", c.snapshot_every,
                 "Events between whole-state snapshots, which bound recovery time (0 = never)")
      ->capture_default_str();
  app.add_option("--lease-recovery-grace-ms", c.lease_recovery_grace_ms,
                 "After a restart, every lease live at the crash lasts at least this long, so "
                 "its holder can renew it")
      ->check(CLI::Range(uint64_t{0}, uint64_t{86'400'000}))
      ->capture_default_str();
  app.add_option("--reconcile-interval-ms", c.reconcile_interval_ms,
                 "Between reconciler rounds (lease expiry, drains, unfinished deletions)")
      ->check(CLI::Range(uint64_t{10}, uint64_t{60'000}))
      ->capture_default_str();
  app.add_option("--log-level", c.log_level, "trace, debug, info, warn, error or off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();
  app.add_option("--threads", c.threads, "Actor worker threads (0 = number of cores)")
      ->capture_default_str();
}

}  // namespace weightd::api
