// Migrations survive a crash, end to end: the real weightd is killed with
// SIGKILL between two rounds of a running operation — a `weightctl migrate`,
// then an automatic demotion the reconciler starts under HOT pressure — and
// restarted on the same data directory. The operation must resume from its
// cursor (never start over, never count backwards) and complete; every
// affinity unit must end whole in one tier; every file must export with the
// bytes it was imported with; the journal must verify clean, right after the
// crash and at the end (SPEC §4 Migrate, GetOperation, Reconciler; §2 units).
//
// A kill that comes too late (the operation already finished) proves
// nothing, so a scenario that misses the middle is run again, up to three
// times; every check of a scenario that caught it is a hard failure.
#include <doctest/doctest.h>
#include <google/protobuf/util/json_util.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "api/common/json_output.hpp"
#include "api/common/loopback.hpp"
#include "api/weightd.pb.h"
#include "support.hpp"

using namespace weightd;
using namespace weightd::test;

namespace {

namespace fs = std::filesystem;
namespace ev1 = events::v1;
using std::chrono::milliseconds;
using std::chrono::seconds;
using steady = std::chrono::steady_clock;

constexpr uint64_t kMiB = 1ull << 20;

/// One protobuf message from weightctl's --json output (one per line).
/// One protobuf message from weightctl's --json output (SPEC §10: short enum
/// names, 64-bit numbers as numbers).
template <class Message>
Message from_json(const std::string& text) {
  Message m;
  auto j = nlohmann::ordered_json::parse(text, nullptr, false);
  REQUIRE_MESSAGE(!j.is_discarded(), "not JSON: " << text);
  auto st = weightd::api::message_from_json(j, &m);
  REQUIRE_MESSAGE(st.ok(), "not a " << Message::descriptor()->name() << ": " << text << " ("
                                    << st.to_string() << ")");
  return m;
}

/// The messages of weightctl's output: the items of a list document
/// ({"items": [...]}), else one message a line (journal dump's NDJSON).
template <class Message>
std::vector<Message> json_lines(const std::string& output) {
  std::vector<Message> out;
  auto doc = nlohmann::ordered_json::parse(output, nullptr, false);
  if (!doc.is_discarded() && doc.is_object() && doc.contains("items")) {
    for (const auto& item : doc["items"]) out.push_back(from_json<Message>(item.dump()));
    return out;
  }
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line.front() == '{') out.push_back(from_json<Message>(line));
  return out;
}

/// weightd on free loopback ports, with flags of its own (running_daemon
/// takes none), that can be killed with SIGKILL and started again on the
/// same data directory (and HOT tier, in hot/).
class weightd_process {
 public:
  weightd_process(fs::path dir, std::vector<std::string> flags)
      : dir_(std::move(dir)), flags_(std::move(flags)) {
    start();
  }
  weightd_process(const weightd_process&) = delete;
  weightd_process& operator=(const weightd_process&) = delete;
  ~weightd_process() { stop(); }

  /// Starts it and waits until it answers `weightctl status` (a restart
  /// first re-checks every replica's checksum, so this may take a while).
  void start() {
    REQUIRE(pid_ <= 0);
    address_ = "127.0.0.1:" + std::to_string(api::free_loopback_port());
    std::vector<std::string> args{WEIGHTD_DAEMON,
                                  "--data-dir", dir_.string(),
                                  "--hot-dir", (dir_ / "hot").string(),
                                  "--listen", address_,
                                  "--http-listen",
                                  "127.0.0.1:" + std::to_string(api::free_loopback_port()),
                                  "--log-level", "warn"};
    args.insert(args.end(), flags_.begin(), flags_.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      execv(WEIGHTD_DAEMON, argv.data());
      _exit(127);
    }
    auto deadline = steady::now() + seconds(30);
    while (ctl("status").exit_code != 0) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        FAIL("weightd exited during startup with status "
             << (WIFEXITED(status) ? WEXITSTATUS(status) : -1));
      }
      REQUIRE_MESSAGE(steady::now() < deadline, "weightd did not answer within 30 s");
      std::this_thread::sleep_for(milliseconds(20));
    }
  }

  /// kill -9: no shutdown of any kind.
  void kill_hard() {
    REQUIRE(pid_ > 0);
    ::kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    CHECK_MESSAGE((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL),
                  "weightd had already exited by itself");
  }

  /// SIGTERM, then the exit code.
  int stop() {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  run_result ctl(const std::string& args) const {
    return run_command(std::string{WEIGHTD_WEIGHTCTL} + " --address " + address_ + " " + args);
  }

 private:
  fs::path dir_;
  std::vector<std::string> flags_;
  pid_t pid_ = -1;
  std::string address_;
};

