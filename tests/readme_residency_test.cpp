// The README's "Memory and disk" section, end to end: the real daemon with
// the section's flags (a 128 MiB HOT tier, a reconciler round a minute) on
// free loopback ports, driven by the real weightctl with the section's
// commands, in its order. Every line the README shows is checked here; of a
// line with times in it, the parts around the times.
#include <doctest/doctest.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "daemon_fixture.hpp"

using namespace weightd::test;

namespace {

/// weightd as the section starts it (running_daemon takes only capacities).
struct residency_daemon {
  pid_t pid = -1;
  std::string address;

  explicit residency_daemon(const std::filesystem::path& dir) {
    address = "127.0.0.1:" + std::to_string(weightd::api::free_loopback_port());
    auto http = "127.0.0.1:" + std::to_string(weightd::api::free_loopback_port());
    std::vector<std::string> args{WEIGHTD_DAEMON,     "--data-dir",      dir.string(),
                                  "--hot-dir",        (dir / "hot").string(),
                                  "--listen",         address,
                                  "--http-listen",    http,
                                  "--hot-capacity",   "128MiB",
                                  "--reconcile-interval", "1m",
                                  "--log-level",      "warn"};
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(WEIGHTD_DAEMON, argv.data());
      _exit(127);
    }
    for (int i = 0; i < 200 && ctl("status").exit_code != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  residency_daemon(const residency_daemon&) = delete;
  residency_daemon& operator=(const residency_daemon&) = delete;
  ~residency_daemon() {
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
  }

  run_result ctl(const std::string& args) {
    return run_command(std::string{WEIGHTD_WEIGHTCTL} + " --address " + address + " " + args);
  }
};

/// Runs `args` (exit 0 required) and checks that every line of `shown` is in
/// its output.
std::string expect(residency_daemon& d, const std::string& args, std::vector<std::string> shown) {
  auto r = d.ctl(args);
  INFO("weightctl ", args, "\n", r.output);
  REQUIRE(r.exit_code == 0);
  for (const auto& line : shown) CHECK_MESSAGE(r.output.find(line) != std::string::npos, line);
  return r.output;
}

}  // namespace

TEST_CASE("readme residency: migrate, op show/ls/cancel, reconcile under pressure, spill") {
  temp_dir dir;
  // The section's stand-in models, made by the section's own shell loop.
  auto made = run_command("cd " + dir.path().string() +
                          " && for m in qwen-7b:32 phi-3:28 mistral-7b:32 gemma-7b:24; do d=${m%:*} "
                          "mib=${m#*:}\n    mkdir -p $d && truncate -s ${mib}M $d/model-00001.safetensors "
                          "$d/model-00002.safetensors\n    echo '{\"layers\": 32}' > $d/config.json; done");
  REQUIRE_MESSAGE(made.exit_code == 0, made.output);
  auto model = [&](const char* name) { return (dir.path() / name).string(); };
  residency_daemon d{dir.path() / "var-tiers"};

  // Migrate: COLD, MIXED, back to HOT.
  expect(d, "import " + model("qwen-7b") + " --as default/qwen-7b@main",
         {"imported default/qwen-7b@main#1: 3 files, 3 payloads, 64.0 MiB (READY)"});
  expect(d, "migrate default/qwen-7b@main --to COLD --wait",
         {"operation 1: MIGRATING default/qwen-7b@main#1 -> COLD, COMPLETED, 3/3 units, 64.0 MiB "
          "of 64.0 MiB"});
  expect(d, "migrate default/qwen-7b@main --to MIXED --ratio 0.5 --wait",
         {"operation 2: MIGRATING default/qwen-7b@main#1 -> MIXED (ratio 0.5), COMPLETED, 3/3 "
          "units, 64.0 MiB of 64.0 MiB"});
  expect(d, "obj ls weights/default/qwen-7b/",
         {"KEY                                                                SIZE  TIERS     TYPE "
          "    NOTES\n"
          "weights/default/qwen-7b/main/1/files/config.json                   15 B  COLD      WEIGHT "
          "  managed by default/qwen-7b@main#1\n"
          "weights/default/qwen-7b/main/1/files/model-00001.safetensors   32.0 MiB  HOT+COLD  WEIGHT "
          "  managed by default/qwen-7b@main#1\n"
          "weights/default/qwen-7b/main/1/files/model-00002.safetensors   32.0 MiB  COLD      WEIGHT "
          "  managed by default/qwen-7b@main#1\n"
          "weights/default/qwen-7b/main/1/manifest                         1.0 KiB  HOT       "
          "METADATA managed by default/qwen-7b@main#1\n"});
  expect(d, "migrate default/qwen-7b@main --to HOT --wait",
         {"operation 3: MIGRATING default/qwen-7b@main#1 -> HOT, COMPLETED, 3/3 units, 64.0 MiB of "
          "64.0 MiB"});
  expect(d, "ls",
         {"REVISION                                     STATE     RESIDENCY   GEN       SIZE  "
          "OPERATION\n"
          "default/qwen-7b@main#1                       READY     HOT           8   64.0 MiB\n"});

  // Operations: show a finished one; a lease holds a demotion back; cancel.
  expect(d, "op show 3",
         {"operation 3: MIGRATING default/qwen-7b@main#1 -> HOT, COMPLETED, 3/3 units, 64.0 MiB of "
          "64.0 MiB\n  started ",
          ", updated "});
  expect(d, "lease acquire default/qwen-7b@main --holder inference-7 --ttl 3600000",
         {"lease 1 on default/qwen-7b@main#1 held by inference-7 until "});
  expect(d, "migrate default/qwen-7b@main --to COLD",
         {"operation 4: MIGRATING default/qwen-7b@main#1 -> COLD, RUNNING, 0/3 units, 0 B of 64.0 "
          "MiB"});
  // The executor notes why it waits in its first round: give it that round.
  std::string listed;
  for (int i = 0; i < 100 && listed.find("wait for") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    listed = d.ctl("op ls").output;
  }
  CHECK_MESSAGE(listed.find("OP     REVISION                                 TO         UNITS      "
                            "            BYTES  MESSAGE\n"
                            "4      default/qwen-7b@main#1                   COLD         0/3      "
                            "     0 B/64.0 MiB  3 units wait for the revision's live leases to "
                            "end before its HOT replicas are dropped\n") == 0,
                listed);
  expect(d, "op cancel 4",
         {"operation 4: MIGRATING default/qwen-7b@main#1 -> COLD, CANCELLED, 0/3 units, 0 B of "
          "64.0 MiB; cancelled"});
  expect(d, "op ls", {"no running operations"});

  // The reconciler under memory pressure: the dry run, then the round.
  expect(d, "import " + model("phi-3") + " --as default/phi-3@main",
         {"imported default/phi-3@main#1: 3 files, 3 payloads, 56.0 MiB (READY)"});
  const std::vector<std::string> decision{
      "HOT 120.0 MiB of 128.0 MiB (93.8%): pressure\n"
      "REVISION                                 ACTION             TO     REASON\n"
      "default/phi-3@main#1                     demote             MIXED  pressure: HOT tier at "
      "93.8% of 128.0 MiB (high watermark 90.0%); least recently used (access at 20",
      "Z (", ")) with 56.0 MiB HOT; HOT -> MIXED frees about 28.0 MiB\n"};
  auto dry = expect(d, "reconcile --dry-run", decision);
  CHECK(std::count(dry.begin(), dry.end(), '\n') == 3);  // one decision: qwen-7b is leased
  expect(d, "reconcile", decision);
  std::string ls;
  for (int i = 0; i < 100 && ls.find("phi-3@main#1                         READY     MIXED    ") ==
                                 std::string::npos;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ls = d.ctl("ls").output;
  }
  CHECK_MESSAGE(ls ==
                    "REVISION                                     STATE     RESIDENCY   GEN       "
                    "SIZE  OPERATION\n"
                    "default/phi-3@main#1                         READY     MIXED         2   56.0 MiB\n"
                    "default/qwen-7b@main#1                       READY     HOT          10   64.0 MiB\n",
                ls);

  // Spill: 64 MiB into 36 MiB of free HOT; --preferred COLD.
  expect(d, "status", {"HOT          92.0 MiB used, 0 B reserved of 128.0 MiB\n"});
  expect(d, "import " + model("mistral-7b") + " --as default/mistral-7b@main",
         {"imported default/mistral-7b@main#1: 3 files, 3 payloads, 64.0 MiB (READY)"});
  expect(d, "import " + model("gemma-7b") + " --as default/gemma-7b@main --preferred COLD",
         {"imported default/gemma-7b@main#1: 3 files, 3 payloads, 48.0 MiB (READY)"});
  auto listed_all = d.ctl("ls").output;
  CHECK_MESSAGE(listed_all ==
                    "REVISION                                     STATE     RESIDENCY   GEN       "
                    "SIZE  OPERATION\n"
                    "default/gemma-7b@main#1                      READY     COLD          2   48.0 MiB\n"
                    "default/mistral-7b@main#1                    READY     MIXED         2   64.0 MiB\n"
                    "default/phi-3@main#1                         READY     MIXED         2   56.0 MiB\n"
                    "default/qwen-7b@main#1                       READY     HOT          10   64.0 MiB\n",
                listed_all);
  expect(d, "obj ls weights/default/mistral-7b/",
         {"KEY                                                                   SIZE  TIERS     "
          "TYPE     NOTES\n"
          "weights/default/mistral-7b/main/1/files/config.json                   15 B  HOT       "
          "WEIGHT   managed by default/mistral-7b@main#1\n"
          "weights/default/mistral-7b/main/1/files/model-00001.safetensors   32.0 MiB  HOT       "
          "WEIGHT   managed by default/mistral-7b@main#1\n"
          "weights/default/mistral-7b/main/1/files/model-00002.safetensors   32.0 MiB  COLD      "
          "WEIGHT   managed by default/mistral-7b@main#1\n"
          "weights/default/mistral-7b/main/1/manifest                         1.0 KiB  HOT       "
          "METADATA managed by default/mistral-7b@main#1\n"});
  // The spill is pressure too: the next round moves mistral-7b on to COLD.
  expect(d, "reconcile --dry-run",
         {"default/mistral-7b@main#1                demote             COLD   pressure: HOT tier "
          "at 96.9% of 128.0 MiB (high watermark 90.0%, a put had to spill)",
          "MIXED -> COLD"});
}
