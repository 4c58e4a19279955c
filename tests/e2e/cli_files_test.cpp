// weightctl and the files a user names (SPEC §10): written as named (a
// symlink's target, a FIFO or device in place, a regular file through a
// temporary and rename), every write error a non-zero exit naming the path,
// no exception out of main, no lease left behind; interrupts during import;
// flags over the environment; durations with units; re-imports refused
// before uploading.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>

#include "api/cli/exit_codes.hpp"
#include "api/client/client.hpp"
#include "daemon_fixture.hpp"

using namespace weightd;
using namespace weightd::test;
namespace fs = std::filesystem;

namespace {

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// weightctl against `d` with the caller's own redirections (ctl() adds 2>&1 last).
run_result ctl_redirected(const running_daemon& d, const std::string& args) {
  return run_command("{ " + std::string{WEIGHTD_WEIGHTCTL} + " --address " + d.address + " " +
                     args + "; }");
}

using api::kExitInterrupted;
using api::kExitLocalFile;

/// A daemon holding one object `k` of 3000 bytes (put from dir/src).
struct with_object {
  temp_dir dir;
  running_daemon d{dir.path() / "var"};
  std::string bytes = pattern(3000, 7);
  with_object() {
    write_file(dir.path() / "src", bytes);
    auto put = d.ctl("obj put k " + (dir.path() / "src").string());
    REQUIRE_MESSAGE(put.exit_code == 0, put.output);
  }
};

/// A daemon with default/m@main#1 READY (one small file).
struct with_revision {
  temp_dir dir;
  running_daemon d{dir.path() / "var"};
  with_revision() {
    write_file(dir.path() / "model" / "w.bin", pattern(5000, 1));
    auto imported = d.ctl("import " + (dir.path() / "model").string() + " --as default/m@main -q");
    REQUIRE_MESSAGE(imported.exit_code == 0, imported.output);
  }
};

}  // namespace

TEST_CASE("obj get FILE: a regular file is replaced through a temporary, nothing is left beside it") {
  with_object s;
  auto out = s.dir.path() / "out.bin";
  write_file(out, "old contents");
  ::chmod(out.c_str(), 0640);
  auto got = s.d.ctl("obj get k " + out.string());
  REQUIRE_MESSAGE(got.exit_code == 0, got.output);
  CHECK(read_all(out) == s.bytes);
  CHECK((fs::status(out).permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));
  CHECK_FALSE(fs::exists(out.string() + ".weightd-partial"));
}

TEST_CASE("obj get FILE: a symlink is followed, the link stays a link and its target gets the bytes") {
  with_object s;
  auto target = s.dir.path() / "real" / "weights.bin";
  write_file(target, "old");
  auto link = s.dir.path() / "link.bin";
  fs::create_symlink("real/weights.bin", link);
  auto got = s.d.ctl("obj get k " + link.string());
  REQUIRE_MESSAGE(got.exit_code == 0, got.output);
  CHECK(fs::is_symlink(fs::symlink_status(link)));
  CHECK(read_all(target) == s.bytes);
  CHECK_FALSE(fs::exists(target.string() + ".weightd-partial"));
}

TEST_CASE("obj get FILE: a FIFO is written in place, never replaced by a regular file") {
  with_object s;
  auto fifo = s.dir.path() / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto reader = std::async(std::launch::async, [&] { return read_all(fifo); });
  auto got = s.d.ctl("obj get k " + fifo.string());
  CHECK_MESSAGE(got.exit_code == 0, got.output);
  CHECK(reader.get() == s.bytes);
  CHECK(fs::is_fifo(fs::symlink_status(fifo)));
}

TEST_CASE("obj get FILE: a device that cannot take the bytes exits non-zero naming it, and stays a device") {
  if (::geteuid() != 0) return;  // mknod needs root; the FIFO case covers in-place writes
  with_object s;
  auto full = s.dir.path() / "full";  // like /dev/full, made in the test's own directory
  REQUIRE(::mknod(full.c_str(), S_IFCHR | 0600, makedev(1, 7)) == 0);
  auto got = s.d.ctl("obj get k " + full.string());
  CHECK(got.exit_code == kExitLocalFile);
  CHECK(has(got.output, full.string()));
  CHECK(has(got.output, "No space left on device"));
  CHECK(fs::is_character_file(fs::symlink_status(full)));
}

