// SPEC §11 Acknowledgement: with --sync-standbys N a write is answered once
// N standbys hold it, a commit once they hold its bytes too; without them
// for --sync-timeout it answers BUSY (UNAVAILABLE) and is durable on the
// leader. Then with real processes: kill -9 the leader right after an
// acknowledged commit, promote the standby, and the revision is there and
// exports byte for byte.
#include <doctest/doctest.h>

#include <atomic>
#include <optional>

#include "api/server/sync_gate.hpp"
#include "replication_support.hpp"

using namespace weightd;
using namespace weightd::test;
namespace fs = std::filesystem;

namespace {

/// The outcome a gate gave, once it gave one.
struct answer {
  std::mutex mutex;
  std::optional<status> outcome;
  std::function<void(const status&)> done() {
    return [this](const status& st) {
      std::lock_guard lock(mutex);
      outcome = st;
    };
  }
  std::optional<status> get() {
    std::lock_guard lock(mutex);
    return outcome;
  }
};

}  // namespace

TEST_CASE("sync gate: a write is answered once the standbys it needs hold its seq, a commit once they hold its bytes too") {
  api::sync_gate gate{1, std::chrono::seconds(30)};
  answer write, commit;
  gate.after(5, false, write.done());
  gate.after(5, true, commit.done());
  CHECK_FALSE(write.get());
  auto standby = gate.join("standby-1");
  gate.report(standby, 4, 4);
  CHECK_FALSE(write.get());
  gate.report(standby, 5, 4);  // its journal holds seq 5, not yet the bytes
  REQUIRE(write.get());
  CHECK(write.get()->ok());
  CHECK_FALSE(commit.get());
  gate.report(standby, 5, 5);
  REQUIRE(commit.get());
  CHECK(commit.get()->ok());

  answer at_once;
  gate.after(5, true, at_once.done());  // it holds it already
  CHECK(at_once.get().has_value());
  auto listed = gate.standbys();
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].member == "standby-1");
  CHECK(listed[0].durable_seq == 5);
  gate.leave(standby);
  CHECK(gate.standbys().empty());
}

TEST_CASE("sync gate: without the standbys it needs a write answers BUSY after the timeout, naming how many hold it, and none needed answers at once") {
  api::sync_gate gate{2, std::chrono::milliseconds(200)};
  auto one = gate.join("standby-1");
  gate.report(one, 9, 9);
  answer write;
  gate.after(9, false, write.done());
  for (int i = 0; i < 100 && !write.get(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(write.get());
  CHECK(write.get()->code() == errc::busy);
  CHECK(mentions(*write.get(), "only 1 of the 2 standbys"));
  CHECK(mentions(*write.get(), "durable on this leader"));

  api::sync_gate none{0, std::chrono::milliseconds(200)};
  answer at_once;
  none.after(1'000, true, at_once.done());
  REQUIRE(at_once.get());
  CHECK(at_once.get()->ok());
}

TEST_CASE("sync: with --sync-standbys 1 a write without a standby answers BUSY yet is durable, and with one an acknowledged commit survives kill -9 of the leader, bytes and all") {
  temp_dir dir;
  auto leader_dir = dir.path() / "leader", standby_dir = dir.path() / "standby";
  auto address = "127.0.0.1:" + std::to_string(api::free_loopback_port());
  daemon_options lo;
  lo.listen = address;
  lo.flags = {"--sync-standbys", "1", "--sync-timeout", "1s"};
  auto leader = std::make_unique<running_daemon>(leader_dir, lo);
  CHECK(mentions(leader->ctl("status").output, "sync         a write waits for 1 standby"));

  write_file(dir.path() / "solo" / "weights.bin", pattern(3'000));
  auto unsynced = ctl_at(address, "obj put solo " + (dir.path() / "solo" / "weights.bin").string());
  CHECK(unsynced.exit_code == 7);  // BUSY
  CHECK(mentions(unsynced.output, "--sync-standbys"));
  CHECK(mentions(ctl_at(address, "obj ls").output, "solo"));  // durable on the leader all the same

  daemon_options so;
  so.flags = {"--follow", address};
  running_daemon standby{standby_dir, so};
  import_model(address, dir.path(), "alpha");  // answered only once the standby holds it all
  kill_9(leader);  // at once: nothing more to copy
  auto copied = journal_seq(standby_dir);
  for (int i = 0; i < 200 && !mentions(standby.ctl("status").output, "following    no"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto promoted = standby.ctl("admin promote 2>&1");
  REQUIRE_MESSAGE(promoted.exit_code == 0, promoted.output);
  CHECK(journal_seq(standby_dir) > copied);
  auto listed = standby.ctl("ls");
  CHECK(mentions(listed.output, "default/alpha@main#1"));
  CHECK_FALSE(mentions(listed.output, "DEGRADED"));
  auto out = dir.path() / "exported";
  auto exported = standby.ctl("export default/alpha@main " + out.string() + " -q");
  REQUIRE_MESSAGE(exported.exit_code == 0, exported.output);
  CHECK(read_file(out / "weights.bin") == read_file(dir.path() / "alpha" / "weights.bin"));
  CHECK(read_file(out / "config.json") == read_file(dir.path() / "alpha" / "config.json"));
}
