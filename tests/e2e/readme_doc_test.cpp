// The README's Walk-through section is this test's input: its shell blocks
// are read from README.md, every `$ ` command in them is run against a real
// weightd started by the test, and what the command prints must be the README
// lines under it. Nothing of the expected output is copied here, so a README
// edit or a change of weightctl's output that makes the two disagree fails,
// naming the README line.
//
// How a README command is run (in a fresh directory that holds `my-model`,
// the daemon's `./var` and whatever the commands create):
//   - `weightctl` is a shell function calling the built weightctl
//     (WEIGHTD_WEIGHTCTL) with `--address` of the test daemon; the README's
//     `alias weightctl=...` line is therefore not run (it must show no output);
//   - `localhost:7071` (the README's HTTP address) is the test daemon's;
//   - `./scripts/dev.sh daemon` is not run: the test starts weightd with the
//     same defaults instead (only --listen, --http-listen and --hot-dir
//     differ), and the line under it must be weightd's startup log line;
//   - `./build/api/weightd FLAGS` (Memory and disk) starts weightd with the
//     README's flags, --hot-dir moved into the test directory;
//   - a command that opens a `do` goes on over the following lines until its
//     `done`; everything else is run by bash with LC_ALL=C;
//   - a read-only command (ls, status, show, history, journal verify, op
//     ls/show, obj ls, lease ls, reconcile --dry-run, curl) whose output does
//     not match yet is re-run for up to 10 s: the daemon's background work
//     (a drain, a reconciler round) settles. Exit codes are not compared: the
//     README shows one where it matters (`; echo "exit $?"`).
//
// The normalization, applied alike to the README's lines and to the real
// output (and nothing else differs):
//   1. a UTC time 2026-12-02T14:03:44Z or 2026-12-02T14:03:44.874Z -> <UTC>;
//   2. a relative time "(in 59 s)", "(in 59.9 s)", "(3 min ago)", "(now)"
//      -> (<relative>);
//   3. a peer address ipv4:127.0.0.1:47998 -> ipv4:127.0.0.1:<port>;
//   4. the test daemon's gRPC and HTTP addresses -> the README's
//      127.0.0.1:7070 and 127.0.0.1:7071;
//   5. the startup line's timing startup_seconds=0.004 -> startup_seconds=<s>;
//   5a. a request id weightctl-983d2a4c4424b2ab -> weightctl-<id>, and the
//      default lease holder weightctl-export@vm:23384 -> weightctl-export@<host>:<pid>;
//   6. a README line that is exactly `...` matches any number of output lines
//      (up to the next README line that matches; at the end: any further lines).
#include <doctest/doctest.h>

#include <fcntl.h>

#include <functional>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "daemon_fixture.hpp"

namespace fs = std::filesystem;
using namespace weightd::test;

