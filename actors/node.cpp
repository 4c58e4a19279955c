#include "actors/node.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <optional>

#include "actors/journal_writer.hpp"
#include "core/lease_decide.hpp"
#include "events/evolve.hpp"
#include "events/revision_fold.hpp"
#include "persistence/replay.hpp"

namespace weightd::actors {

namespace {
std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}
}  // namespace

result<std::unique_ptr<node>> node::start(caf::actor_system& sys, node_config config,
                                          std::shared_ptr<persistence::journal_backend> backend) {
  auto began = std::chrono::steady_clock::now();
  std::unique_ptr<node> n{new node};
  n->sys_ = &sys;
  if (!config.objects.now_ms)
    config.objects.now_ms = [] {
      return std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
          .count();
    };
  for (const auto& dir : {config.hot.dir, config.cold.dir}) {
    auto lock = persistence::directory_lock::take(dir);
    if (!lock) return lock.error();
    n->locks_.push_back(std::move(*lock));
  }
  if (!backend) {
    auto lock = persistence::directory_lock::take(config.journal.dir);
    if (!lock) return lock.error();
    n->locks_.push_back(std::move(*lock));
    auto opened = persistence::lmdb_journal::open(config.journal);
    if (!opened) return opened.error();
    backend = std::move(*opened);
  }
  n->backend_ = backend;
  n->writer_id_ = backend->writer_id();

  // 1. Rebuild the state: the newest snapshot plus the fold of the tail,
  //    checking the invariants of every revision an event touches.
  persistence::fold_options fold;
  fold.after_each = [](const events::store_state& s, const events::v1::Envelope& e) {
    return events::check_touched(s, e);
  };
  auto folded = persistence::fold_journal(*backend, fold);
  if (!folded)
    return status{folded.error().code(),
                  folded.error().message() + "; keep a copy of the journal and run "
                                             "`weightctl journal verify`"};
  auto recovered = std::move(*folded);
  for (const auto& [id, r] : recovered.revisions.revisions)
    if (auto st = events::check_invariants(r, recovered.revisions); !st.ok()) return st;

  // 2. Record this incarnation, extend the leases that were live at the
  //    crash by the recovery grace, then check the tiers against the index.
  tiers files{std::make_shared<persistence::tier_store>(config.hot),
              std::make_shared<persistence::tier_store>(config.cold)};
  for (const auto* tier : {files.hot.get(), files.cold.get()})
    if (auto st = tier->init(); !st.ok()) return st;
  auto now = config.objects.now_ms();
  std::vector<events::v1::Envelope> startup;
  events::v1::Envelope started;
  started.set_stream(events::kSystemStream);
  started.set_timestamp_ms(now);
  started.mutable_writer_started()->set_writer_id(backend->writer_id());
  started.mutable_writer_started()->set_version(config.version);
  started.mutable_writer_started()->set_hostname(host_name());
  startup.push_back(std::move(started));
  for (auto& e : cold_adoptions(recovered.objects, files, now, n->report_))
    startup.push_back(std::move(e));
  for (auto& e : replica_corrections(recovered.objects, files,
                                     config.verify_checksums_on_start, now, n->report_))
    startup.push_back(std::move(e));
  // The grace counts from the end of the tier check (it reads every replica
  // and can take longer than the grace): a holder gets the whole grace to
  // renew once the daemon serves.
  auto serving = config.objects.now_ms();
  for (auto& e : recovery_lease_events(recovered.revisions, recovered.last_event_ms,
                                       serving, config.lease_recovery_grace_ms))
    startup.push_back(std::move(e));
  if (auto st = backend->append(startup); !st.ok()) return st;
  for (const auto& e : startup)
    if (auto st = events::evolve(recovered, e); !st.ok()) return st;
  remove_orphan_files(recovered.objects, files, n->report_);
  n->report_.applied_seq = recovered.applied_seq;
  n->report_.revisions = recovered.revisions.revisions.size();
  n->report_.objects = recovered.objects.objects.size();
  n->report_.hot_bytes = recovered.objects.hot_bytes;
  n->report_.cold_bytes = recovered.objects.cold_bytes;

  // 3. Spawn the actors on the recovered state.
  n->detached_ = config.detached;
  n->snapshotter_ = spawn_snapshotter(sys, backend, config.detached);
  journal_writer_options writer;
  writer.detached = config.detached;
  writer.snapshotter = n->snapshotter_;
  writer.snapshot_every = config.snapshot_every;
  n->journal_ = spawn_journal_writer(sys, backend, writer);
  for (size_t i = 0; i < std::max<size_t>(1, config.io_workers); ++i)
    n->io_.push_back(spawn_io_worker(sys, files, config.detached));
  auto damaged = damaged_groups_of(recovered.objects, startup);
  n->objects_ = spawn_object_store(
      sys, config.objects,
      object_store_deps{n->journal_, n->io_, files, std::move(recovered.objects), std::move(damaged)});
  if (config.scrub.rate_bytes > 0)
    n->scrubber_ = spawn_scrubber(sys, n->objects_, files, config.scrub, config.detached);
  revision_deps deps;
  deps.journal = n->journal_;
  deps.store = n->objects_;
  deps.operation_ids =
      std::make_shared<std::atomic<uint64_t>>(recovered.revisions.last_operation_id);
  deps.lease_ids = std::make_shared<std::atomic<uint64_t>>(recovered.revisions.last_lease_id);
  deps.now_ms = config.objects.now_ms;
  deps.reconcile_interval = config.reconciler.interval;
  deps.import_abandon = config.reconciler.import_abandon;
  deps.migration = config.migration;
  deps.default_policy = config.default_policy;
  deps.gate = n->gate_;
  auto reconciler = config.reconciler;
  reconciler.high_watermark = config.objects.high_watermark;  // one pair of watermarks
  reconciler.eviction_ratio = config.objects.eviction_ratio;
  n->registry_ = spawn_registry(sys, std::move(recovered.revisions), deps, reconciler,
                                std::move(recovered.lineages));
  n->reader_ = spawn_journal_reader(sys, backend, n->journal_, config.reader, config.detached);
  std::vector<std::pair<std::string, caf::actor>> core{
      {"the journal writer", caf::actor_cast<caf::actor>(n->journal_)},
      {"the snapshotter", caf::actor_cast<caf::actor>(n->snapshotter_)},
      {"the object store", caf::actor_cast<caf::actor>(n->objects_)},
      {"the registry", caf::actor_cast<caf::actor>(n->registry_)},
      {"the journal reader", caf::actor_cast<caf::actor>(n->reader_)}};
  for (size_t i = 0; i < n->io_.size(); ++i)
    core.push_back({"I/O worker " + std::to_string(i), caf::actor_cast<caf::actor>(n->io_[i])});
  if (n->scrubber_) core.push_back({"the scrubber", caf::actor_cast<caf::actor>(n->scrubber_)});
  n->watchdog_ = spawn_watchdog(sys, std::move(core), n->health_, config.on_failure);
  // Replay read the whole journal through LMDB's map: those pages are the
  // OS's cache now, not this daemon's memory.
  backend->release_read_cache();
  n->startup_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  return n;
}