TEST_CASE("a full standard output is an error: obj get KEY - and ls exit non-zero") {
  if (::geteuid() != 0) return;  // mknod needs root
  with_object s;
  auto full = s.dir.path() / "full";
  REQUIRE(::mknod(full.c_str(), S_IFCHR | 0600, makedev(1, 7)) == 0);
  auto err = s.dir.path() / "err.txt";
  auto to_full = " > " + full.string() + " 2> " + err.string();
  CHECK(ctl_redirected(s.d, "obj get k -" + to_full).exit_code == kExitLocalFile);
  CHECK(has(read_all(err), "cannot write standard output: No space left on device"));
  CHECK(ctl_redirected(s.d, "obj ls" + to_full).exit_code == kExitLocalFile);
  CHECK(ctl_redirected(s.d, "status" + to_full).exit_code == kExitLocalFile);
}

TEST_CASE("obj get FILE under a regular file exits non-zero naming the path and the OS error") {
  with_object s;
  write_file(s.dir.path() / "f", "x");
  auto got = s.d.ctl("obj get k " + (s.dir.path() / "f" / "sub").string());
  CHECK(got.exit_code == kExitLocalFile);
  CHECK(has(got.output, "Not a directory"));
  CHECK_FALSE(has(got.output, "terminate called"));
}

TEST_CASE("export into a path under a regular file: a clear error, the lease released at once, rm not BUSY") {
  with_revision s;
  write_file(s.dir.path() / "f", "x");
  auto exported = s.d.ctl("export default/m@main " + (s.dir.path() / "f" / "sub").string() + " -q");
  CHECK(exported.exit_code == kExitLocalFile);
  CHECK(has(exported.output, "Not a directory"));
  CHECK_FALSE(has(exported.output, "terminate called"));
  auto leases = s.d.ctl("lease ls default/m@main --json");
  CHECK_MESSAGE(!has(leases.output, "\"lease_id\""), leases.output);
  auto removed = s.d.ctl("rm default/m@main");
  CHECK_MESSAGE(removed.exit_code == 0, removed.output);
}

TEST_CASE("export follows a symlinked file to its target and replaces regular files") {
  with_revision s;
  auto out = s.dir.path() / "out";
  auto real = s.dir.path() / "elsewhere.bin";
  write_file(real, "old");
  fs::create_directories(out);
  fs::create_symlink(real, out / "w.bin");
  auto exported = s.d.ctl("export default/m@main " + out.string() + " -q");
  REQUIRE_MESSAGE(exported.exit_code == 0, exported.output);
  CHECK(fs::is_symlink(fs::symlink_status(out / "w.bin")));
  CHECK(read_all(real) == pattern(5000, 1));
}

TEST_CASE("durations need units: --ttl 60 is refused naming the flag and the units") {
  with_revision s;
  auto bare = s.d.ctl("lease acquire default/m@main --ttl 60");
  CHECK(bare.exit_code == 2);
  CHECK(has(bare.output, "--ttl"));
  CHECK(has(bare.output, "60s or 60ms"));
  CHECK(s.d.ctl("lease acquire default/m@main --ttl 60s").exit_code == 0);
}

TEST_CASE("a flag beats the environment: --token-file wins over WEIGHTD_TOKEN") {
  temp_dir dir;
  write_file(dir.path() / "tokens.csv", "good-token-0123456789,bob,acme,writer\n");
  ::chmod((dir.path() / "tokens.csv").c_str(), 0600);
  write_file(dir.path() / "token", "good-token-0123456789\n");
  daemon_options o;
  o.flags = {"--auth-tokens-file", (dir.path() / "tokens.csv").string()};
  o.ctl_flags = "--token good-token-0123456789";
  running_daemon d{dir.path() / "var", o};
  auto ctl = std::string{"WEIGHTD_TOKEN=bad-token-0000000000 "} + WEIGHTD_WEIGHTCTL +
             " --address " + d.address + " ";
  CHECK(run_command(ctl + "status").exit_code == 16);  // the environment's token alone
  auto with_file = run_command(ctl + "--token-file " + (dir.path() / "token").string() + " status");
  CHECK_MESSAGE(with_file.exit_code == 0, with_file.output);
}

TEST_CASE("import of a generation that exists is refused before uploading, advising what works") {
  with_revision s;
  auto objects_before = s.d.ctl("obj ls weights/").output;
  auto again = s.d.ctl("import " + (s.dir.path() / "model").string() + " --as default/m@main#1 -q");
  CHECK(again.exit_code == 4);  // CONFLICT
  CHECK(has(again.output, "default/m@main#1 exists already (READY)"));
  CHECK(has(again.output, "weightctl upsert"));
  CHECK(has(again.output, "nothing was uploaded"));
  CHECK(s.d.ctl("obj ls weights/").output == objects_before);
  CHECK(s.d.ctl("ls --all").output.find("#2") == std::string::npos);
}

