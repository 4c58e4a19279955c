// journal_bench: what durability costs and what group commit buys back.
// Prints figures; asserts nothing (machines are noisy). Targets from the
// foundation issue: with 64 appenders b/a >= 50 and b/c >= 0.7; replay >= 0.5x
// of a raw cursor scan + protobuf decode.
//
//   (a) one LMDB transaction (two fsyncs) per event
//   (b) the journal-writer actor with N concurrent appenders (group commit)
//   (c) raw lmdb_journal appends in batches of the size (b) produced
//   replay: fold_journal() of 1M events vs. a raw cursor scan + decode
#include <CLI/CLI.hpp>
#include <lmdb.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>

#include "actors/errors.hpp"
#include "actors/journal_writer.hpp"
#include "persistence/lmdb_journal.hpp"
#include "persistence/replay.hpp"

using namespace weightd;
using clock_type = std::chrono::steady_clock;

namespace {

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

events::v1::Envelope object_event(uint64_t i) {
  // A realistic mix: put, copy to cold, drop hot, remove — 4 events per key.
  events::v1::Envelope e;
  auto key = "model/layer." + std::to_string(i / 4) + ".weight";
  e.set_stream("object|default/" + key);
  e.set_timestamp_ms(1796208000000 + static_cast<int64_t>(i));
  switch (i % 4) {
    case 0: {
      auto* p = e.mutable_object_put();
      p->set_tenant("default");
      p->set_key(key);
      p->set_data_type(events::v1::DATA_TYPE_WEIGHT);
      p->set_group_id("weight:0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab");
      p->set_size(64ull << 20);
      p->set_checksum("89abcdef01234567");
      p->set_tier(events::v1::TIER_HOT);
      break;
    }
    case 1: {
      auto* p = e.mutable_replica_added();
      p->set_tenant("default");
      p->set_key(key);
      p->set_tier(events::v1::TIER_COLD);
      break;
    }
    case 2: {
      auto* p = e.mutable_replica_dropped();
      p->set_tenant("default");
      p->set_key(key);
      p->set_tier(events::v1::TIER_HOT);
      break;
    }
    default: {
      auto* p = e.mutable_object_removed();
      p->set_tenant("default");
      p->set_key(key);
      break;
    }
  }
  return e;
}

std::unique_ptr<persistence::lmdb_journal> fresh_journal(const std::filesystem::path& dir,
                                                         persistence::durability mode) {
  std::filesystem::remove_all(dir);
  persistence::lmdb_options o;
  o.dir = dir;
  o.mode = mode;
  auto j = persistence::lmdb_journal::open(o);
  if (!j) {
    std::fprintf(stderr, "%s\n", j.error().to_string().c_str());
    std::exit(1);
  }
  return std::move(*j);
}

/// (a) and (c): direct appends of `batch` events per transaction. The events
/// are those (b) appends with `appenders` appenders, interleaved the way the
/// writer sees them (one event of each appender in turn), so both write the
/// same streams in the same order.
double direct_rate(const std::filesystem::path& dir, uint64_t appenders, uint64_t per_appender,
                   uint64_t batch) {
  auto j = fresh_journal(dir, persistence::durability::sync);
  std::vector<events::v1::Envelope> all;
  for (uint64_t round = 0; round < per_appender; ++round)
    for (uint64_t a = 0; a < appenders; ++a) all.push_back(object_event(a * per_appender + round));
  auto start = clock_type::now();
  for (size_t i = 0; i < all.size(); i += batch) {
    std::vector<events::v1::Envelope> b(all.begin() + i,
                                        all.begin() + std::min(all.size(), i + batch));
    if (!j->append(b).ok()) std::exit(1);
  }
  return static_cast<double>(all.size()) / seconds_since(start);
}

struct countdown {
  std::mutex m;
  std::condition_variable cv;
  int left;
  void done() {
    std::lock_guard lock(m);
    if (--left == 0) cv.notify_all();
  }
  void wait() {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return left == 0; });
  }
};

caf::behavior appender(caf::event_based_actor* self, actors::journal_actor writer, uint64_t first,
                       uint64_t count, std::shared_ptr<countdown> finished) {
  auto next = std::make_shared<uint64_t>(first);
  self->send(self, caf::tick_atom::value);
  return {[=](caf::tick_atom) {
    if (*next == first + count) {
      finished->done();
      self->quit();
      return;
    }
    actors::event_batch b{{object_event((*next)++)}};
    self->request(writer, std::chrono::seconds(60), actors::append_atom::value, std::move(b))
        .then([=](actors::event_batch&) { self->send(self, caf::tick_atom::value); },
              [=](caf::error& err) {
                std::fprintf(stderr, "append failed: %s\n", caf::to_string(err).c_str());
                std::exit(1);
              });
  }};
}

struct group_result {
  double rate;
  double appends_per_commit;
};

