// SPEC §11 Divergence, with real processes: a leader that went on writing
// after its standby was cut off, and was then replaced by that standby
// (promoted by hand), comes back with `--follow` the new leader. It sets the
// events the new leader never had aside in <data>/diverged-1.ndjson (which
// `journal dump --file` reads), truncates its journal to the new epoch's
// last_seq_of_previous_epoch, and follows: its journal is the new leader's,
// what it set aside is gone from its reads, it takes no write, and both
// journals verify.
#include <doctest/doctest.h>

#include <algorithm>

#include "api/server/divergence.hpp"
#include "persistence/faulty_journal.hpp"
#include "persistence/memory_journal.hpp"
#include "replication_support.hpp"

using namespace weightd;
using namespace weightd::test;
namespace fs = std::filesystem;

TEST_CASE("divergence: a former leader that comes back sets its diverged tail aside in diverged-<epoch>.ndjson, truncates and follows the new leader") {
  temp_dir dir;
  auto a_dir = dir.path() / "a", b_dir = dir.path() / "b";
  auto a_address = "127.0.0.1:" + std::to_string(api::free_loopback_port());
  daemon_options ao;
  ao.listen = a_address;
  auto a = std::make_unique<running_daemon>(a_dir, ao);
  daemon_options bo;
  bo.flags = {"--follow", a_address};
  auto b = std::make_unique<running_daemon>(b_dir, bo);
  import_model(a_address, dir.path(), "alpha");
  REQUIRE(caught_up(a_dir, b_dir));

  kill_9(b);  // the standby is cut off ...
  auto common = journal_seq(b_dir);
  import_model(a_address, dir.path(), "beta");  // ... while the leader goes on alone
  auto a_end = journal_seq(a_dir);
  REQUIRE(a_end > common);
  kill_9(a);

  b = std::make_unique<running_daemon>(b_dir, bo);  // its leader is gone: promote it
  auto promoted = b->ctl("admin promote --force");
  REQUIRE_MESSAGE(promoted.exit_code == 0, promoted.output);
  import_model(b->address, dir.path(), "gamma");

  daemon_options back;
  back.listen = a_address;
  back.flags = {"--follow", b->address};
  a = std::make_unique<running_daemon>(a_dir, back);
  REQUIRE(caught_up(b_dir, a_dir));

  auto set_aside = a_dir / "diverged-1.ndjson";
  REQUIRE(fs::exists(set_aside));
  auto dumped = run_command(std::string{WEIGHTD_WEIGHTCTL} + " journal dump --json --file " +
                            set_aside.string() + " 2>&1");
  REQUIRE_MESSAGE(dumped.exit_code == 0, dumped.output);
  CHECK(mentions(dumped.output, "\"global_seq\": " + std::to_string(common + 1) + ","));
  CHECK(mentions(dumped.output, "\"global_seq\": " + std::to_string(a_end) + ","));
  CHECK(mentions(dumped.output, "default/beta@main"));
  auto plain = run_command(std::string{WEIGHTD_WEIGHTCTL} + " journal dump --file " +
                           set_aside.string() + " --limit 1 2>&1");
  CHECK(plain.output.rfind("#" + std::to_string(common + 1) + " ", 0) == 0);  // one line, that seq

  // Its journal is the new leader's: beta is gone, gamma is there.
  CHECK(a->ctl("show default/gamma@main").exit_code == 0);
  CHECK(a->ctl("show default/beta@main").exit_code == 3);  // NOT_FOUND
  CHECK(mentions(a->ctl("status").output, "(standby of " + b->address + ", epoch 1)"));
  auto write = a->ctl("lease acquire default/alpha@main --holder h --ttl 1m");
  CHECK(write.exit_code == 22);  // NOT_LEADER

  auto a_journal = open_read_only(a_dir);
  auto b_journal = open_read_only(b_dir);
  CHECK(*a_journal->highest_epoch() == 1);
  std::vector<std::string> mine, theirs;
  auto encoded = [](std::vector<std::string>& into) {
    return [&into](const events::v1::Envelope& e) {
      into.push_back(e.SerializeAsString());
      return true;
    };
  };
  REQUIRE(a_journal->read({}, encoded(mine)).ok());
  REQUIRE(b_journal->read({1, mine.size(), persistence::kMaxSeq}, encoded(theirs)).ok());
  CHECK(mine == theirs);
  a_journal.reset();
  b_journal.reset();
  for (const auto& d : {a_dir, b_dir}) {
    auto verified = run_command(std::string{WEIGHTD_WEIGHTCTL} + " journal verify --data-dir " +
                                d.string() + " 2>&1");
    CHECK_MESSAGE(verified.exit_code == 0, verified.output);
  }
}

TEST_CASE("divergence: a crash between writing the set-aside file and truncating leaves the whole journal, doing it again writes the same file and truncates") {
  temp_dir dir;
  auto inner = std::make_shared<persistence::memory_journal>();
  persistence::faulty_journal journal{inner};
  for (int i = 0; i < 5; ++i) {
    std::vector<events::v1::Envelope> one{make_event("revision|default/m@main#1", "e" + std::to_string(i))};
    REQUIRE(journal.append(one).ok());
  }
  weightd::v1::Divergence divergence;
  divergence.set_last_common_seq(3);
  divergence.set_epoch(1);
  auto file = api::diverged_file(dir.path(), divergence);
  CHECK(file == dir.path() / "diverged-1.ndjson");

  journal.inject(persistence::fault::fail_truncate);  // the crash: the file is there, the tail too
  auto failed = api::set_aside_diverged(journal, divergence, dir.path());
  CHECK(failed.error().code() == errc::durability_failed);
  CHECK(*journal.highest_seq() == 5);
  auto first = read_file(file);
  CHECK(std::count(first.begin(), first.end(), '\n') == 2);  // seqs 4 and 5

  auto again = api::set_aside_diverged(journal, divergence, dir.path());
  REQUIRE(again.ok());
  CHECK(*again == 2);
  CHECK(read_file(file) == first);
  CHECK(*journal.highest_seq() == 3);
  CHECK(read_all(journal).size() == 3);
  CHECK_FALSE(fs::exists(fs::path(file.string() + ".partial")));
}