void node::stop() {
  if (!sys_) return;
  // Close the gate, then let what runs reach its next durable point
  // (stop_gate.hpp). On the test scheduler nothing runs unless the test
  // runs it: there is nothing to wait for.
  gate_->close();
  if (detached_ && !gate_->wait_idle(kStopWait))
    spdlog::warn("node stop: {} command(s) still running after {} s; stopping them where they "
                 "are (the journal has what they committed, a restart resumes the rest)",
                 gate_->inside(), kStopWait.count());
  health_->stopping = true;  // the exits below are no failure
  // In the order they must go: nothing new reaches the store and the
  // journal once the registry, the scrubber and the reader have gone.
  // A start that failed half-way has spawned only some of them.
  std::vector<caf::actor> core;
  auto add = [&](const auto& handle) {
    if (handle) core.push_back(caf::actor_cast<caf::actor>(handle));
  };
  add(registry_);
  add(scrubber_);
  add(reader_);
  add(objects_);
  for (auto& io : io_) add(io);
  add(journal_);
  add(snapshotter_);
  std::optional<caf::scoped_actor> waiter;
  if (detached_) {
    waiter.emplace(*sys_);
    for (auto& a : core) (*waiter)->monitor(a);
  }
  if (watchdog_) caf::anon_send_exit(watchdog_, caf::exit_reason::user_shutdown);
  for (auto& a : core) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  if (waiter) {
    auto deadline = std::chrono::steady_clock::now() + kStopWait;
    for (size_t ended = 0; ended < core.size();) {
      auto left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero()) {
        spdlog::warn("node stop: {} of {} core actors still running after {} s", core.size() - ended,
                     core.size(), kStopWait.count());
        break;
      }
      (*waiter)->receive([&](const caf::down_msg&) { ++ended; },
                         caf::after(std::chrono::duration_cast<std::chrono::milliseconds>(left)) >>
                             [] {});
    }
  }
  // The actors that used the journal have ended: let go of it too, so that
  // its LMDB environment closes now (with its last holder), before a next
  // node in this process opens it.
  backend_.reset();
  sys_ = nullptr;
}

node::~node() {
  stop();
  locks_.clear();
}

}  // namespace weightd::actors
