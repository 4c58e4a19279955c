// End to end with the real binaries: weightd opens and records itself in the
// journal; weightctl journal dump/stats read it, also while the daemon runs.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <thread>

#include "daemon_fixture.hpp"

using namespace weightd;
using namespace weightd::test;

namespace {

run_result run(const std::string& command) { return run_command(command); }

std::string weightctl(const std::string& args) {
  return std::string{WEIGHTD_WEIGHTCTL} + " " + args;
}

size_t count_lines(const std::string& s) { return std::count(s.begin(), s.end(), '\n'); }

/// Waits until the journal in data_dir holds at least n events.
bool wait_for_events(const std::filesystem::path& data_dir, size_t n) {
  for (int i = 0; i < 200; ++i) {
    auto r = run(weightctl("journal dump --data-dir " + data_dir.string()));
    if (r.exit_code == 0 && count_lines(r.output) >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return false;
}

}  // namespace

TEST_CASE("cli: each daemon run is an incarnation recorded in the journal") {
  temp_dir dir;
  {
    running_daemon d{dir.path()};
    REQUIRE(wait_for_events(dir.path(), 1));
    // Read-only tools work while the daemon holds the journal open.
    auto live = run(weightctl("journal stats --data-dir " + dir.path().string()));
    CHECK(live.exit_code == 0);
    CHECK(live.output.find("highest seq  1") != std::string::npos);
    CHECK(d.stop() == 0);
  }
  {
    running_daemon d{dir.path()};
    REQUIRE(wait_for_events(dir.path(), 2));
    CHECK(d.stop() == 0);
  }
  auto dump = run(weightctl("journal dump --data-dir " + dir.path().string()));
  REQUIRE(dump.exit_code == 0);
  CHECK(std::filesystem::is_directory(dir.path() / "cold" / "objects"));
  CHECK(std::filesystem::is_directory(dir.path() / "hot" / "objects"));
  CHECK(count_lines(dump.output) == 2);
  CHECK(dump.output.find("#1 ") == 0);
  CHECK(dump.output.find("system#2 writer_started {\"writer_id\": 2, \"version\": ") != std::string::npos);
}

TEST_CASE("cli: a second daemon on the same directories is refused with a clear error") {
  temp_dir dir;
  running_daemon first{dir.path()};
  REQUIRE(wait_for_events(dir.path(), 1));
  auto hot = (dir.path() / "hot").string();
  auto second = run(std::string{WEIGHTD_DAEMON} + " --data-dir " + dir.path().string() +
                    " --hot-dir " + hot + " --listen 127.0.0.1:0 --http-listen 127.0.0.1:0");
  CHECK(second.exit_code == 1);
  CHECK(second.output.find("another weightd") != std::string::npos);
  CHECK(first.stop() == 0);
}

TEST_CASE("cli: a second daemon on a port in use is refused, not started beside the first") {
  temp_dir dir;
  running_daemon first{dir.path() / "a"};
  REQUIRE(wait_for_events(dir.path() / "a", 1));
  auto other = dir.path() / "b";
  auto second = run(std::string{WEIGHTD_DAEMON} + " --data-dir " + other.string() + " --hot-dir " +
                    (other / "hot").string() + " --listen " + first.address +
                    " --http-listen 127.0.0.1:0");
  CHECK(second.exit_code != 0);
  CHECK(second.output.find("cannot listen on " + first.address) != std::string::npos);
  CHECK(first.stop() == 0);
}

TEST_CASE("cli: journal dump filters by seq range, stream and type, as text or JSON") {
  temp_dir dir;
  {
    persistence::lmdb_options o;
    o.dir = dir.path() / "journal";
    auto j = persistence::lmdb_journal::open(o);
    REQUIRE(j.ok());
    for (int i = 0; i < 6; ++i) {
      std::vector<events::v1::Envelope> batch{make_event(i % 2 ? "object|default/k" : "system")};
      if (i % 2) {
        batch[0].clear_payload();
        auto* put = batch[0].mutable_object_put();
        put->set_tenant("default");
        put->set_key("k" + std::to_string(i));
        put->set_size(10);
        put->set_tier(events::v1::TIER_HOT);
      }
      REQUIRE((*j)->append(batch).ok());
    }
  }
  auto base = "--data-dir " + dir.path().string() + " ";
  CHECK(count_lines(run(weightctl("journal dump " + base)).output) == 6);
  CHECK(count_lines(run(weightctl("journal dump --from 2 --to 4 " + base)).output) == 3);
  CHECK(count_lines(run(weightctl("journal dump --limit 2 " + base)).output) == 2);
  auto by_type = run(weightctl("journal dump --type object_put " + base));
  CHECK(count_lines(by_type.output) == 3);
  CHECK(by_type.output.find("writer_started") == std::string::npos);
  auto by_stream = run(weightctl("journal dump --stream system --from 3 " + base));
  CHECK(count_lines(by_stream.output) == 2);  // seqs 3 and 5
  auto json = run(weightctl("journal dump --json --to 2 " + base));
  CHECK(json.output.find("{\"global_seq\": 1,") == 0);
  CHECK(json.output.find("\"object_put\": {\"tenant\": \"default\", \"key\": \"k1\"") !=
        std::string::npos);
  auto stats = run(weightctl("journal stats --json " + base));
  CHECK(stats.exit_code == 0);
  CHECK(stats.output.find("\"by_type\": {\"object_put\": 3, \"writer_started\": 3}") !=
        std::string::npos);
}

TEST_CASE("cli: bad input and missing journals get clear errors and distinct exit codes") {
  temp_dir dir;
  auto bad_type = run(weightctl("journal dump --type nope --data-dir " + dir.path().string()));
  CHECK(bad_type.exit_code == 2);  // INVALID_ARGUMENT
  CHECK(bad_type.output.find("--type 'nope' is not an event type") != std::string::npos);
  auto missing = run(weightctl("journal stats --data-dir " + (dir.path() / "none").string()));
  CHECK(missing.exit_code == 3);  // NOT_FOUND
  CHECK(missing.output.find("no journal in") != std::string::npos);
  CHECK(run(weightctl("journal frobnicate")).exit_code == 1);  // usage
}
