// SPEC §11 Bytes, with real processes: a standby mirrors every replica of
// its fold in the same tier and under the same file name as its leader,
// follows migrations and removals, catches up after its own kill -9, puts in
// COLD what its HOT tier cannot hold, paces itself to --mirror-rate, and a
// promoted standby exports every READY revision byte for byte.
#include <doctest/doctest.h>

#include <set>

#include "api/server/replica_mirror.hpp"
#include "replication_support.hpp"

using namespace weightd;
using namespace weightd::test;
namespace fs = std::filesystem;

namespace {

/// "HOT objects/ab/ab12…" for every replica file of a daemon's tiers.
std::set<std::string> tier_files(const fs::path& data_dir) {
  std::set<std::string> out;
  for (auto [tier, dir] : {std::pair{"HOT", data_dir / "hot"}, std::pair{"COLD", data_dir / "cold"}}) {
    if (!fs::exists(dir / "objects")) continue;
    for (const auto& f : fs::recursive_directory_iterator(dir / "objects"))
      if (f.is_regular_file())
        out.insert(std::string{tier} + " " + fs::relative(f.path(), dir).string());
  }
  return out;
}

/// Waits (at most 20 s) until `check()` holds.
template <class Check>
bool eventually(Check check) {
  for (int i = 0; i < 400; ++i) {
    if (check()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return check();
}

/// The standby says it holds `n` objects' bytes and has nothing left to copy.
bool mirrored(const running_daemon& standby, int n) {
  auto want = "replicas     " + std::to_string(n) + " of " + std::to_string(n) + " here";
  return eventually([&] { return mentions(standby.ctl("status").output, want); });
}

std::unique_ptr<running_daemon> start_standby(const fs::path& dir, const std::string& leader,
                                              std::vector<std::string> more = {}) {
  daemon_options o;
  o.flags = {"--follow", leader};
  o.flags.insert(o.flags.end(), more.begin(), more.end());
  return std::make_unique<running_daemon>(dir, o);
}

std::unique_ptr<running_daemon> start_leader(const fs::path& dir, const std::string& address) {
  daemon_options o;
  o.listen = address;
  return std::make_unique<running_daemon>(dir, o);
}

/// Kills the leader, promotes the standby, and returns the seq of its
/// leadership_taken.
uint64_t fail_over(std::unique_ptr<running_daemon>& leader, running_daemon& standby,
                   const fs::path& standby_dir) {
  kill_9(leader);
  eventually([&] { return mentions(standby.ctl("status").output, "following    no"); });
  auto taken_at = journal_seq(standby_dir) + 1;
  auto promoted = standby.ctl("admin promote 2>&1");
  REQUIRE_MESSAGE(promoted.exit_code == 0, promoted.output);
  return taken_at;
}

/// Exports `name` from `address` and compares it with the files imported.
void exports_byte_for_byte(const std::string& address, const fs::path& dir, const std::string& name) {
  auto out = dir / ("export-" + name);
  auto exported = ctl_at(address, "export default/" + name + "@main " + out.string() + " -q");
  REQUIRE_MESSAGE(exported.exit_code == 0, exported.output);
  for (const auto* file : {"config.json", "weights.bin"})
    CHECK_MESSAGE(read_file(out / file) == read_file(dir / name / file), (name + "/" + file));
}

/// The journal's events of `type` from seq `from` on (weightctl journal dump lines).
std::string events_since(const fs::path& data_dir, uint64_t from, const std::string& type) {
  auto dump = run_command(std::string{WEIGHTD_WEIGHTCTL} + " journal dump --from " +
                          std::to_string(from) + " --type " + type + " --data-dir " +
                          data_dir.string() + " 2>&1");
  REQUIRE_MESSAGE(dump.exit_code == 0, dump.output);
  return dump.output;
}

}  // namespace

TEST_CASE("mirror: where a standby puts an object is where its leader has it, HOT only where its HOT tier can hold it") {
  events::object_record r;
  r.size = 10;
  CHECK(api::place_mirror(nullptr, true) == api::mirror_placement{});
  CHECK(api::place_mirror(&r, true) == api::mirror_placement{});  // no readable replica
  r.hot = true;
  CHECK(api::place_mirror(&r, true) == api::mirror_placement{true, false});
  CHECK(api::place_mirror(&r, false) == api::mirror_placement{false, true});
  r.cold = true;
  CHECK(api::place_mirror(&r, true) == api::mirror_placement{true, true});
  CHECK(api::place_mirror(&r, false) == api::mirror_placement{false, true});
  r.hot = false;
  CHECK(api::place_mirror(&r, true) == api::mirror_placement{false, true});
}

TEST_CASE("mirror: a standby holds every replica in the leader's tier and file, follows migrations and removals, catches up after kill -9, and a promoted standby exports byte for byte") {
  temp_dir dir;
  auto leader_dir = dir.path() / "leader", standby_dir = dir.path() / "standby";
  auto address = "127.0.0.1:" + std::to_string(api::free_loopback_port());
  auto leader = start_leader(leader_dir, address);
  auto standby = start_standby(standby_dir, address);

  for (const auto* name : {"alpha", "beta", "gamma"}) import_model(address, dir.path(), name);
  REQUIRE(caught_up(leader_dir, standby_dir));
  REQUIRE(mirrored(*standby, 9));  // three objects each: two files and the manifest
  CHECK(tier_files(standby_dir) == tier_files(leader_dir));

  auto moved = ctl_at(address, "migrate default/alpha@main --to COLD --wait");
  REQUIRE_MESSAGE(moved.exit_code == 0, moved.output);
  REQUIRE(ctl_at(address, "rm default/beta@main").exit_code == 0);
  CHECK(eventually([&] {
    return tier_files(standby_dir) == tier_files(leader_dir) && tier_files(leader_dir).size() == 6;
  }));  // alpha: COLD but its manifest HOT; gamma HOT

  kill_9(standby);  // while it is down the leader removes gamma and imports delta
  REQUIRE(ctl_at(address, "rm default/gamma@main").exit_code == 0);
  import_model(address, dir.path(), "delta");
  standby = start_standby(standby_dir, address);
  REQUIRE(caught_up(leader_dir, standby_dir));
  CHECK(eventually([&] { return tier_files(standby_dir) == tier_files(leader_dir); }));
  REQUIRE(mirrored(*standby, 6));

  auto taken_at = fail_over(leader, *standby, standby_dir);
  CHECK(events_since(standby_dir, taken_at, "replica_dropped").empty());  // nothing LOST
  auto listed = standby->ctl("ls");
  CHECK(mentions(listed.output, "default/alpha@main#1"));
  CHECK(mentions(listed.output, "default/delta@main#1"));
  CHECK_FALSE(mentions(listed.output, "DEGRADED"));
  exports_byte_for_byte(standby->address, dir.path(), "alpha");
  exports_byte_for_byte(standby->address, dir.path(), "delta");
  auto verified = run_command(std::string{WEIGHTD_WEIGHTCTL} + " journal verify --data-dir " +
                              standby_dir.string() + " 2>&1");
  CHECK_MESSAGE(verified.exit_code == 0, verified.output);
}

TEST_CASE("mirror: what the standby's HOT tier cannot hold goes to COLD, and promoted it adopts the COLD copy and exports byte for byte") {
  temp_dir dir;
  auto leader_dir = dir.path() / "leader", standby_dir = dir.path() / "standby";
  auto address = "127.0.0.1:" + std::to_string(api::free_loopback_port());
  auto leader = start_leader(leader_dir, address);
  // 50 000-byte weights do not fit a 20 000-byte HOT tier; the small files do.
  auto standby = start_standby(standby_dir, address, {"--hot-capacity", "20000"});
  import_model(address, dir.path(), "alpha");
  REQUIRE(mirrored(*standby, 3));
  auto files = tier_files(standby_dir);
  CHECK(std::count_if(files.begin(), files.end(),
                      [](const std::string& f) { return f.rfind("COLD ", 0) == 0; }) == 1);
  CHECK(std::count_if(files.begin(), files.end(),
                      [](const std::string& f) { return f.rfind("HOT ", 0) == 0; }) == 2);

  auto taken_at = fail_over(leader, *standby, standby_dir);
  auto adopted = events_since(standby_dir, taken_at, "replica_added");
  CHECK(mentions(adopted, "weights.bin"));
  CHECK(mentions(adopted, "\"tier\": \"COLD\""));
  exports_byte_for_byte(standby->address, dir.path(), "alpha");
}

TEST_CASE("mirror: --mirror-rate paces the copies") {
  temp_dir dir;
  auto leader_dir = dir.path() / "leader", standby_dir = dir.path() / "standby";
  auto address = "127.0.0.1:" + std::to_string(api::free_loopback_port());
  auto leader = start_leader(leader_dir, address);
  for (const auto* name : {"alpha", "beta", "gamma", "delta"}) import_model(address, dir.path(), name);
  auto started = std::chrono::steady_clock::now();
  auto standby = start_standby(standby_dir, address, {"--mirror-rate", "100KiB/s"});
  REQUIRE(mirrored(*standby, 12));
  // 200 000 bytes of weights at 102 400 bytes/s: never under a second,
  // whatever the first chunk it sends before waiting.
  CHECK(std::chrono::steady_clock::now() - started >= std::chrono::seconds(1));
}
