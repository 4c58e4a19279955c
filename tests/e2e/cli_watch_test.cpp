// weightctl watch and history --address end to end: the real daemon and the
// real weightctl (SPEC §4 History and Watch, §7 weightctl).
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "daemon_fixture.hpp"

using namespace weightd;
using namespace weightd::test;

namespace {

/// The seq of each event line weightctl printed ("#12 <time> ...").
std::vector<uint64_t> seqs_in(const std::string& output) {
  std::vector<uint64_t> seqs;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);)
    if (line.size() > 1 && line[0] == '#') seqs.push_back(std::stoull(line.substr(1)));
  return seqs;
}

std::string read_all(const std::filesystem::path& file) {
  std::ifstream in(file);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// `weightctl --address A watch ARGS` in the background, stdout to a file.
struct background_watch {
  pid_t pid = -1;
  background_watch(const std::string& address, const std::string& args,
                   const std::filesystem::path& out) {
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd < 0) _exit(126);
      dup2(fd, STDOUT_FILENO);
      execl("/bin/sh", "sh", "-c",
            ("exec " + std::string{WEIGHTD_WEIGHTCTL} + " --address " + address + " watch " + args)
                .c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~background_watch() {
    kill(pid, SIGTERM);
    waitpid(pid, nullptr, 0);
  }
};

/// Waits up to 10 s until `file` holds `text`.
bool shows(const std::filesystem::path& file, const std::string& text) {
  for (int i = 0; i < 400; ++i) {
    if (read_all(file).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return false;
}

}  // namespace

TEST_CASE("cli watch: events from --from in order, only the --type asked, NDJSON with --json") {
  temp_dir dir;
  write_file(dir.path() / "model" / "w.bin", pattern(10'000, 1));
  running_daemon d{dir.path() / "var"};
  REQUIRE(d.ctl("import " + (dir.path() / "model").string() + " --as default/m@main -q").exit_code == 0);

  auto all = d.ctl("watch --from 1 --count 4");
  REQUIRE_MESSAGE(all.exit_code == 0, all.output);
  CHECK(seqs_in(all.output) == std::vector<uint64_t>{1, 2, 3, 4});
  CHECK(all.output.find("writer_started") != std::string::npos);

  auto committed = d.ctl("watch --from 1 --count 1 --type import_committed --json");
  REQUIRE_MESSAGE(committed.exit_code == 0, committed.output);
  CHECK(committed.output.find("\"import_committed\": {") != std::string::npos);
  CHECK(committed.output.find("\"global_seq\": ") == 1);  // one JSON object per line

  CHECK(d.ctl("watch --type no_such_event").exit_code == 2);  // INVALID_ARGUMENT, names --type
}

TEST_CASE("cli watch: it carries on by itself across a daemon restart, with no gap and no "
          "duplicate") {
  temp_dir dir;
  write_file(dir.path() / "model" / "w.bin", pattern(10'000, 2));
  auto out = dir.path() / "watch.out";
  daemon_options first;
  first.flags = {"--hot-capacity-bytes", "1073741824"};
  auto d = std::make_unique<running_daemon>(dir.path() / "var", first);
  std::string address = d->address;
  background_watch watch{address, "--from 1", out};
  REQUIRE(d->ctl("import " + (dir.path() / "model").string() + " --as default/m@main -q").exit_code == 0);
  REQUIRE(shows(out, "import_committed"));

  d->stop();
  daemon_options again = first;
  again.listen = address;  // the same address: the watcher finds it there
  d = std::make_unique<running_daemon>(dir.path() / "var", again);
  REQUIRE(d->ctl("lease acquire default/m@main --holder after-restart").exit_code == 0);
  REQUIRE(shows(out, "after-restart"));

  auto seqs = seqs_in(read_all(out));
  REQUIRE(!seqs.empty());
  for (size_t i = 0; i < seqs.size(); ++i) CHECK(seqs[i] == i + 1);  // 1, 2, 3, ... to the end
  auto text = read_all(out);
  CHECK(text.find("writer_id\": 2") != std::string::npos);  // the second daemon's events too
}

TEST_CASE("cli history: --address asks the daemon and prints what the offline form prints, "
          "lease id and holder included") {
  temp_dir dir;
  write_file(dir.path() / "model" / "w.bin", pattern(10'000, 3));
  running_daemon d{dir.path() / "var"};
  REQUIRE(d.ctl("import " + (dir.path() / "model").string() + " --as default/m@main -q").exit_code == 0);
  REQUIRE(d.ctl("lease acquire default/m@main --holder reader-9").exit_code == 0);

  auto online = d.ctl("history default/m@main#1");
  REQUIRE_MESSAGE(online.exit_code == 0, online.output);
  CHECK(online.output.find("lease_granted") != std::string::npos);
  CHECK(online.output.find("lease 1 reader-9") != std::string::npos);
  auto offline = run_command(std::string{WEIGHTD_WEIGHTCTL} + " --data-dir " +
                             (dir.path() / "var").string() + " history default/m@main#1");
  CHECK(offline.output == online.output);
  CHECK(d.ctl("history default/nothing@main#1").exit_code == 3);  // NOT_FOUND
}