namespace weightd::test::readme {

struct readme_line {
  int number = 0;  // 1-based, in README.md
  std::string text;
};

struct shell_block {
  std::string heading;  // the nearest heading above it, without the #s
  std::vector<readme_line> lines;
};

/// The ```sh blocks of README.md's "## Walk-through" section (its ###
/// subsections included), in order.
std::vector<shell_block> walkthrough_blocks(const std::string& readme_text) {
  std::vector<shell_block> blocks;
  std::istringstream in(readme_text);
  std::string line, heading;
  bool in_section = false, in_block = false;
  for (int number = 1; std::getline(in, line); ++number) {
    if (in_block) {
      if (line == "```")
        in_block = false;
      else
        blocks.back().lines.push_back({number, line});
      continue;
    }
    if (line.rfind("## ", 0) == 0) {
      in_section = line == "## Walk-through";
      heading = line.substr(3);
    } else if (line.rfind("### ", 0) == 0) {
      heading = line.substr(4);
    } else if (in_section && line == "```sh") {
      in_block = true;
      blocks.push_back({heading, {}});
    }
  }
  return blocks;
}

struct step {
  int line = 0;  // of the `$ ` line
  std::string command;
  std::vector<readme_line> expected;
};

int count_token(const std::string& s, const std::string& token) {
  int n = 0;
  std::string word;
  for (char c : s + " ") {
    if (c == ' ' || c == ';' || c == '\n' || c == '\t') {
      if (word == token) ++n;
      word.clear();
    } else {
      word += c;
    }
  }
  return n;
}

/// A block's commands with the lines under each.
std::vector<step> steps_of(const shell_block& block) {
  std::vector<step> steps;
  for (size_t i = 0; i < block.lines.size(); ++i) {
    const auto& l = block.lines[i];
    if (l.text.rfind("$ ", 0) == 0) {
      step s{l.number, l.text.substr(2), {}};
      while (count_token(s.command, "do") > count_token(s.command, "done") && i + 1 < block.lines.size())
        s.command += "\n" + block.lines[++i].text;
      steps.push_back(std::move(s));
    } else {
      if (steps.empty()) throw std::runtime_error("README.md:" + std::to_string(l.number) +
                                                  ": output before any `$ ` command: " + l.text);
      steps.back().expected.push_back(l);
    }
  }
  return steps;
}

struct addresses {
  std::string grpc, http;
  std::string standby_grpc, standby_http;  // a standby's, shown as 127.0.0.1:7080 and :7081
};

/// Normalization rules 1-5 (see the top of this file).
std::string normalize(std::string s, const addresses& a) {
  static const std::regex utc{R"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z)"};
  static const std::regex relative{R"(\((in [0-9.]+ [a-z]+|[0-9.]+ [a-z]+ ago|now)\))"};
  static const std::regex peer{R"(ipv4:127\.0\.0\.1:[0-9]+)"};
  static const std::regex startup{R"(startup_seconds=[0-9.]+)"};
  static const std::regex request_id{R"(weightctl-[0-9a-f]{16})"};  // one per command
  static const std::regex holder{R"((weightctl-[a-z]+)@[^ :]+:[0-9]+)"};  // default_holder()
  s = std::regex_replace(s, utc, "<UTC>");
  s = std::regex_replace(s, relative, "(<relative>)");
  s = std::regex_replace(s, peer, "ipv4:127.0.0.1:<port>");
  s = std::regex_replace(s, startup, "startup_seconds=<s>");
  s = std::regex_replace(s, request_id, "weightctl-<id>");
  s = std::regex_replace(s, holder, "$1@<host>:<pid>");
  auto replace_all = [&](const std::string& from, const std::string& to) {
    if (from.empty()) return;
    for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size())
      s.replace(at, from.size(), to);
  };
  replace_all(a.grpc, "127.0.0.1:7070");
  replace_all(a.http, "127.0.0.1:7071");
  replace_all(a.standby_grpc, "127.0.0.1:7080");
  replace_all(a.standby_http, "127.0.0.1:7081");
  return s;
}

std::vector<std::string> split_lines(const std::string& output) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

/// "" when `output` is what `expected` shows (after normalization, with rule
/// 6); otherwise the README line, the command, the expected and actual lines.
std::string mismatch(const step& s, const std::string& output, const addresses& a) {
  auto actual = split_lines(output);
  for (auto& l : actual) l = normalize(l, a);
  auto report = [&](int line, const std::string& want, const std::string& got) {
    std::string r = "README.md:" + std::to_string(line) + ": `$ " + s.command + "` (README.md:" +
                    std::to_string(s.line) + ")\n  expected: " + want + "\n  actual:   " + got +
                    "\n  whole output:\n";
    for (const auto& l : split_lines(output)) r += "    " + l + "\n";
    return r;
  };
  size_t j = 0;
  for (size_t i = 0; i < s.expected.size(); ++i) {
    const auto& e = s.expected[i];
    if (e.text == "...") {
      if (i + 1 == s.expected.size()) return "";  // any further lines
      auto next = normalize(s.expected[i + 1].text, a);
      while (j < actual.size() && actual[j] != next) ++j;
      continue;
    }
    auto want = normalize(e.text, a);
    if (j >= actual.size()) return report(e.number, want, "(no more output)");
    if (actual[j] != want) return report(e.number, want, actual[j]);
    ++j;
  }
  if (j < actual.size()) {
    int after = s.expected.empty() ? s.line : s.expected.back().number;
    return report(after + 1, "(no more output)", actual[j]);
  }
  return "";
}

