// SPEC §11 Follow with real processes: `weightd --follow` copies a leader's
// journal while the leader takes imports and leases; kill -9 of the standby,
// then of the leader, is survived (each restarts on its data, the standby
// reconnects by itself); in the end both journals are the same byte for byte,
// the standby's snapshots fold to the leader's state, and `weightctl journal
// verify` is clean on both.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <thread>

#include "events/state_codec.hpp"
#include "persistence/replay.hpp"
#include "replication_support.hpp"

using namespace weightd;
using namespace weightd::test;
namespace fs = std::filesystem;

namespace {

daemon_options leader_options(const std::string& listen) {
  daemon_options o;
  o.listen = listen;
  return o;
}

daemon_options standby_options(const std::string& leader) {
  daemon_options o;
  o.flags = {"--follow", leader, "--snapshot-every", "13"};
  o.wait = false;  // it is watched through its journal
  return o;
}

/// Imports small models and takes leases on them until told to stop; calls
/// that fail while the leader is down are simply not counted.
struct steady_load {
  const fs::path dir;
  std::string address;
  std::atomic<bool> stop{false};
  std::atomic<int> imported{0};
  std::thread thread;

  steady_load(fs::path d, std::string a) : dir(std::move(d)), address(std::move(a)) {
    thread = std::thread([this] { run(); });
  }
  ~steady_load() { finish(); }
  void finish() {
    stop = true;
    if (thread.joinable()) thread.join();
  }
  run_result ctl(const std::string& args) const {
    return run_command(std::string{WEIGHTD_WEIGHTCTL} + " --address " + address + " " + args +
                       " 2>&1");
  }
  void run() {
    for (int i = 0; !stop; ++i) {
      auto model = dir / ("m" + std::to_string(i));
      write_file(model / "config.json", "{\"i\": " + std::to_string(i) + "}");
      write_file(model / "weights.bin", pattern(100'000, static_cast<unsigned>(i)));
      auto name = "default/m" + std::to_string(i) + "@main";
      if (ctl("import " + model.string() + " --as " + name + " --quiet").exit_code == 0) {
        ++imported;
        ctl("lease acquire " + name + " --holder reader-" + std::to_string(i) + " --ttl 10m");
      }
    }
  }
};

void wait_for_imports(const steady_load& load, int at_least) {
  for (int i = 0; i < 600 && load.imported < at_least; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(load.imported >= at_least);
}

}  // namespace

TEST_CASE("standby process: weightd --follow copies the journal under load and survives kill -9 of either side") {
  temp_dir dir;
  auto leader_dir = dir.path() / "leader", standby_dir = dir.path() / "standby";
  auto address = "127.0.0.1:" + std::to_string(api::free_loopback_port());
  auto leader = std::make_unique<running_daemon>(leader_dir, leader_options(address));
  auto standby = std::make_unique<running_daemon>(standby_dir, standby_options(address));
  steady_load load{dir.path() / "models", address};
  wait_for_imports(load, 3);

  kill_9(standby);  // the standby dies mid-stream ...
  wait_for_imports(load, 5);
  standby = std::make_unique<running_daemon>(standby_dir, standby_options(address));  // ... and resumes

  wait_for_imports(load, 7);
  kill_9(leader);  // the leader dies under load ...
  leader = std::make_unique<running_daemon>(leader_dir, leader_options(address));  // ... and restarts
  int before = load.imported;
  wait_for_imports(load, before + 2);  // the standby follows the restarted leader
  load.finish();

  REQUIRE(caught_up(leader_dir, standby_dir));
  CHECK(standby->stop() == 0);
  CHECK(leader->stop() == 0);
  // The standby's journal is the start of the leader's (which may have
  // written a reconciler's event after the standby stopped).
  auto a = open_read_only(leader_dir), b = open_read_only(standby_dir);
  auto events_b = read_all(*b);
  auto events_a = read_all(*a, {1, events_b.size(), persistence::kMaxSeq});
  REQUIRE(events_a.size() == events_b.size());
  for (size_t i = 0; i < events_a.size(); ++i)
    CHECK_MESSAGE(events_a[i].SerializeAsString() == events_b[i].SerializeAsString(), "seq " << i + 1);
  // The standby's snapshots are its own fold: folded from them, its journal
  // gives the state the leader's events give.
  persistence::fold_options events_only;
  events_only.use_snapshots = false;
  events_only.until_seq = events_b.size();
  auto leader_state = persistence::fold_journal(*a, events_only);
  auto standby_state = persistence::fold_journal(*b);
  REQUIRE(leader_state.ok());
  REQUIRE(standby_state.ok());
  CHECK(*standby_state == *leader_state);
  CHECK(b->load_snapshot(events::kStateSnapshotStream, {}).value().has_value());
  a.reset();
  b.reset();
  for (const auto& data : {leader_dir, standby_dir}) {
    auto verified = run_command(std::string{WEIGHTD_WEIGHTCTL} + " journal verify --data-dir " +
                                data.string() + " 2>&1");
    CHECK_MESSAGE(verified.exit_code == 0, verified.output);
  }
}
