// weightctl upsert and lineage end to end: the real daemon, the real
// weightctl, a reader mapping the base under its lease while the next
// generation commits (SPEC §4 Lineage replacement, §7 weightctl).
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>

#include <thread>

#include "api/client/client.hpp"
#include "api/client/local_mapping.hpp"
#include "daemon_fixture.hpp"

using namespace weightd;
using namespace weightd::test;

namespace {

/// The lease id weightctl printed ("lease 3 on ...").
uint64_t lease_id_in(const std::string& output) {
  auto at = output.find("lease ");
  REQUIRE(at != std::string::npos);
  return std::stoull(output.substr(at + 6));
}

/// Waits up to 10 s until `weightctl lineage` shows `text`.
bool lineage_shows(const running_daemon& d, const std::string& id, const std::string& text) {
  for (int i = 0; i < 400; ++i) {
    if (d.ctl("lineage " + id).output.find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return false;
}

}  // namespace

TEST_CASE("cli upsert: a reader holding the base keeps reading it byte-identical while the next "
          "generation commits, the base is deleted once the reader releases") {
  temp_dir dir;
  auto v1_bytes = pattern(300'000, 1), v2_bytes = pattern(300'000, 2);
  write_file(dir.path() / "v1" / "model.safetensors", v1_bytes);
  write_file(dir.path() / "v2" / "model.safetensors", v2_bytes);
  running_daemon d{dir.path() / "var"};
  REQUIRE(d.ctl("import " + (dir.path() / "v1").string() + " --as default/policy@main -q")
              .exit_code == 0);
  auto lease = d.ctl("lease acquire default/policy@main --holder inference-1 --ttl 60s");
  REQUIRE_MESSAGE(lease.exit_code == 0, lease.output);
  auto lease_id = lease_id_in(lease.output);

  auto up = d.ctl("upsert " + (dir.path() / "v2").string() +
                  " --base default/policy@main --request-id step-200 -q");
  REQUIRE_MESSAGE(up.exit_code == 0, up.output);
  CHECK(up.output.find("upserted default/policy@main#2 over #1") != std::string::npos);
  CHECK(up.output.find("claim 'step-200' is RETIRING_BASE") != std::string::npos);
  auto lineage = d.ctl("lineage default/policy@main");
  CHECK(lineage.output.find("#2") != std::string::npos);
  CHECK(lineage.output.find("RETIRING_BASE") != std::string::npos);

  // The reader, under the lease it held before, maps the base: its bytes.
  api::client c{d.client_options()};
  v1::OpenLocalRequest open;
  open.mutable_id()->set_resource("policy");
  open.mutable_id()->set_revision("main");
  open.mutable_id()->set_weight_generation(1);
  open.set_lease_id(lease_id);
  auto mapped = api::map_local(c, open);
  REQUIRE_MESSAGE(mapped.ok(), mapped.error().to_string());
  REQUIRE(mapped->payloads.size() == 1);
  CHECK(mapped->payloads[0].bytes() == v1_bytes);
  // A new reader gets the new generation; the base takes no new lease.
  CHECK(d.ctl("lease acquire default/policy@main#1 --holder late").exit_code == 6);  // NOT_READY
  CHECK(d.ctl("lease renew " + std::to_string(lease_id) + " --ttl 60s").exit_code == 0);
  auto exported = d.ctl("export default/policy@main " + (dir.path() / "out").string() + " -q");
  REQUIRE_MESSAGE(exported.exit_code == 0, exported.output);
  CHECK(read_file(dir.path() / "out" / "model.safetensors") == v2_bytes);

  REQUIRE(d.ctl("lease release " + std::to_string(lease_id)).exit_code == 0);
  CHECK(lineage_shows(d, "default/policy@main", "COMPLETED"));
  CHECK(d.ctl("show default/policy@main#1").output.find("DELETED") != std::string::npos);
  auto history = d.ctl("history default/policy@main#1");
  CHECK(history.output.find("upsert_claimed") != std::string::npos);
  CHECK(history.output.find("claim step-200 COMPLETED") != std::string::npos);
  CHECK(history.output.find("retirement_started") != std::string::npos);
  d.stop();
  auto verify = run_command(std::string{WEIGHTD_WEIGHTCTL} + " journal verify --data-dir " +
                            (dir.path() / "var").string());
  CHECK_MESSAGE(verify.exit_code == 0, verify.output);
}

TEST_CASE("cli upsert: delete-first, --wait, and the errors with their exit codes") {
  temp_dir dir;
  write_file(dir.path() / "m" / "w.bin", pattern(10'000, 1));
  running_daemon d{dir.path() / "var"};
  auto model = (dir.path() / "m").string();
  REQUIRE(d.ctl("import " + model + " --as default/m@main -q").exit_code == 0);
  // A target generation not above the base's: INVALID_ARGUMENT (2), nothing uploaded.
  auto low = d.ctl("upsert " + model + " --base default/m@main --generation 1 -q");
  CHECK(low.exit_code == 2);
  CHECK(low.output.find("target_generation") != std::string::npos);
  // delete-first while a lease is held: BUSY (7) before anything happens.
  auto lease = d.ctl("lease acquire default/m@main --holder r");
  REQUIRE(lease.exit_code == 0);
  auto busy = d.ctl("upsert " + model + " --base default/m@main --mode delete-first -q");
  CHECK(busy.exit_code == 7);
  CHECK(d.ctl("show default/m@main#1").output.find("READY") != std::string::npos);
  REQUIRE(d.ctl("lease release " + std::to_string(lease_id_in(lease.output))).exit_code == 0);
  auto deleted_first = d.ctl("upsert " + model + " --base default/m@main --mode delete-first -q");
  REQUIRE_MESSAGE(deleted_first.exit_code == 0, deleted_first.output);
  CHECK(deleted_first.output.find("is COMPLETED") != std::string::npos);
  // --wait returns once the base is gone (no reader here: at once).
  auto waited = d.ctl("upsert " + model + " --base default/m@main --wait -q --request-id w");
  REQUIRE_MESSAGE(waited.exit_code == 0, waited.output);
  CHECK(waited.output.find("claim 'w' is COMPLETED") != std::string::npos);
  auto json = d.ctl("lineage default/m@main --json");
  CHECK(json.output.find("\"watermark\": 3") != std::string::npos);
  CHECK(json.output.find("\"phase\": \"COMPLETED\"") != std::string::npos);
  CHECK(d.ctl("lineage default/nothing@main").exit_code == 3);  // NOT_FOUND
}

TEST_CASE("cli upsert: kill -9 during the upload, restart, the same request id resumes the "
          "claim, the journal verifies") {
  // The kill must land while the target uploads: after its first payload, before
  // its last. A run that misses (the upload already finished) is tried again.
  for (int attempt = 1; attempt <= 3; ++attempt) {
    CAPTURE(attempt);
    temp_dir dir;
    for (int i = 0; i < 16; ++i)
      write_file(dir.path() / "big" / ("shard-" + std::to_string(i) + ".bin"),
                 pattern(4'000'000, static_cast<uint64_t>(i)));
    write_file(dir.path() / "small" / "w.bin", pattern(1000, 9));
    auto var = dir.path() / "var";
    std::string address;
    {
      running_daemon d{var};
      address = d.address;
      REQUIRE(d.ctl("import " + (dir.path() / "small").string() + " --as default/m@main -q")
                  .exit_code == 0);
      pid_t upload = fork();
      REQUIRE(upload >= 0);
      if (upload == 0) {
        execl("/bin/sh", "sh", "-c",
              ("exec " + std::string{WEIGHTD_WEIGHTCTL} + " --address " + d.address +
               " upsert " + (dir.path() / "big").string() +
               " --base default/m@main --request-id r1 -j 1 -q >/dev/null 2>&1")
                  .c_str(),
              static_cast<char*>(nullptr));
        _exit(127);
      }
      // The base's two puts, then the target's first payload: kill.
      REQUIRE(d.ctl("watch --from 1 --type object_put --count 3").exit_code == 0);
      kill(d.pid, SIGKILL);
      waitpid(d.pid, nullptr, 0);
      d.pid = -1;
      waitpid(upload, nullptr, 0);
    }
    auto verify = [&] {
      auto v = run_command(std::string{WEIGHTD_WEIGHTCTL} + " journal verify --data-dir " +
                           var.string());
      CHECK_MESSAGE(v.exit_code == 0, v.output);
    };
    verify();
    daemon_options o;
    o.listen = address;
    running_daemon d{var, o};
    auto lineage = d.ctl("lineage default/m@main");
    INFO(lineage.output);
    REQUIRE(lineage.output.find("r1") != std::string::npos);
    if (lineage.output.find("IMPORTING_TARGET") == std::string::npos) continue;  // missed
    // Another claim waits for this one; the same request id continues it.
    CHECK(d.ctl("upsert " + (dir.path() / "small").string() + " --base default/m@main -q")
              .exit_code == 7);  // BUSY
    auto resumed = d.ctl("upsert " + (dir.path() / "big").string() +
                         " --base default/m@main --request-id r1 --resume -q");
    REQUIRE_MESSAGE(resumed.exit_code == 0, resumed.output);
    CHECK(resumed.output.find("claim 'r1' is") != std::string::npos);
    CHECK(lineage_shows(d, "default/m@main", "COMPLETED"));
    auto out = dir.path() / "out";
    REQUIRE(d.ctl("export default/m@main " + out.string() + " -q").exit_code == 0);
    CHECK(read_file(out / "shard-15.bin") == pattern(4'000'000, 15));
    d.stop();
    verify();
    return;
  }
  FAIL("three kills in a row came after the upload had finished");
}