/// weightctl's offline commands on a data directory.
run_result offline(const fs::path& data_dir, const std::string& args) {
  return run_command(std::string{WEIGHTD_WEIGHTCTL} + " --data-dir " + data_dir.string() + " " +
                     args);
}

/// 48 files of 1 to 2 MiB (each file is an affinity unit of one payload) and,
/// among them in unit order, one of 64.25 MiB, which import cuts into two
/// payloads: a unit of two members, which must never be split.
struct model_files {
  fs::path root;
  std::vector<std::string> names;
  uint64_t bytes = 0;
  static constexpr const char* big = "w24-big.bin";  // sorts between w23.bin and w24.bin

  explicit model_files(const fs::path& at) : root(at) {
    for (unsigned k = 1; k <= 48; ++k) {
      char name[16];
      std::snprintf(name, sizeof name, "w%02u.bin", k);
      add(name, kMiB + k * 21'000, k << 16 | k);
    }
    add(big, 64 * kMiB + kMiB / 4, 0xb16b00u);
  }
  void add(const std::string& name, uint64_t size, unsigned seed) {
    write_file(root / name, pattern(size, seed));
    names.push_back(name);
    bytes += size;
  }
  size_t units() const { return names.size(); }

  /// `copy` holds exactly these files, with these bytes.
  void check_same(const fs::path& copy) const {
    size_t files = 0;
    for (const auto& entry : fs::recursive_directory_iterator(copy))
      if (entry.is_regular_file()) ++files;
    CHECK(files == names.size());
    for (const auto& name : names) {
      bool same = read_file(copy / name) == read_file(root / name);  // (not printed: 64 MiB)
      CHECK_MESSAGE(same, name << " differs from the imported file");
    }
  }
};

v1::Operation operation(const weightd_process& d, uint64_t id) {
  auto shown = d.ctl("op show " + std::to_string(id) + " --json");
  REQUIRE_MESSAGE(shown.exit_code == 0, shown.output);
  return from_json<v1::Operation>(shown.output);
}

v1::RevisionView revision(const weightd_process& d, const std::string& id) {
  auto shown = d.ctl("show " + id + " --json");
  REQUIRE_MESSAGE(shown.exit_code == 0, shown.output);
  return from_json<v1::RevisionView>(shown.output);
}

/// Polls the operation until it is no longer RUNNING; every value of
/// processed_units seen on the way must be at least `floor` and never go
/// down. Returns the last state.
v1::Operation await_end(const weightd_process& d, uint64_t id, uint64_t floor) {
  auto deadline = steady::now() + seconds(30);
  uint64_t last = floor;
  for (;;) {
    auto op = operation(d, id);
    CHECK_MESSAGE(op.processed_units() >= last,
                  "processed_units went from " << last << " back to " << op.processed_units());
    last = std::max<uint64_t>(last, op.processed_units());
    if (op.state() != v1::RUNNING) return op;
    REQUIRE_MESSAGE(steady::now() < deadline,
                    "operation " << id << " still RUNNING after 30 s: " << op.DebugString());
    std::this_thread::sleep_for(milliseconds(50));
  }
}

void await_no_running_operations(const weightd_process& d) {
  auto deadline = steady::now() + seconds(30);
  for (;;) {
    auto listed = d.ctl("op ls");
    REQUIRE_MESSAGE(listed.exit_code == 0, listed.output);
    if (listed.output.find("no running operations") != std::string::npos) return;
    REQUIRE_MESSAGE(steady::now() < deadline, "operations still running after 30 s:\n"
                                                  << listed.output);
    std::this_thread::sleep_for(milliseconds(50));
  }
}

/// The journal as `journal dump --type TYPE --json` prints it, one operation's events.
std::vector<ev1::Envelope> operation_events(const fs::path& var, const std::string& type,
                                            uint64_t id) {
  auto dumped = offline(var, "journal dump --type " + type + " --json");
  REQUIRE_MESSAGE(dumped.exit_code == 0, dumped.output);
  std::vector<ev1::Envelope> out;
  for (auto& e : json_lines<ev1::Envelope>(dumped.output)) {
    uint64_t of = e.has_operation_started()      ? e.operation_started().operation_id()
                  : e.has_operation_progressed() ? e.operation_progressed().operation_id()
                  : e.has_operation_finished()   ? e.operation_finished().operation_id()
                                                 : 0;
    if (of == id) out.push_back(std::move(e));
  }
  return out;
}

void check_journal_verifies(const fs::path& var, const std::string& when) {
  auto verified = offline(var, "journal verify");
  CHECK_MESSAGE(verified.exit_code == 0, when << ": " << verified.output);
  CHECK_MESSAGE(verified.output.find("every invariant holds") != std::string::npos, when << ": "
                                                                                  << verified.output);
}

/// The operation's progress in the journal, across both incarnations: it
/// resumed from its cursor (the cursors only move forward, so no unit was
/// taken up twice and the second daemon did not start over), its count never
/// went backwards, and both daemons wrote some of it.
void check_progress_history(const fs::path& var, uint64_t id, uint64_t total) {
  auto progress = operation_events(var, "operation_progressed", id);
  REQUIRE(!progress.empty());
  std::set<uint64_t> writers;
  std::string cursor;
  uint64_t processed = 0;
  for (const auto& e : progress) {
    const auto& p = e.operation_progressed();
    CAPTURE(e.global_seq());
    writers.insert(e.writer_id());
    CHECK(p.processed_units() >= processed);
    processed = p.processed_units();
    if (p.cursor().empty()) continue;  // the finish's last progress names no unit
    CHECK_MESSAGE(p.cursor() > cursor,
                  "cursor " << p.cursor() << " after " << cursor << ": a unit was taken up again");
    cursor = p.cursor();
  }
  CHECK(processed == total);
  CHECK_MESSAGE(writers.size() >= 2, "the operation's progress was written by one daemon only");
  CHECK(operation_events(var, "operation_finished", id).size() == 1);
}

/// One revision's payloads as the store lists them: for each affinity unit,
/// the replica tiers of each member.
using unit_tiers = std::map<std::string, std::vector<std::set<int>>>;
struct layout {
  unit_tiers units;
  std::set<int> manifest;
  size_t members = 0;
};

layout layout_of(const weightd_process& d, const std::string& ns_resource) {
  auto listed = d.ctl("obj ls weights/" + ns_resource + "/ --json");
  REQUIRE_MESSAGE(listed.exit_code == 0, listed.output);
  layout out;
  for (const auto& info : json_lines<v1::ObjectInfo>(listed.output)) {
    std::set<int> tiers(info.replicas().begin(), info.replicas().end());
    CHECK_MESSAGE(info.readable(), info.key());
    if (info.key().size() >= 9 && info.key().substr(info.key().size() - 9) == "/manifest") {
      out.manifest = tiers;
      continue;
    }
    REQUIRE_MESSAGE(!info.affinity_id().empty(), info.key());
    out.units[info.affinity_id()].push_back(tiers);
    ++out.members;
  }
  return out;
}

/// No unit is split: all its members have the same replicas. Returns, for
/// each unit, those replicas.
std::map<std::string, std::set<int>> whole_units(const layout& l) {
  std::map<std::string, std::set<int>> out;
  for (const auto& entry : l.units) {  // (no structured binding: clang cannot capture one in CAPTURE)
    const auto& unit = entry.first;
    const auto& members = entry.second;
    CAPTURE(unit);
    for (const auto& tiers : members)
      CHECK_MESSAGE(tiers == members.front(), "unit " << unit << " is split across tiers");
    out[unit] = members.front();
  }
  return out;
}

const std::set<int> kHotOnly{ev1::TIER_HOT}, kColdOnly{ev1::TIER_COLD};

enum class outcome { caught, missed };

/// Polls until `operation` (a function returning the operation, or nullopt
/// when it has not started yet) is RUNNING with a random share of its units
/// done (at least one, and at least two to go), then kills the daemon.
/// Returns the operation as last seen, or nullopt when it ended first.
template <class Fn>
std::optional<v1::Operation> kill_midway(weightd_process& d, Fn operation_now) {
  std::mt19937 rng{std::random_device{}()};
  double share = std::uniform_real_distribution<double>{0.05, 0.75}(rng);
  CAPTURE(share);
  auto deadline = steady::now() + seconds(30);
  while (steady::now() < deadline) {
    std::optional<v1::Operation> op = operation_now();
    if (!op) continue;  // not started yet
    if (op->state() != v1::RUNNING) return std::nullopt;
    auto wanted = std::max<uint64_t>(
        1, static_cast<uint64_t>(share * static_cast<double>(op->total_units())));
    if (op->processed_units() >= wanted && op->processed_units() + 2 <= op->total_units()) {
      d.kill_hard();
      return op;
    }
  }
  FAIL("the operation did not get going within 30 s");
  return std::nullopt;
}

/// After the kill, offline: the journal verifies, and the operation had not
/// finished (else the kill came too late to prove anything: missed).
outcome check_crashed_midway(const fs::path& var, uint64_t id) {
  check_journal_verifies(var, "right after the kill");
  if (!operation_events(var, "operation_finished", id).empty()) {
    MESSAGE("operation " << id << " finished before the kill landed; trying again");
    return outcome::missed;
  }
  return outcome::caught;
}

// ---------------------------------------------------------------------------

outcome migration_killed_midway() {
  temp_dir dir;
  model_files model{dir.path() / "model"};
  auto var = dir.path() / "var";
  // One unit per round: the migration takes ~50 rounds, each its own event.
  weightd_process d{var, {"--migration-round-members", "1", "--migration-round-bytes", "1MiB",
                          "--migration-rate", "64MiB/s"}};
  // MANUAL: nothing but this migration moves it (an AUTO revision colder than
  // it prefers would be promoted again by the export's lease, SPEC §4).
  auto imported =
      d.ctl("import " + model.root.string() + " --as default/m@main --mode MANUAL");
  REQUIRE_MESSAGE(imported.exit_code == 0, imported.output);

  auto started = d.ctl("migrate default/m@main --to COLD --json");
  REQUIRE_MESSAGE(started.exit_code == 0, started.output);
  auto id = from_json<v1::Operation>(started.output).operation_id();
  REQUIRE(id != 0);
  auto before = kill_midway(d, [&] { return std::optional<v1::Operation>{operation(d, id)}; });
  if (!before) {
    MESSAGE("operation " << id << " ended before it was seen mid-way; trying again");
    return outcome::missed;
  }
  CHECK(before->total_units() == model.units());
  if (check_crashed_midway(var, id) == outcome::missed) return outcome::missed;
  MESSAGE("killed weightd at " << before->processed_units() << "/" << before->total_units()
                               << " units, cursor " << before->cursor());

  d.start();
  auto after = await_end(d, id, before->processed_units());
  REQUIRE_MESSAGE(after.state() == v1::COMPLETED, after.DebugString());
  CHECK(after.processed_units() == after.total_units());
  CHECK(after.processed_bytes() == model.bytes);
  check_progress_history(var, id, model.units());

  auto view = revision(d, "default/m@main");
  CHECK(view.availability() == ev1::READY);
  CHECK(view.residency() == ev1::RESIDENCY_COLD);
  CHECK(view.operation_id() == 0);
  auto l = layout_of(d, "default/m");
  CHECK(l.units.size() == model.units());
  CHECK(l.members == model.units() + 1);  // the big file is two payloads
  CHECK(l.units[model.big].size() == 2);
  CHECK(l.manifest.count(ev1::TIER_HOT) == 1);  // the manifest always keeps a HOT replica
  for (const auto& unit : whole_units(l)) CHECK_MESSAGE(unit.second == kColdOnly, unit.first);

  auto out = dir.path() / "export";
  auto exported = d.ctl("export default/m@main " + out.string());
  REQUIRE_MESSAGE(exported.exit_code == 0, exported.output);
  model.check_same(out);
  CHECK(d.stop() == 0);
  check_journal_verifies(var, "at the end");
  return outcome::caught;
}

outcome demotion_killed_midway() {
  temp_dir dir;
  model_files model{dir.path() / "model"};
  auto var = dir.path() / "var";
  // Two revisions of the model, AUTO and preferring HOT (the defaults),
  // imported into a roomy HOT tier.
  // 32 MiB/s: the demotion (about 70 MiB) takes seconds on any machine, so
  // the kill lands in its middle.
  std::vector<std::string> flags{"--migration-round-members", "1", "--migration-round-bytes",
                                 "1MiB", "--migration-rate", "32MiB/s",
                                 "--reconcile-interval", "50ms",
                                 // once demoted, stay put for the rest of the test
                                 "--auto-cooldown", "10m", "--high-watermark", "0.9",
                                 "--eviction-ratio", "0.05"};
  {
    auto roomy = flags;
    roomy.insert(roomy.end(), {"--hot-capacity", "1GiB"});
    weightd_process d{var, roomy};
    for (const char* id : {"default/a@main", "default/b@main"}) {
      auto imported = d.ctl("import " + model.root.string() + " --as " + id);
      REQUIRE_MESSAGE(imported.exit_code == 0, imported.output);
    }
    REQUIRE(d.stop() == 0);
  }
  // Restarted with a HOT tier that holds both but above its high watermark
  // (0.9 x capacity < both < capacity): pressure, and the reconciler demotes
  // the least recently used one, a (imported first), HOT -> MIXED.
  auto capacity = static_cast<uint64_t>(2.0 * static_cast<double>(model.bytes) / 0.94);
  flags.insert(flags.end(), {"--hot-capacity-bytes", std::to_string(capacity)});
  weightd_process d{var, flags};
  auto before = kill_midway(d, [&]() -> std::optional<v1::Operation> {
    auto a = revision(d, "default/a@main");
    if (a.operation_id() != 0) return a.operation();
    if (a.residency() == ev1::RESIDENCY_HOT) return std::nullopt;  // not started yet
    v1::Operation ended;  // started and ended between two looks
    ended.set_state(v1::COMPLETED);
    return ended;
  });
  if (!before) {
    MESSAGE("the demotion ended before it was seen mid-way; trying again");
    return outcome::missed;
  }
  auto id = before->operation_id();
  CHECK(before->target() == ev1::RESIDENCY_MIXED);
  CHECK(before->total_units() == model.units());
  if (check_crashed_midway(var, id) == outcome::missed) return outcome::missed;
  auto begun = operation_events(var, "operation_started", id);
  REQUIRE(begun.size() == 1);
  CHECK(begun[0].operation_started().automatic());
  CHECK_MESSAGE(begun[0].operation_started().reason().find("pressure") != std::string::npos,
                begun[0].operation_started().reason());
  MESSAGE("killed weightd at " << before->processed_units() << "/" << before->total_units()
                               << " units of the demotion, cursor " << before->cursor());

  d.start();
  auto after = await_end(d, id, before->processed_units());
  REQUIRE_MESSAGE(after.state() == v1::COMPLETED, after.DebugString());
  CHECK(after.processed_units() == after.total_units());
  check_progress_history(var, id, model.units());
  await_no_running_operations(d);  // b too may have been demoted meanwhile

  auto a = revision(d, "default/a@main");
  CHECK(a.availability() == ev1::READY);
  CHECK(a.residency() == ev1::RESIDENCY_MIXED);
  CHECK(a.operation_id() == 0);
  CHECK(a.observed_hot_ratio() > 0.4);  // the planner's whole units near ratio 0.5
  CHECK(a.observed_hot_ratio() < 0.6);
  for (const char* ns_resource : {"default/a", "default/b"}) {
    CAPTURE(ns_resource);
    auto l = layout_of(d, ns_resource);
    CHECK(l.units.size() == model.units());
    CHECK(l.members == model.units() + 1);
    CHECK(l.manifest.count(ev1::TIER_HOT) == 1);
    size_t hot = 0, cold = 0;
    for (const auto& entry : whole_units(l)) {
      const auto& tiers = entry.second;
      CAPTURE(entry.first);
      CHECK((tiers == kHotOnly || tiers == kColdOnly));
      ++(tiers == kHotOnly ? hot : cold);
    }
    if (std::string{ns_resource} == "default/a") {
      CHECK(hot > 0);
      CHECK(cold > 0);
      // The largest unit always stays HOT under MIXED (SPEC §4 planner).
      CHECK(whole_units(l)[model.big] == kHotOnly);
    }
  }

  // MANUAL first: an AUTO revision colder than it prefers would be promoted
  // by the export's lease (access promotion, SPEC §4), which is not under test.
  for (const char* id : {"default/a@main", "default/b@main"}) {
    auto manual = d.ctl(std::string{"policy "} + id + " --mode MANUAL");
    REQUIRE_MESSAGE(manual.exit_code == 0, manual.output);
    auto out = dir.path() / (std::string{"export-"} + id[8]);
    auto exported = d.ctl(std::string{"export "} + id + " " + out.string());
    REQUIRE_MESSAGE(exported.exit_code == 0, exported.output);
    model.check_same(out);
  }
  CHECK(d.stop() == 0);
  check_journal_verifies(var, "at the end");
  return outcome::caught;
}

template <class Scenario>
void up_to_three_times(Scenario scenario) {
  int caught_on = 0;
  for (int attempt = 1; attempt <= 8 && !caught_on; ++attempt) {
    CAPTURE(attempt);
    if (scenario() == outcome::caught) caught_on = attempt;
  }
  REQUIRE_MESSAGE(caught_on != 0, "eight attempts never caught the operation mid-way");
}

}  // namespace

TEST_CASE("migration crash: kill -9 in the middle of a migration, it resumes from its cursor, "
          "no unit lost or split, journal verify clean") {
  up_to_three_times(migration_killed_midway);
}

TEST_CASE("migration crash: kill -9 in the middle of a demotion under HOT pressure, it completes "
          "after the restart, no unit lost or split, journal verify clean") {
  up_to_three_times(demotion_killed_midway);
}
