// SPEC §11 promotion by hand, with real processes: a standby answers what a
// standby answers (its role; NOT_LEADER naming the leader for the rest),
// refuses a promotion while its leader streams to it, and once the leader is
// killed becomes the leader on its own journal: leadership_taken with epoch
// 1 after the last copied seq, the revisions and the live lease it copied
// are there, it takes writes, and its journal verifies.
#include <doctest/doctest.h>

#include "replication_support.hpp"

using namespace weightd;
using namespace weightd::test;

TEST_CASE("promotion: a standby answers as one, refuses while its leader streams, and once the leader is gone leads at epoch 1 with what it copied") {
  temp_dir dir;
  auto leader_address = "127.0.0.1:" + std::to_string(api::free_loopback_port());
  daemon_options lo;
  lo.listen = leader_address;
  auto leader = std::make_unique<running_daemon>(dir.path() / "leader", lo);
  daemon_options so;
  so.flags = {"--follow", leader_address};
  running_daemon standby{dir.path() / "standby", so};  // it answers `weightctl status`

  import_model(leader_address, dir.path(), "alpha");
  auto lease = ctl_at(leader_address, "lease acquire default/alpha@main --holder reader-1 --ttl 5m");
  REQUIRE_MESSAGE(lease.exit_code == 0, lease.output);
  REQUIRE(caught_up(dir.path() / "leader", dir.path() / "standby"));

  auto status = standby.ctl("status");
  CHECK(status.exit_code == 0);
  CHECK(mentions(status.output, "(standby of " + leader_address + ", epoch 0)"));
  CHECK(mentions(status.output, "following    yes"));
  auto write = standby.ctl("rm default/alpha@main 2>&1");
  CHECK(write.exit_code == 22);  // NOT_LEADER
  CHECK(mentions(write.output, "standby of " + leader_address));
  auto refused = standby.ctl("admin promote 2>&1");
  CHECK(refused.exit_code == 6);  // NOT_READY: two leaders otherwise
  CHECK(mentions(refused.output, "two leaders"));

  kill_9(leader);  // the leader dies
  for (int i = 0; i < 200 && !mentions(standby.ctl("status").output, "following    no"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto copied = journal_seq(dir.path() / "standby");  // where the previous epoch ends
  auto promoted = standby.ctl("admin promote 2>&1");
  REQUIRE_MESSAGE(promoted.exit_code == 0, promoted.output);
  CHECK(mentions(promoted.output, "the leader at epoch 1"));
  auto now = standby.ctl("status");
  CHECK(mentions(now.output, "(leader, epoch 1, writer"));
  auto leases = standby.ctl("lease ls default/alpha@main");
  CHECK(mentions(leases.output, "reader-1"));  // the lease lives on (recovery grace)
  import_model(standby.address, dir.path(), "beta");  // it takes writes
  CHECK(standby.ctl("show default/beta@main").exit_code == 0);
  CHECK(standby.stop() == 0);

  auto taken = run_command(std::string{WEIGHTD_WEIGHTCTL} + " journal dump --type leadership_taken --json --data-dir " +
                           (dir.path() / "standby").string() + " 2>&1");
  REQUIRE(taken.exit_code == 0);
  CHECK(mentions(taken.output, "\"global_seq\": " + std::to_string(copied + 1) + ","));
  CHECK(mentions(taken.output, "\"leadership_taken\": {\"epoch\": 1,"));
  CHECK(mentions(taken.output, "\"last_seq_of_previous_epoch\": " + std::to_string(copied) + "}"));
  auto verified = run_command(std::string{WEIGHTD_WEIGHTCTL} + " journal verify --data-dir " +
                              (dir.path() / "standby").string() + " 2>&1");
  CHECK_MESSAGE(verified.exit_code == 0, verified.output);
}
