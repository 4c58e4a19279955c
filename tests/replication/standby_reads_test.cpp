// SPEC §11 Standby serving, with real processes: a standby answers
// GetRevision, ListRevisions, History, GetOperation, GetLineage and Watch
// from its own fold and journal — the same answers, byte for byte through
// weightctl, as its leader gives at the same journal position — says how far
// behind it is, and sends everything else to its leader (NOT_LEADER).
#include <doctest/doctest.h>

#include "replication_support.hpp"

using namespace weightd;
using namespace weightd::test;

TEST_CASE("standby reads: show, ls, history, op show, lineage and watch answer on a standby as on its leader, writes are NOT_LEADER") {
  temp_dir dir;
  leader_and_standby pair{dir.path()};
  auto& [leader_address, leader, standby] = pair;

  // Revisions in several states, a lease, an operation, a lineage's claim.
  import_model(leader_address, dir.path(), "alpha");
  import_model(leader_address, dir.path(), "beta");
  auto migrated = ctl_at(leader_address, "migrate default/alpha@main --to COLD --wait");
  REQUIRE_MESSAGE(migrated.exit_code == 0, migrated.output);
  auto lease = ctl_at(leader_address, "lease acquire default/beta@main --holder reader-1 --ttl 5m");
  REQUIRE_MESSAGE(lease.exit_code == 0, lease.output);
  write_file(dir.path() / "beta2" / "config.json", "{\"v\": 2}");
  auto upserted = ctl_at(leader_address, "upsert " + (dir.path() / "beta2").string() +
                                             " --base default/beta@main --quiet");
  REQUIRE_MESSAGE(upserted.exit_code == 0, upserted.output);
  REQUIRE(caught_up(dir.path() / "leader", dir.path() / "standby"));

  for (std::string read : {"show default/alpha@main", "--json show default/beta@main#1",
                           "ls", "--json ls --all", "history default/alpha@main",
                           "--json op show 1", "lineage default/beta@main",
                           "--json watch --from 1 --count 12"}) {
    CAPTURE(read);
    auto there = leader.ctl(read);
    auto here = standby.ctl(read);
    REQUIRE_MESSAGE(there.exit_code == 0, there.output);
    CHECK(here.exit_code == 0);
    CHECK(here.output == there.output);
  }
  auto missing = standby.ctl("show default/gamma@main");
  CHECK(missing.exit_code == leader.ctl("show default/gamma@main").exit_code);  // NOT_FOUND

  auto status = standby.ctl("status");
  CHECK(mentions(status.output, "(0 behind its leader, lag 0 ms)"));
  for (std::string write : {"lease acquire default/alpha@main --holder h --ttl 1m",
                            "op cancel 1", "rm default/alpha@main",
                            "migrate default/alpha@main --to HOT"}) {
    CAPTURE(write);
    auto refused = standby.ctl(write);
    CHECK(refused.exit_code == 22);  // NOT_LEADER
    CHECK(mentions(refused.output, "standby of " + leader_address));
  }
  CHECK(journal_seq(dir.path() / "standby") == journal_seq(dir.path() / "leader"));
}

TEST_CASE("standby reads: a standby owns its data directory: a leader started on it is refused, naming the directory") {
  temp_dir dir;
  leader_and_standby pair{dir.path()};
  auto& [leader_address, leader, standby] = pair;

  auto second = run_command(std::string{WEIGHTD_DAEMON} + " --data-dir " +
                            (dir.path() / "standby").string() + " --listen 127.0.0.1:" +
                            std::to_string(api::free_loopback_port()) + " 2>&1");
  CHECK(second.exit_code == 1);
  CHECK(mentions(second.output, "another weightd uses " + (dir.path() / "standby" / "journal").string()));
  CHECK(mentions(standby.ctl("status").output, "following    yes"));
}

TEST_CASE("standby reads: a standby that has not reached its leader since it started does not serve its copy") {
  temp_dir dir;
  auto nobody = "127.0.0.1:" + std::to_string(api::free_loopback_port());
  daemon_options so;
  so.flags = {"--follow", nobody};
  running_daemon standby{dir.path() / "standby", so};
  for (std::string read : {"ls", "history default/alpha@main", "--json watch --from 1 --count 1"}) {
    CAPTURE(read);
    auto refused = standby.ctl(read);
    CHECK(refused.exit_code == 6);  // NOT_READY
    CHECK(mentions(refused.output, "has not reached its leader " + nobody));
  }
  CHECK(mentions(standby.ctl("status").output, "following    no"));
}
