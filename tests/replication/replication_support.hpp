// What the tests of SPEC §11 with real daemons share: a journal's highest
// seq read from its files, weightctl against one address, a small model
// imported, a kill -9.
#pragma once

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "daemon_fixture.hpp"
#include "persistence/lmdb_journal.hpp"
#include "support.hpp"

namespace weightd::test {

inline std::unique_ptr<persistence::lmdb_journal> open_read_only(
    const std::filesystem::path& data_dir) {
  persistence::lmdb_options o;
  o.dir = data_dir / "journal";
  o.read_only = true;
  auto j = persistence::lmdb_journal::open(o);
  REQUIRE_MESSAGE(j.ok(), j.error().to_string());
  return std::move(*j);
}

/// The highest seq of the journal under `data_dir` (0 before it exists).
inline uint64_t journal_seq(const std::filesystem::path& data_dir) {
  if (!std::filesystem::exists(data_dir / "journal" / "data.mdb")) return 0;
  return *open_read_only(data_dir)->highest_seq();
}

/// Waits (at most 20 s) until the standby's journal reaches the leader's.
inline bool caught_up(const std::filesystem::path& leader_dir,
                      const std::filesystem::path& standby_dir) {
  for (int i = 0; i < 400; ++i) {
    auto want = journal_seq(leader_dir);
    if (want > 0 && journal_seq(standby_dir) == want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

/// weightctl at `address`, stderr included.
inline run_result ctl_at(const std::string& address, const std::string& args) {
  return run_command(std::string{WEIGHTD_WEIGHTCTL} + " --address " + address + " " + args +
                     " 2>&1");
}

/// Imports a two-file model as default/<name>@main.
inline void import_model(const std::string& address, const std::filesystem::path& dir,
                         const std::string& name) {
  write_file(dir / name / "config.json", "{}");
  write_file(dir / name / "weights.bin", pattern(50'000, static_cast<unsigned>(name.size())));
  auto imported = ctl_at(address, "import " + (dir / name).string() + " --as default/" + name +
                                      "@main --quiet");
  REQUIRE_MESSAGE(imported.exit_code == 0, imported.output);
}

/// A leader on a free loopback port and a standby that follows it, in
/// <dir>/leader and <dir>/standby.
struct leader_and_standby {
  explicit leader_and_standby(const std::filesystem::path& dir)
      : leader_address("127.0.0.1:" + std::to_string(api::free_loopback_port())),
        leader(dir / "leader", leading(leader_address)),
        standby(dir / "standby", following(leader_address)) {}
  static daemon_options leading(const std::string& address) {
    daemon_options o;
    o.listen = address;
    return o;
  }
  static daemon_options following(const std::string& address) {
    daemon_options o;
    o.flags = {"--follow", address};
    return o;
  }
  std::string leader_address;
  running_daemon leader;
  running_daemon standby;
};

inline void kill_9(std::unique_ptr<running_daemon>& d) {
  ::kill(d->pid, SIGKILL);
  int status = 0;
  ::waitpid(d->pid, &status, 0);
  d->pid = -1;
  d.reset();
}

}  // namespace weightd::test
