// The embedding facade: what a host master constructs to run weightd inside
// its own process. It opens the journal, rebuilds the state from it, checks
// the tiers' files, and spawns the actors; the host then talks to the typed
// actor handles (actors.hpp) or through the daemon's gRPC API.
#pragma once

#include <memory>

#include "actors/journal_reader.hpp"
#include "actors/object_recovery.hpp"
#include "actors/object_store/object_store.hpp"
#include "actors/registry.hpp"
#include "actors/scrubber.hpp"
#include "actors/stop_gate.hpp"
#include "actors/watchdog.hpp"
#include "events/state.hpp"
#include "persistence/directory_lock.hpp"
#include "persistence/journal_backend.hpp"
#include "persistence/lmdb_journal.hpp"

namespace weightd::actors {

struct node_config {
  persistence::lmdb_options journal;  // ignored when a backend is handed in
  persistence::tier_options hot{events::v1::TIER_HOT, "/dev/shm/weightd-7070", 1ull << 30};
  persistence::tier_options cold{events::v1::TIER_COLD, "./var/cold", 0, true};
  object_store_config objects;
  events::policy default_policy;  // HOT, AUTO, mixed ratio 0.5 (SPEC §3)
  size_t io_workers = 4;
  uint64_t snapshot_every = 10'000;       // events between state snapshots (0 = never)
  bool detached = true;                 // journal writer and I/O workers on own threads
  bool verify_checksums_on_start = true;  // else sizes only
  std::string version = "dev";          // recorded in the writer_started event
  int64_t lease_recovery_grace_ms = 10'000;  // leases live at a crash last at least this long
  // Reconciler rounds: interval, actions per round, AUTO cooldown. Its
  // watermarks are the object store's (objects.high_watermark, .eviction_ratio).
  reconciler_config reconciler;
  migration_limits migration;  // one operation round: 64 members, 1 GiB
  scrubber_config scrub;        // rate 0 = no scrub
  journal_reader_config reader;  // History and Watch
  // Called (on a CAF thread) when a core actor stopped while the node runs
  // (watchdog.hpp); weightd exits non-zero then. Unset: only logged.
  std::function<void(const std::string&)> on_failure;
};

class node {
 public:
  /// Starts weightd on `sys`. `backend` overrides the LMDB journal (tests).
  static result<std::unique_ptr<node>> start(
      caf::actor_system& sys, node_config config,
      std::shared_ptr<persistence::journal_backend> backend = nullptr);
  ~node();
  node(const node&) = delete;
  node& operator=(const node&) = delete;

  journal_actor journal() const { return journal_; }
  object_store_actor objects() const { return objects_; }
  registry_actor registry() const { return registry_; }
  snapshotter_actor snapshotter() const { return snapshotter_; }
  scrubber_actor scrubber() const { return scrubber_; }  // null when the scrub is off
  journal_reader_actor reader() const { return reader_; }
  watchdog_actor watchdog() const { return watchdog_; }
  /// Whether every core actor runs (watchdog.hpp).
  const node_health& health() const { return *health_; }
  /// The journal; null once stop() returned (it let go of it).
  std::shared_ptr<persistence::journal_backend> backend() const { return backend_; }
  /// The journal writer's id (the writer_started event's), also after stop().
  uint64_t writer_id() const { return writer_id_; }
  /// node::stop's gate (stop_gate.hpp); closing it by hand refuses commands.
  stop_gate& gate() { return *gate_; }
  /// What startup found and corrected (the recovered state itself is handed
  /// to the actors and not kept: at 100 000 revisions it is hundreds of MB).
  const recovery_report& recovery() const { return report_; }
  /// How long start() took: replay, the tier check, spawning (a restart's cost).
  double startup_seconds() const { return startup_seconds_; }
  /// Stops the node in three steps. 1. Closes the gate: new commands are
  /// refused (BUSY: weightd is stopping), automatic work starts nothing.
  /// 2. On real threads (config.detached), waits until the commands that
  /// run have reached their next durable point (bounded by kStopWait).
  /// 3. Stops the actors and, on real threads, returns only once every core
  /// actor has ended (bounded by kStopWait) and the node let go of the
  /// journal: the writer has made its last append, so a node started next
  /// in this process never races a late append of this one. On the test
  /// scheduler it only sends the exits (the test runs them).
  void stop();
  static constexpr std::chrono::seconds kStopWait{10};

 private:
  node() = default;
  caf::actor_system* sys_ = nullptr;
  bool detached_ = true;  // config.detached: real threads, stop() may wait
  std::shared_ptr<persistence::journal_backend> backend_;
  journal_actor journal_;
  std::vector<io_actor> io_;
  object_store_actor objects_;
  registry_actor registry_;
  snapshotter_actor snapshotter_;
  scrubber_actor scrubber_;
  journal_reader_actor reader_;
  watchdog_actor watchdog_;
  std::shared_ptr<node_health> health_ = std::make_shared<node_health>();
  std::shared_ptr<stop_gate> gate_ = std::make_shared<stop_gate>();
  uint64_t writer_id_ = 0;
  std::vector<persistence::directory_lock> locks_;  // the directories this node owns
  recovery_report report_;
  double startup_seconds_ = 0;
};

}  // namespace weightd::actors
