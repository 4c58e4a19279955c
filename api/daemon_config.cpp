#include "api/daemon_config.hpp"

namespace weightd::api {

void add_daemon_options(CLI::App& app, daemon_config& c) {
  app.set_config("--config", "", "Read flags from this file (keys are the long flag names)");
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
  app.add_option("--log-level", c.log_level, "trace, debug, info, warn, error or off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();
  app.add_option("--threads", c.threads, "Actor worker threads (0 = number of cores)")
      ->capture_default_str();
}

}  // namespace weightd::api
