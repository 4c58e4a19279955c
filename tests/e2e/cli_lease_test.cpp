// Leases end to end: the real daemon driven by the real weightctl over gRPC
// (SPEC §4 Leases, §7 weightctl lease and export).
#include <doctest/doctest.h>

#include <fstream>
#include <thread>

#include "api/client/client.hpp"
#include "events/identity.hpp"
#include "daemon_fixture.hpp"

using namespace weightd;
using namespace weightd::test;

namespace {

/// The number in "lease 7 on ..." (weightctl lease acquire's output).
uint64_t lease_id_in(const std::string& output) {
  return std::stoull(output.substr(output.find("lease ") + 6));
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("cli leases: acquire, ls, rm is BUSY naming the holder, release, then rm succeeds") {
  temp_dir dir;
  write_file(dir.path() / "model" / "w.bin", pattern(100'000, 1));
  running_daemon d{dir.path() / "var"};
  REQUIRE(d.ctl("import " + (dir.path() / "model").string() + " --as default/m@main").exit_code == 0);

  auto acquired = d.ctl("lease acquire default/m@main --holder trainer-3 --ttl 60s");
  REQUIRE_MESSAGE(acquired.exit_code == 0, acquired.output);
  CHECK(acquired.output.find("held by trainer-3 until") != std::string::npos);
  auto id = lease_id_in(acquired.output);
  auto again = d.ctl("lease acquire default/m@main --holder trainer-3");
  CHECK(lease_id_in(again.output) == id);  // the same holder's live lease

  auto listed = d.ctl("lease ls default/m@main");
  CHECK(listed.output.find("trainer-3") != std::string::npos);
  CHECK(d.ctl("show default/m@main --json").output.find("\"active_lease_count\": 1") !=
        std::string::npos);

  auto busy = d.ctl("rm default/m@main");
  CHECK(busy.exit_code == 7);  // BUSY
  CHECK(busy.output.find("'trainer-3'") != std::string::npos);
  CHECK(busy.output.find("nearest expires at") != std::string::npos);

  CHECK(d.ctl("lease renew " + std::to_string(id) + " --ttl 2m").exit_code == 0);
  CHECK(d.ctl("lease release " + std::to_string(id)).exit_code == 0);
  CHECK(d.ctl("lease release " + std::to_string(id)).exit_code == 0);  // idempotent
  CHECK(d.ctl("lease renew " + std::to_string(id)).exit_code == 8);    // LEASE_EXPIRED
  CHECK(d.ctl("lease acquire default/m@main --ttl 0").exit_code == 2);  // INVALID_ARGUMENT
  CHECK(d.ctl("rm default/m@main").exit_code == 0);
  CHECK(d.ctl("lease acquire default/m@main").exit_code == 3);  // NOT_FOUND: no READY one left
}

TEST_CASE("cli leases: rm --drain-timeout deletes once the holder releases, revoke ends a lease") {
  temp_dir dir;
  write_file(dir.path() / "model" / "w.bin", pattern(10'000, 1));
  running_daemon d{dir.path() / "var"};
  REQUIRE(d.ctl("import " + (dir.path() / "model").string() + " --as default/m@main").exit_code == 0);
  auto id = lease_id_in(d.ctl("lease acquire default/m@main --holder server-1").output);

  auto draining = d.ctl("rm default/m@main --drain-timeout 60s");
  REQUIRE_MESSAGE(draining.exit_code == 0, draining.output);
  CHECK(draining.output.find("waiting for 1 live lease to end") != std::string::npos);
  CHECK(d.ctl("lease acquire default/m@main --holder late").exit_code == 6);  // NOT_READY
  CHECK(d.ctl("lease revoke " + std::to_string(id) + " --reason maintenance").exit_code == 0);
  std::string state;
  for (int i = 0; i < 200; ++i) {
    state = d.ctl("show default/m@main#1 --json").output;
    if (state.find("\"DELETED\"") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(state.find("\"availability\": \"DELETED\"") != std::string::npos);
  auto revoked = run_command(std::string{WEIGHTD_WEIGHTCTL} + " journal dump --type lease_revoked --data-dir " +
                             (dir.path() / "var").string());
  CHECK(revoked.output.find("maintenance") != std::string::npos);
}

TEST_CASE("cli leases: export holds a lease for its whole duration and releases it at the end") {
  temp_dir dir;
  write_file(dir.path() / "model" / "a.bin", pattern(300'000, 1));
  write_file(dir.path() / "model" / "b.bin", pattern(200'000, 2));
  running_daemon d{dir.path() / "var"};
  REQUIRE(d.ctl("import " + (dir.path() / "model").string() + " --as default/m@main").exit_code == 0);
  auto exported = d.ctl("export default/m@main " + (dir.path() / "out").string());
  REQUIRE_MESSAGE(exported.exit_code == 0, exported.output);
  auto journal = run_command(std::string{WEIGHTD_WEIGHTCTL} + " journal dump --data-dir " +
                             (dir.path() / "var").string());
  CHECK(count(journal.output, "lease_granted") == 1);
  CHECK(journal.output.find("weightctl-export@") != std::string::npos);
  CHECK(count(journal.output, "lease_released") == 1);
  // The lease was granted before the first object read and released after the last.
  CHECK(journal.output.find("lease_granted") < journal.output.rfind("lease_released"));
  CHECK(d.ctl("lease ls default/m@main").output.find("no live lease") == 0);
}

TEST_CASE("cli leases: Ctrl-C during an export releases its lease and leaves no partial file") {
  temp_dir dir;
  write_file(dir.path() / "model" / "big.bin", pattern(256u << 20, 3));
  running_daemon d{dir.path() / "var"};
  REQUIRE(d.ctl("import " + (dir.path() / "model").string() + " --as default/big@main").exit_code == 0);
  api::client_options o;
  o.address = d.address;
  api::client c{o};
  v1::ListLeasesRequest q;
  *q.mutable_id() = events::revision_key{"default", "default", "big", "main", 1}.to_proto();

  auto out = dir.path() / "out";
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    execl(WEIGHTD_WEIGHTCTL, WEIGHTD_WEIGHTCTL, "--address", d.address.c_str(), "export",
          "default/big@main", out.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  bool leased = false;
  for (int i = 0; i < 20'000 && !leased; ++i) {
    auto listed = c.list_leases(q);
    leased = listed.ok() && listed->leases_size() == 1;
    if (!leased) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  REQUIRE(leased);
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  // Either the interrupt landed mid-transfer (130) or the export had just finished (0);
  // both must leave no lease behind.
  CHECK((WEXITSTATUS(status) == 130 || WEXITSTATUS(status) == 0));
  if (WEXITSTATUS(status) == 130) {
    CHECK_FALSE(std::filesystem::exists(out / "big.bin"));
    CHECK_FALSE(std::filesystem::exists(out / "big.bin.weightd-partial"));
  }
  auto after = c.list_leases(q);
  REQUIRE(after.ok());
  CHECK(after->leases_size() == 0);
}
