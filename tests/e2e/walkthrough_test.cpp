// The README walk-through, end to end: the real daemon on a free loopback
// port, driven by the real weightctl: import a model directory, list it,
// export it byte-identical, remove it, verify the journal; and an import that
// cannot fit is aborted with nothing left behind.
#include <doctest/doctest.h>

#include <fstream>
#include <thread>

#include "daemon_fixture.hpp"

using namespace weightd::test;

TEST_CASE("walkthrough: import, ls, export byte-identical, rm, verify") {
  temp_dir dir;
  auto model = dir.path() / "model";
  write_file(model / "model-00001.safetensors", pattern((64u << 20) + 12345, 1));  // two payloads
  write_file(model / "config.json", "{\"architecture\":\"tiny\"}");
  write_file(model / "tokenizer" / "vocab.bin", pattern(50000, 2));
  running_daemon d{dir.path() / "var"};

  auto imported = d.ctl("import " + model.string() + " --as default/tiny-llm@main --quiet");
  REQUIRE_MESSAGE(imported.exit_code == 0, imported.output);
  CHECK(imported.output.find("imported default/tiny-llm@main#1: 3 files, 4 payloads") == 0);
  auto ls = d.ctl("ls");
  CHECK(ls.output.find("REVISION ") == 0);  // the header
  CHECK(ls.output.find("\ndefault/tiny-llm@main#1 ") != std::string::npos);
  CHECK(ls.output.find("READY") != std::string::npos);

  auto out = dir.path() / "exported";
  auto exported = d.ctl("export default/tiny-llm@main " + out.string());
  REQUIRE_MESSAGE(exported.exit_code == 0, exported.output);
  for (auto rel : {"model-00001.safetensors", "config.json", "tokenizer/vocab.bin"})
    CHECK(read_file(out / rel) == read_file(model / rel));

  CHECK(d.ctl("show default/tiny-llm@main --json").output.find("\"availability\": \"READY\"") !=
        std::string::npos);
  auto removed = d.ctl("rm default/tiny-llm@main");
  CHECK(removed.output.find("removed default/tiny-llm@main#1: 5 objects, manifest last") == 0);
  CHECK(d.ctl("ls").output == "no READY or DEGRADED revisions in namespace default (--all shows every state)\n");
  CHECK(d.ctl("export default/tiny-llm@main " + out.string()).exit_code == 3);  // NOT_FOUND
  auto verify = run_command(std::string{WEIGHTD_WEIGHTCTL} + " journal verify --data-dir " +
                            (dir.path() / "var").string());
  CHECK(verify.exit_code == 0);
}

TEST_CASE("walkthrough: an import that fits neither HOT nor COLD is aborted and leaves nothing behind") {
  temp_dir dir;
  auto model = dir.path() / "model";
  write_file(model / "a.bin", pattern(600000, 1));
  write_file(model / "b.bin", pattern(600000, 2));  // together more than either tier holds
  running_daemon d{dir.path() / "var", "1000000", "500000"};
  auto r = d.ctl("import " + model.string() + " --as default/too-big@main");
  CHECK(r.exit_code == 15);  // NO_AVAILABLE_SPACE
  CHECK(r.output.find("NO_AVAILABLE_SPACE") != std::string::npos);
  CHECK(r.output.find("the import was aborted and its") != std::string::npos);
  CHECK(d.ctl("status").output.find("objects      0") != std::string::npos);
  CHECK(d.ctl("ls --all").output.find("DELETED") != std::string::npos);
  CHECK(d.ctl("bogus").exit_code == 1);
  auto unreachable = run_command(std::string{WEIGHTD_WEIGHTCTL} + " --address 127.0.0.1:1 status");
  CHECK(unreachable.exit_code == 69);  // its own code, not BUSY; says what to check
  CHECK(unreachable.output.find("is weightd running there?") != std::string::npos);
}

TEST_CASE("walkthrough: a daemon restart keeps every READY revision and its bytes") {
  temp_dir dir;
  auto model = dir.path() / "model";
  write_file(model / "weights.bin", pattern(3 << 20, 5));
  write_file(model / "config.json", "{}");
  {
    running_daemon d{dir.path() / "var"};
    REQUIRE(d.ctl("import " + model.string() + " --as default/keep@main").exit_code == 0);
  }
  running_daemon again{dir.path() / "var"};
  CHECK(again.ctl("ls").output.find("\ndefault/keep@main#1 ") != std::string::npos);
  auto out = dir.path() / "out";
  REQUIRE(again.ctl("export default/keep@main " + out.string()).exit_code == 0);
  CHECK(read_file(out / "weights.bin") == read_file(model / "weights.bin"));
}

TEST_CASE("walkthrough: SIGTERM during an import never leaves a half-published revision") {
  temp_dir dir;
  auto model = dir.path() / "model";
  for (int i = 0; i < 24; ++i)
    write_file(model / ("shard-" + std::to_string(i) + ".bin"), pattern(4 << 20, static_cast<unsigned>(i)));
  auto data = dir.path() / "var";
  std::string address;
  {
    running_daemon d{data};
    address = d.address;
    pid_t importer = fork();
    REQUIRE(importer >= 0);
    if (importer == 0) {
      auto cmd = std::string{WEIGHTD_WEIGHTCTL} + " --address " + d.address + " import " +
                 model.string() + " --as default/interrupted@main > /dev/null 2>&1";
      _exit(system(cmd.c_str()) == 0 ? 0 : 1);
    }
    // Wait until some payloads landed, then stop the daemon mid-import.
    for (int i = 0; i < 400; ++i) {
      auto puts = run_command(std::string{WEIGHTD_WEIGHTCTL} + " journal dump --type object_put --data-dir " +
                              data.string());
      if (std::count(puts.output.begin(), puts.output.end(), '\n') >= 3) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    d.stop();
    int status = 0;
    waitpid(importer, &status, 0);
    CHECK(WEXITSTATUS(status) != 0);  // the import saw the daemon go away
  }
  running_daemon after{data};
  CHECK(after.ctl("ls").output.find("no READY or DEGRADED revisions") == 0);  // nothing READY
  auto shown = after.ctl("show default/interrupted@main#1 --json");
  CHECK(shown.output.find("\"availability\": \"READY\"") == std::string::npos);
  bool importing_or_gone = shown.output.find("IMPORTING") != std::string::npos ||
                           shown.output.find("DELETED") != std::string::npos;
  CHECK_MESSAGE(importing_or_gone, shown.output);
}