bool read_only(const std::string& command) {
  static const std::regex r{
      R"(^(weightctl (--address \S+ )?(ls|status|show|history|journal verify|op ls|op show|obj ls|lease ls|reconcile --dry-run)( |$)|curl ))"};
  return std::regex_search(command, r);
}

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string{"'\\''"} : std::string(1, c);
  return q + "'";
}

/// weightd started in `cwd` with `flags`, its output in `log`.
struct daemon_process {
  pid_t pid = -1;
  addresses at;
  fs::path log;

  daemon_process(const fs::path& cwd, std::vector<std::string> flags, fs::path log_file)
      : log(std::move(log_file)) {
    at.grpc = "127.0.0.1:" + std::to_string(api::free_loopback_port());
    at.http = "127.0.0.1:" + std::to_string(api::free_loopback_port());
    std::vector<std::string> args{WEIGHTD_DAEMON};
    args.insert(args.end(), flags.begin(), flags.end());
    for (const auto& a : {"--listen", at.grpc.c_str(), "--http-listen", at.http.c_str()}) args.push_back(a);
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      if (chdir(cwd.c_str()) != 0) _exit(126);
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0) _exit(126);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(WEIGHTD_DAEMON, argv.data());
      _exit(127);
    }
    bool up = false;
    for (int i = 0; i < 400 && !up; ++i) {
      up = run_command(std::string{WEIGHTD_WEIGHTCTL} + " --address " + at.grpc + " status").exit_code == 0;
      if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    REQUIRE_MESSAGE(up, (std::string{"weightd did not start: "} + read_file(log)));
  }
  daemon_process(const daemon_process&) = delete;
  daemon_process& operator=(const daemon_process&) = delete;
  ~daemon_process() {
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
  }
};

/// One run of README blocks: a directory, the daemon the blocks start, and
/// the commands run so far.
class session {
 public:
  explicit session(std::function<void(const fs::path&)> prepare = {}) {
    if (prepare) prepare(dir_.path());
  }

  /// Runs every step of `block`; CHECKs each against the README.
  void run(const shell_block& block) {
    for (const auto& s : steps_of(block)) run(s);
  }

  /// Runs `command` (README syntax) as a block command would be run.
  run_result shell(const std::string& command) {
    REQUIRE_MESSAGE((daemon_ || standby_), (std::string{"no daemon started before `"} + command + "`"));
    auto script = dir_.path() / "step.sh";
    std::string cmd = command;
    auto at = now();
    auto replace_all = [&](const std::string& from, const std::string& to) {
      for (size_t i = 0; (i = cmd.find(from, i)) != std::string::npos; i += to.size())
        cmd.replace(i, from.size(), to);
    };
    replace_all("localhost:7071", at.http);
    replace_all("weightctl --address 127.0.0.1:7080", quoted(WEIGHTD_WEIGHTCTL) + " --address " +
                                                          at.standby_grpc);
    write_file(script, "cd " + quoted(dir_.path().string()) + " || exit 99\nexport LC_ALL=C\n" +
                           "weightctl() { " + quoted(WEIGHTD_WEIGHTCTL) + " --address " +
                           (at.grpc.empty() ? at.standby_grpc : at.grpc) + " \"$@\"; }\n" +
                           cmd + "\n");
    return run_command("bash " + quoted(script.string()));
  }

  int commands_run() const { return commands_; }
  const fs::path& dir() const { return dir_.path(); }