TEST_CASE("rm of an id whose only revision is IMPORTING names `weightctl abort`") {
  temp_dir dir;
  running_daemon d{dir.path() / "var"};
  api::client c{d.client_options()};
  v1::BeginImportRequest begin;
  auto* id = begin.mutable_id();
  id->set_tenant("default");
  id->set_ns("default");
  id->set_resource("m");
  id->set_revision("main");
  id->set_weight_generation(1);
  begin.set_expected_payload_count(1);
  begin.set_expected_logical_bytes(1);
  REQUIRE(c.begin_import(begin));
  auto rm = d.ctl("rm default/m@main");
  CHECK(rm.exit_code == 3);  // NOT_FOUND
  CHECK(has(rm.output, "IMPORTING"));
  CHECK(has(rm.output, "weightctl abort default/m@main#1"));
}

namespace {

/// Runs `weightctl import` of a directory large enough to take a while, and
/// interrupts it with SIGINT while it uploads: the daemon is paused (SIGSTOP)
/// as soon as the revision is IMPORTING, so the upload cannot finish before
/// the signal lands. Returns weightctl's exit code and output.
run_result interrupted_import(running_daemon& d, const fs::path& model, const std::string& flags) {
  auto out = model.parent_path() / "import.out";
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    execl(WEIGHTD_WEIGHTCTL, WEIGHTD_WEIGHTCTL, "--address", d.address.c_str(), "import",
          model.c_str(), "--as", "default/big@main", "--jobs", "1", "-q",
          flags.empty() ? nullptr : flags.c_str(), nullptr);
    _exit(127);
  }
  api::client c{d.client_options()};
  v1::GetRevisionRequest get;
  get.mutable_id()->set_tenant("default");
  get.mutable_id()->set_ns("default");
  get.mutable_id()->set_resource("big");
  get.mutable_id()->set_revision("main");
  get.mutable_id()->set_weight_generation(1);
  get.set_include_hidden(true);
  bool importing = false;
  for (int i = 0; i < 2000 && !importing; ++i) {
    auto view = c.get_revision(get);
    importing = view && view->availability() == events::v1::IMPORTING;
    if (!importing) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  REQUIRE(importing);
  kill(d.pid, SIGSTOP);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  kill(pid, SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  kill(d.pid, SIGCONT);
  int status = 0;
  waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_all(out)};
}

void write_big_model(const fs::path& model) {
  for (int i = 0; i < 12; ++i)
    write_file(model / ("shard-" + std::to_string(i) + ".bin"), pattern(24 << 20, i));
}

}  // namespace

TEST_CASE("SIGINT during import aborts it and removes its uploads, exit 130") {
  temp_dir dir;
  running_daemon d{dir.path() / "var"};
  write_big_model(dir.path() / "model");
  auto r = interrupted_import(d, dir.path() / "model", "");
  CHECK(r.exit_code == kExitInterrupted);
  CHECK_MESSAGE(has(r.output, "interrupted; the import was aborted"), r.output);
  CHECK_FALSE(has(d.ctl("obj ls weights/").output, "shard-"));
  CHECK_FALSE(has(d.ctl("ls --all").output, "IMPORTING"));
  // Nothing of the interrupted import is left to resume or remove: a new one works.
  auto again = d.ctl("import " + (dir.path() / "model").string() + " --as default/big@main -q");
  CHECK_MESSAGE(again.exit_code == 0, again.output);
}

TEST_CASE("SIGINT during import --resume keeps it IMPORTING and prints the command that resumes") {
  temp_dir dir;
  running_daemon d{dir.path() / "var"};
  auto model = dir.path() / "model";
  write_big_model(model);
  auto r = interrupted_import(d, model, "--resume");
  CHECK(r.exit_code == kExitInterrupted);
  auto resume = "weightctl import " + model.string() + " --as default/big@main#1 --resume";
  CHECK_MESSAGE(has(r.output, resume), r.output);
  CHECK(has(d.ctl("ls --all").output, "IMPORTING"));
  auto resumed = d.ctl(resume.substr(std::string{"weightctl "}.size()) + " -q");
  CHECK_MESSAGE(resumed.exit_code == 0, resumed.output);
  CHECK(has(resumed.output, "imported default/big@main#1"));
}

TEST_CASE("--json obj rm of a missing key prints no document claiming success, and exits NOT_FOUND") {
  with_object s;
  auto rm = ctl_redirected(s.d, "--json obj rm missing 2>/dev/null");
  CHECK(rm.exit_code == 3);
  CHECK(rm.output.empty());
  auto both = ctl_redirected(s.d, "--json obj rm k missing 2>/dev/null");
  CHECK(both.exit_code == 3);
  CHECK(has(both.output, "\"items\""));  // what was removed is still listed
}
