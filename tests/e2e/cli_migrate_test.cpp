// Residency end to end: the real daemon driven by the real weightctl
// (SPEC §4 Migrate, GetOperation, CancelOperation, Reconcile; §2 Spill; §7
// weightctl migrate, op, reconcile, import --preferred).
#include <doctest/doctest.h>

#include <thread>

#include "daemon_fixture.hpp"

using namespace weightd;
using namespace weightd::test;

namespace {

struct model_dir {
  std::filesystem::path root;
  explicit model_dir(const std::filesystem::path& at) : root(at) {
    write_file(root / "config.json", "{\"layers\": 2}");
    write_file(root / "model-00001.safetensors", pattern(300'000, 1));
    write_file(root / "model-00002.safetensors", pattern(200'000, 2));
  }
  /// The exported copy holds the same files with the same bytes.
  void check_same(const std::filesystem::path& copy) const {
    for (const char* f : {"config.json", "model-00001.safetensors", "model-00002.safetensors"})
      CHECK_MESSAGE(read_file(copy / f) == read_file(root / f), f);
  }
};

uint64_t operation_id_in(const std::string& output) {
  auto at = output.find("operation ");
  REQUIRE(at != std::string::npos);
  return std::stoull(output.substr(at + 10));
}

}  // namespace

TEST_CASE("cli migrate: HOT to COLD to MIXED to HOT with --wait, bytes identical after each") {
  temp_dir dir;
  model_dir model{dir.path() / "model"};
  running_daemon d{dir.path() / "var"};
  REQUIRE(d.ctl("import " + model.root.string() + " --as default/m@main").exit_code == 0);
  int n = 0;
  for (const char* target : {"COLD", "MIXED", "HOT"}) {
    CAPTURE(target);
    auto moved = d.ctl(std::string{"migrate default/m@main --wait --to "} + target);
    REQUIRE_MESSAGE(moved.exit_code == 0, moved.output);
    CHECK(moved.output.find("COMPLETED") != std::string::npos);
    auto shown = d.ctl("show default/m@main --json");
    CHECK(shown.output.find(std::string{"\"residency\": \""} + target + "\"") != std::string::npos);
    auto out = dir.path() / ("export-" + std::to_string(n++));
    auto exported = d.ctl("export default/m@main " + out.string());
    REQUIRE_MESSAGE(exported.exit_code == 0, exported.output);
    model.check_same(out);
  }
  auto id = operation_id_in(d.ctl("migrate default/m@main --to HOT").output);  // already there
  auto op = d.ctl("op show " + std::to_string(id));
  CHECK(op.exit_code == 0);
  CHECK(op.output.find("MIGRATING default/m@main#1 -> HOT") != std::string::npos);
  CHECK(d.ctl("op show 999").exit_code == 3);  // NOT_FOUND
  CHECK(d.ctl("migrate default/m@main --to WARM").exit_code == 2);  // INVALID_ARGUMENT
  auto verify = run_command(std::string{WEIGHTD_WEIGHTCTL} + " journal verify --data-dir " +
                            (dir.path() / "var").string());
  CHECK_MESSAGE(verify.exit_code == 0, verify.output);
}

TEST_CASE("cli migrate: a lease holds the HOT replicas back, op ls shows it, op cancel ends it whole") {
  temp_dir dir;
  model_dir model{dir.path() / "model"};
  running_daemon d{dir.path() / "var"};
  REQUIRE(d.ctl("import " + model.root.string() + " --as default/m@main").exit_code == 0);
  REQUIRE(d.ctl("lease acquire default/m@main --holder server --ttl 60s").exit_code == 0);
  auto started = d.ctl("migrate default/m@main --to COLD");
  REQUIRE_MESSAGE(started.exit_code == 0, started.output);
  auto id = operation_id_in(started.output);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto listed = d.ctl("op ls");
  CHECK(listed.output.find("OP") == 0);  // the header
  CHECK(listed.output.find("default/m@main#1") != std::string::npos);
  CHECK(listed.output.find("lease") != std::string::npos);  // why it waits
  CHECK(d.ctl("ls").output.find("  op " + std::to_string(id) + " -> COLD ") != std::string::npos);
  auto cancelled = d.ctl("op cancel " + std::to_string(id));
  REQUIRE_MESSAGE(cancelled.exit_code == 0, cancelled.output);
  CHECK(cancelled.output.find("CANCELLED") != std::string::npos);
  CHECK(d.ctl("op ls").output.find("no running operations") != std::string::npos);
  auto out = dir.path() / "export";
  REQUIRE(d.ctl("export default/m@main " + out.string()).exit_code == 0);
  model.check_same(out);
}

TEST_CASE("cli migrate: policy COLD no longer wedges the revision and rm works afterwards") {
  temp_dir dir;
  model_dir model{dir.path() / "model"};
  running_daemon d{dir.path() / "var"};
  REQUIRE(d.ctl("import " + model.root.string() + " --as default/m@main").exit_code == 0);
  REQUIRE(d.ctl("policy default/m@main --preferred COLD").exit_code == 0);
  bool cold = false;
  for (int i = 0; i < 100 && !cold; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto shown = d.ctl("show default/m@main --json").output;
    cold = shown.find("\"residency\": \"COLD\"") != std::string::npos &&
           shown.find("\"operation_id\": 0,") != std::string::npos;
  }
  CHECK(cold);
  auto removed = d.ctl("rm default/m@main");
  CHECK_MESSAGE(removed.exit_code == 0, removed.output);
}

TEST_CASE("cli import: --preferred COLD writes straight to COLD and a full HOT tier spills") {
  temp_dir dir;
  model_dir model{dir.path() / "model"};
  running_daemon d{dir.path() / "var", "400000"};  // HOT holds one of the two weight files
  auto cold = d.ctl("import " + model.root.string() + " --as default/cold@main --preferred COLD");
  REQUIRE_MESSAGE(cold.exit_code == 0, cold.output);
  CHECK(d.ctl("show default/cold@main --json").output.find("\"residency\": \"COLD\"") !=
        std::string::npos);
  auto big = d.ctl("import " + model.root.string() + " --as default/hot@main");
  REQUIRE_MESSAGE(big.exit_code == 0, big.output);  // never NO_AVAILABLE_SPACE while COLD has room
  auto shown = d.ctl("show default/hot@main --json").output;
  CHECK(shown.find("\"availability\": \"READY\"") != std::string::npos);
  // Spilled: part of it is on disk (and the spill is pressure, so the
  // reconciler may already have moved the rest).
  CHECK(shown.find("\"residency\": \"HOT\"") == std::string::npos);
  auto out = dir.path() / "export";
  REQUIRE(d.ctl("export default/hot@main " + out.string()).exit_code == 0);
  model.check_same(out);
  auto dry = d.ctl("reconcile --dry-run");
  CHECK_MESSAGE(dry.exit_code == 0, dry.output);
  CHECK(dry.output.find("HOT ") == 0);
}

TEST_CASE("cli migrate --wait: the operation's own progress, the lease it waits for by holder, and "
          "Ctrl-C leaves it running with the command that cancels it") {
  temp_dir dir;
  model_dir model{dir.path() / "model"};
  running_daemon d{dir.path() / "var"};
  REQUIRE(d.ctl("import " + model.root.string() + " --as default/m@main").exit_code == 0);
  REQUIRE(d.ctl("lease acquire default/m@main --holder server --ttl 60s").exit_code == 0);
  auto waited = run_command("timeout --preserve-status -s INT 3 " + std::string{WEIGHTD_WEIGHTCTL} +
                            " --address " + d.address + " migrate default/m@main --wait --to COLD");
  CHECK(waited.exit_code == 130);
  CHECK_MESSAGE(waited.output.find("units moved") != std::string::npos, waited.output);
  CHECK(waited.output.find("[1/") == std::string::npos);  // the record's count, not a file counter
  CHECK(waited.output.find("held back by 'server' (lease 1)") != std::string::npos);
  CHECK(waited.output.find("goes on in the daemon") != std::string::npos);
  CHECK(waited.output.find("`weightctl op cancel ") != std::string::npos);
  CHECK(d.ctl("op ls").output.find("default/m@main#1") != std::string::npos);  // still running
}