 private:
  void run(const step& s) {
    ++commands_;
    const auto& c = s.command;
    if (c.rfind("alias weightctl=", 0) == 0) {  // weightctl is a shell function here
      CHECK_MESSAGE(s.expected.empty(), (std::string{"README.md:"} + std::to_string(s.line) + ": output under the alias line"));
      return;
    }
    if (c.rfind("./scripts/dev.sh daemon", 0) == 0) {
      start({"--hot-dir", (dir_.path() / "hot").string()});
      std::string ready;
      for (int i = 0; i < 200 && ready.empty(); ++i) {
        for (const auto& l : split_lines(read_file(daemon_->log)))
          if (l.find(" weightd ready ") != std::string::npos) ready = l;
        if (ready.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      auto wrong = mismatch(s, ready + "\n", daemon_->at);
      CHECK_MESSAGE(wrong.empty(), wrong);
      return;
    }
    if (c.rfind("./build/api/weightd ", 0) == 0) {
      // The README's flags; the hot tier moves into the test directory, the
      // test's own ports replace --listen and --http-listen (and --log-level is
      // warn), and a standby's
      // --follow names the leader started before. A trailing & is the shell's.
      std::vector<std::string> flags;
      std::istringstream words(c.substr(20));
      bool follows = false;
      for (std::string w; words >> w;) {
        if (w == "&") continue;
        if (w == "--listen" || w == "--http-listen" || w == "--log-level") {
          words >> w;
          continue;
        }
        if (!flags.empty() && flags.back() == "--hot-dir") w = (dir_.path() / ("hot-" + fs::path(w).filename().string())).string();
        if (!flags.empty() && flags.back() == "--follow") {
          REQUIRE_MESSAGE(daemon_ != nullptr, (std::string{"README.md:"} + std::to_string(s.line) + ": a standby before its leader"));
          w = daemon_->at.grpc;
          follows = true;
        }
        flags.push_back(w);
      }
      flags.insert(flags.end(), {"--log-level", "warn"});
      if (follows) standby_ = std::make_unique<daemon_process>(dir_.path(), flags, dir_.path() / "standby.log");
      else start(flags);
      CHECK_MESSAGE(s.expected.empty(), (std::string{"README.md:"} + std::to_string(s.line) + ": output under the weightd line"));
      return;
    }
    if (c == "kill %1") {  // the README's first background job: the leader
      REQUIRE_MESSAGE(standby_ != nullptr, (std::string{"README.md:"} + std::to_string(s.line) + ": kill %1 without a standby"));
      daemon_.reset();
      // What the README's next line waits for: the standby saw its leader go.
      for (int i = 0; i < 200 && shell("weightctl --address 127.0.0.1:7080 status").output.find("following    no") == std::string::npos; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      return;
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    std::string wrong;
    for (;;) {
      auto r = shell(c);
      wrong = mismatch(s, r.output, now());
      if (wrong.empty() || !read_only(c) || std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    CHECK_MESSAGE(wrong.empty(), wrong);
  }

  void start(const std::vector<std::string>& flags) {
    daemon_.reset();  // the README stops the previous one first
    daemon_ = std::make_unique<daemon_process>(dir_.path(), flags, dir_.path() / "weightd.log");
  }

  /// The addresses of the daemons running now.
  addresses now() const {
    addresses a;
    if (daemon_) a = daemon_->at;
    if (standby_) {
      a.standby_grpc = standby_->at.grpc;
      a.standby_http = standby_->at.http;
    }
    return a;
  }

  temp_dir dir_;
  std::unique_ptr<daemon_process> daemon_;
  std::unique_ptr<daemon_process> standby_;  // `./build/api/weightd --follow ...`
  int commands_ = 0;
};

std::string readme_text() {
  auto text = read_file(fs::path{WEIGHTD_SOURCE_DIR} / "README.md");
  REQUIRE_MESSAGE(!text.empty(), "cannot read " WEIGHTD_SOURCE_DIR "/README.md");
  return text;
}

/// The blocks under headings that start with `heading`.
std::vector<shell_block> blocks_under(const std::string& heading) {
  std::vector<shell_block> out;
  for (auto& b : walkthrough_blocks(readme_text()))
    if (b.heading.rfind(heading, 0) == 0) out.push_back(std::move(b));
  return out;
}

}  // namespace weightd::test::readme

using namespace weightd::test::readme;

namespace {

/// The README's `my-model`: 4 files, 5 payloads (the first file is more than
/// 64 MiB), 105.4 MiB in all; sparse files, so cheap to make.
void make_my_model(const fs::path& dir) {
  auto model = dir / "my-model";
  fs::create_directories(model);
  auto sized = [&](const char* name, uintmax_t bytes) {
    std::ofstream(model / name, std::ios::binary).flush();
    fs::resize_file(model / name, bytes);
  };
  sized("model-00001.safetensors", 70u << 20);
  sized("model-00002.safetensors", 35u << 20);
  write_file(model / "config.json", "{\"layers\": 32}\n");
  sized("tokenizer.json", 419430);
}

}  // namespace

TEST_CASE("readme: every command of the walk-through, of leases and the guard, and of replacing a checkpoint prints what the README shows") {
  auto walkthrough = blocks_under("Walk-through");
  auto leases = blocks_under("Leases and the guard");
  auto upsert = blocks_under("Replacing a checkpoint");
  REQUIRE(walkthrough.size() == 2);  // the daemon; "In another shell"
  REQUIRE(leases.size() == 1);
  REQUIRE(upsert.size() == 1);
  session s{make_my_model};
  for (const auto& b : walkthrough) s.run(b);
  for (const auto& b : leases) s.run(b);
  for (const auto& b : upsert) s.run(b);
  CHECK(s.commands_run() >= 29);
}

TEST_CASE("readme: every command of Memory and disk (migrate, operations, the reconciler, spill) prints what the README shows") {
  auto blocks = blocks_under("Memory and disk");
  REQUIRE(blocks.size() >= 5);
  session s;
  for (const auto& b : blocks) s.run(b);
  CHECK(s.commands_run() >= 23);
}

TEST_CASE("readme: every command of A standby, and promotion by hand prints what the README shows") {
  auto blocks = blocks_under("A standby");
  REQUIRE(blocks.size() == 2);
  session s{make_my_model};
  for (const auto& b : blocks) s.run(b);
  CHECK(s.commands_run() >= 10);
}

TEST_CASE("readme: a README line that differs from the output fails, naming the line, the command and both lines") {
  const std::string text =
      "## Walk-through\n"
      "```sh\n"
      "$ weightctl lease acquire x --ttl 60s\n"
      "lease 1 on x held by h until 2026-12-02T14:03:44Z (in 59 s)\n"
      "$ weightctl ls\n"
      "REVISION\n"
      "...\n"
      "```\n"
      "## Next\n"
      "```sh\n"
      "$ not part of the walk-through\n"
      "```\n";
  auto blocks = walkthrough_blocks(text);
  REQUIRE(blocks.size() == 1);
  auto steps = steps_of(blocks[0]);
  REQUIRE(steps.size() == 2);
  addresses a{"127.0.0.1:5555", "127.0.0.1:5556"};
  // Times and relative times differ: still a match.
  CHECK(mismatch(steps[0], "lease 1 on x held by h until 2031-01-01T00:00:00Z (in 3 min)\n", a).empty());
  // `...` takes any further lines, none too.
  CHECK(mismatch(steps[1], "REVISION\na\nb\n", a).empty());
  CHECK(mismatch(steps[1], "REVISION\n", a).empty());
  // Another number: fails with README line 4, the command, both lines.
  auto wrong = mismatch(steps[0], "lease 2 on x held by h until 2031-01-01T00:00:00Z (in 3 min)\n", a);
  CHECK(wrong.find("README.md:4: `$ weightctl lease acquire x --ttl 60s` (README.md:3)") == 0);
  CHECK(wrong.find("expected: lease 1 on x held by h until <UTC> (<relative>)") != std::string::npos);
  CHECK(wrong.find("actual:   lease 2 on x held by h until <UTC> (<relative>)") != std::string::npos);
  // A line more than the README shows fails too, and so does a line less.
  CHECK(mismatch(steps[0], "lease 1 on x held by h until 2031-01-01T00:00:00Z (in 3 min)\nmore\n", a)
            .find("README.md:5: ") == 0);
  CHECK(mismatch(steps[1], "", a).find("actual:   (no more output)") != std::string::npos);
  // The test daemon's address reads as the README's.
  CHECK(normalize("weightd 0.1.0 at 127.0.0.1:5555 (writer 1)", a) == "weightd 0.1.0 at 127.0.0.1:7070 (writer 1)");
}