/// (b): N appenders, each waiting for its ack before the next append.
group_result group_commit_rate(caf::actor_system& sys, const std::filesystem::path& dir,
                               int appenders, uint64_t per_appender) {
  std::shared_ptr<persistence::journal_backend> j =
      fresh_journal(dir, persistence::durability::sync);
  auto writer = actors::spawn_journal_writer(sys, j);
  auto finished = std::make_shared<countdown>();
  finished->left = appenders;
  auto start = clock_type::now();
  for (int a = 0; a < appenders; ++a)
    sys.spawn(appender, writer, a * per_appender, per_appender, finished);
  finished->wait();
  double rate = static_cast<double>(appenders * per_appender) / seconds_since(start);
  actors::journal_stats stats;
  caf::scoped_actor self{sys};
  self->request(writer, std::chrono::seconds(10), actors::stats_atom::value)
      .receive([&](actors::journal_stats& s) { stats = s; }, [](caf::error&) {});
  self->send_exit(writer, caf::exit_reason::user_shutdown);
  return {rate, static_cast<double>(stats.appends) / static_cast<double>(std::max<uint64_t>(1, stats.commits))};
}

/// Raw cursor scan + protobuf parse of every event (no checksum, no fold).
double raw_scan_rate(const std::filesystem::path& dir, uint64_t expected) {
  MDB_env* env;
  mdb_env_create(&env);
  mdb_env_set_maxdbs(env, 8);
  mdb_env_open(env, dir.c_str(), MDB_RDONLY | MDB_NOTLS, 0644);
  MDB_txn* txn;
  mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn);
  MDB_dbi dbi;
  mdb_dbi_open(txn, "events", 0, &dbi);
  MDB_cursor* c;
  mdb_cursor_open(txn, dbi, &c);
  MDB_val k, v;
  uint64_t n = 0;
  events::v1::Envelope e;
  auto start = clock_type::now();
  for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
    // skip the 9-byte record header, parse the envelope
    e.ParseFromArray(static_cast<const char*>(v.mv_data) + 9, static_cast<int>(v.mv_size - 9));
    ++n;
  }
  double rate = static_cast<double>(n) / seconds_since(start);
  mdb_cursor_close(c);
  mdb_txn_abort(txn);
  mdb_env_close(env);
  if (n != expected) std::fprintf(stderr, "raw scan saw %lu events, expected %lu\n",
                                  static_cast<unsigned long>(n), static_cast<unsigned long>(expected));
  return rate;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"journal_bench: durability cost, group commit, replay"};
  std::string dir = "./bench-data";
  uint64_t fsync_events = 2000, replay_events = 1000000;
  app.add_option("--dir", dir, "Scratch directory on the disk to measure (removed at the end)")
      ->capture_default_str();
  app.add_option("--fsync-events", fsync_events, "Events per appender-count run")
      ->capture_default_str();
  app.add_option("--replay-events", replay_events, "Events for the replay comparison")
      ->capture_default_str();
  std::string policy = "stealing";
  app.add_option("--scheduler", policy, "CAF scheduler policy: stealing or sharing")
      ->check(CLI::IsMember({"stealing", "sharing"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::filesystem::path base{dir};

  std::printf("journal_bench (LMDB sync mode, dir %s, CAF scheduler %s)\n\n", dir.c_str(),
              policy.c_str());
  double a = direct_rate(base / "a", 1, fsync_events, 1);
  std::printf("(a) one transaction per event:        %10.0f events/s\n\n", a);

  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", static_cast<size_t>(std::thread::hardware_concurrency()));
  cfg.set("scheduler.policy", policy == "sharing" ? caf::atom("sharing") : caf::atom("stealing"));
  actors::add_error_category(cfg);
  caf::actor_system sys{cfg};

  std::printf("%-10s %14s %14s %14s %8s %8s\n", "appenders", "(b) events/s", "appends/commit",
              "(c) events/s", "b/a", "b/c");
  for (int n : {1, 8, 64, 256}) {
    uint64_t per = std::max<uint64_t>(fsync_events * (n == 1 ? 1 : 10) / n, 20);
    auto b = group_commit_rate(sys, base / "b", n, per);
    uint64_t batch = std::max<uint64_t>(1, static_cast<uint64_t>(b.appends_per_commit + 0.5));
    double c = direct_rate(base / "c", n, per, batch);
    std::printf("%-10d %14.0f %14.1f %14.0f %8.1f %8.2f\n", n, b.rate, b.appends_per_commit, c,
                b.rate / a, b.rate / c);
  }

  // Replay: write the events fast (nosync), then fold vs raw scan.
  {
    auto j = fresh_journal(base / "replay", persistence::durability::nosync);
    for (uint64_t i = 0; i < replay_events; i += 10000) {
      std::vector<events::v1::Envelope> b;
      for (uint64_t k = i; k < std::min(replay_events, i + 10000); ++k) b.push_back(object_event(k));
      if (!j->append(b).ok()) return 1;
    }
    auto start = clock_type::now();
    auto state = persistence::fold_journal(*j);
    double fold = static_cast<double>(replay_events) / seconds_since(start);
    if (!state) {
      std::fprintf(stderr, "%s\n", state.error().to_string().c_str());
      return 1;
    }
    j.reset();
    double raw = raw_scan_rate(base / "replay", replay_events);
    std::printf("\nreplay of %lu events: fold %0.0f events/s, raw scan+decode %0.0f events/s, "
                "ratio %.2f\n",
                static_cast<unsigned long>(replay_events), fold, raw, fold / raw);
  }
  std::filesystem::remove_all(base);
  return 0;
}
