// weightd_kill9: kill -9 under mixed load, again and again (issue #11 item 6).
//
// Each cycle runs a mixed load from many client threads against a real
// weightd — imports (BeginImport, payload Puts, manifest Put, CommitImport),
// AbortImport, leases (acquire, renew, release), RemoveRevision,
// UpdatePolicy, Migrate, and Put/Get/Remove of ordinary objects — for a random
// 0.5-3 s, then SIGKILLs the daemon, runs `weightctl journal verify` on the
// journal the crash left, restarts weightd on the same directories and checks
// that everything it had acknowledged is still true (see recovery_checks.hpp):
// revisions with their generation and policy, removes that stay removed,
// objects with the same size, sha256 and bytes, leases still listed and
// renewable within the recovery grace, lease ids that keep growing, no orphan
// file in either tier. Calls in flight at the kill may go either way; the
// checks find out which and carry on from there. The store is never reset:
// cycle N starts from whatever the N-1 crashes before left.
//
// ctest runs 20 cycles (label `crash`). The long form, for a soak:
//
//   build/tests/weightd_kill9 --cycles 500
//   build/tests/weightd_kill9 --cycles 100 --clients 32 --seed 7 --duration-per-cycle 1:5
//
// It prints a line per cycle and a final summary; the exit code is 1 on any
// violation (each named on stderr, the work directory kept for a look), 2 when
// the harness itself could not run. --seed makes the choices of every client
// and the kill times repeat (the interleaving of threads does not).
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "api/client/client.hpp"
#include "kill9/daemon_process.hpp"
#include "kill9/load.hpp"
#include "kill9/model.hpp"
#include "kill9/recovery_checks.hpp"

namespace {

using namespace weightd;
using namespace weightd::kill9;
using steady = std::chrono::steady_clock;

struct options {
  std::string weightd = WEIGHTD_DAEMON;
  std::string weightctl = WEIGHTD_WEIGHTCTL;
  unsigned cycles = 20;
  unsigned clients = 16;
  uint64_t seed = 0;  // 0: a random one (printed)
  std::string duration = "0.5:3";
  double min_load_s = 0.5, max_load_s = 3;
  std::string hot_capacity = "256MiB";
  std::string snapshot_every = "2000";
  size_t read_back = 8;
  bool keep = false;
};

double seconds_since(steady::time_point t) {
  return std::chrono::duration<double>(steady::now() - t).count();
}

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// A fresh directory from mkdtemp under `parent`.
fs::path make_temp_dir(const fs::path& parent, const std::string& prefix) {
  std::string pattern = (parent / (prefix + "XXXXXX")).string();
  if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp under " + parent.string() + " failed");
  return pattern;
}

/// The flags of the daemon under test: a small HOT tier, a reconciler that
/// acts every 100 ms, migrations in small rounds (so that kills land in the
/// middle of them), snapshots often enough that recovery folds from one.
std::vector<std::string> daemon_flags(const options& o) {
  return {"--hot-capacity", o.hot_capacity,
          "--reconcile-interval", "100ms",
          "--auto-cooldown", "2s",
          "--migration-round-members", "4",
          "--migration-round-bytes", "4MiB",
          "--snapshot-every", o.snapshot_every,
          "--lease-recovery-grace", "10s",
          // The harness finishes or aborts every import itself; the
          // reconciler's abandonment would take an acknowledged one away.
          "--import-abandon", "1h",
          "--log-level", "info"};
}

struct verify_outcome {
  bool ok = false;
  std::string output;
  double seconds = 0;
};

/// `weightctl --journal-dir DIR journal verify` on the journal as the crash
/// left it (weightd is dead: nothing writes it meanwhile).
verify_outcome verify_journal(const options& o, const store_dirs& dirs) {
  std::string command = o.weightctl + " --journal-dir " + dirs.journal().string() +
                        " journal verify 2>&1";
  verify_outcome out;
  auto began = steady::now();
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.output.append(buf, n);
  int status = pclose(pipe);
  out.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  out.seconds = seconds_since(began);
  while (!out.output.empty() && out.output.back() == '\n') out.output.pop_back();
  return out;
}

/// Totals over every cycle, for the final line.
struct totals {
  op_tally ops;
  std::map<std::string, uint64_t> landed, not_landed;
  size_t violations = 0;
};

class harness {
 public:
  harness(options o, store_dirs dirs)
      : o_(std::move(o)), dirs_(std::move(dirs)), daemon_(o_.weightd, dirs_, daemon_flags(o_)),
        rng_(o_.seed), clients_(o_.clients) {
    for (unsigned i = 0; i < o_.clients; ++i) clients_[i].index = static_cast<int>(i);
  }

  /// Runs every cycle; the process exit code.
  int run() {
    if (auto st = daemon_.start(); !st.ok()) return fatal("weightd did not start: " + st.to_string());
    unsigned cycle = 1;
    for (; cycle <= o_.cycles; ++cycle)
      if (!run_cycle(cycle)) break;
    finish();
    print_totals(std::min(cycle, o_.cycles));
    return totals_.violations == 0 ? 0 : 1;
  }

 private:
  /// What one cycle saw, for its summary line.
  struct cycle_outcome {
    double load_s = 0;
    int64_t kill_ms = 0;
    op_tally ops;
    verify_outcome verified;
    double restart_s = 0;
    std::optional<check_report> checked;  // none when weightd did not come back
    std::vector<std::string> violations;
  };

  /// One cycle: load, kill, verify, restart, check. False after a violation
  /// (the model no longer matches the store: what follows would be noise).
  bool run_cycle(unsigned cycle) {
    cycle_outcome c;
    load_until_killed(cycle, c);
    c.verified = verify_journal(o_, dirs_);
    if (!c.verified.ok)
      c.violations.push_back("journal verify after the kill failed:\n  " + c.verified.output);
    if (restart(c)) check(cycle, c);
    return report_cycle(cycle, c);
  }

  /// Runs the load clients for a random while, then kills weightd under them.
  void load_until_killed(unsigned cycle, cycle_outcome& c) {
    load_context ctx;
    ctx.address = daemon_.address();
    ctx.lease_id_floor = highest_lease_id_;
    ctx.highest_lease_id = highest_lease_id_;
    ctx.seed = o_.seed;
    load_limits limits;
    std::vector<std::thread> threads;
    for (auto& cm : clients_)
      threads.emplace_back([&, cycle] { run_load_client(cm, ctx, limits, cycle); });
    c.load_s = std::uniform_real_distribution<double>{o_.min_load_s, o_.max_load_s}(rng_);
    std::this_thread::sleep_for(std::chrono::duration<double>(c.load_s));
    ctx.stop = true;  // before the kill: a call that fails from now on was in flight
    c.kill_ms = wall_ms();
    auto killed = daemon_.kill_hard();
    for (auto& t : threads) t.join();
    highest_lease_id_ = std::max(highest_lease_id_, ctx.highest_lease_id.load());
    c.ops = collect_load_results(c.violations);
    if (!killed.ok()) c.violations.push_back(killed.to_string());
  }

  bool restart(cycle_outcome& c) {
    auto began = steady::now();
    if (auto st = daemon_.start(); !st.ok()) {
      c.violations.push_back("weightd did not come back after the kill: " + st.to_string());
      return false;
    }
    c.restart_s = seconds_since(began);
    return true;
  }

  void check(unsigned cycle, cycle_outcome& c) {
    api::client_options co;
    co.address = daemon_.address();
    api::client client{co};
    check_inputs in;
    in.kill_ms = c.kill_ms;
    in.highest_lease_id = highest_lease_id_;
    in.dirs = dirs_;
    in.read_back = o_.read_back;
    in.probe_holder = "probe-" + std::to_string(cycle);
    in.seed = o_.seed + cycle;
    c.checked = check_after_restart(client, clients_, tombstones_, in);
    highest_lease_id_ = std::max(highest_lease_id_, c.checked->highest_lease_id);
    c.violations.insert(c.violations.end(), c.checked->violations.begin(),
                        c.checked->violations.end());
  }

  /// Takes the tallies and the violations the load clients recorded this cycle.
  op_tally collect_load_results(std::vector<std::string>& violations) {
    op_tally ops;
    for (auto& cm : clients_) {
      ops.merge(cm.tally);
      cm.tally = {};
      violations.insert(violations.end(), cm.violations.begin(), cm.violations.end());
      cm.violations.clear();
    }
    return ops;
  }

  /// Prints the cycle's line (and its violations) and adds it to the totals;
  /// false when it had a violation.
  bool report_cycle(unsigned cycle, const cycle_outcome& c) {
    totals_.ops.merge(c.ops);
    std::string line = "cycle " + std::to_string(cycle) + "/" + std::to_string(o_.cycles) + ": " +
                       fixed(c.load_s) + " s of load, " +
                       std::to_string(op_tally::total(c.ops.acknowledged)) + " acknowledged, " +
                       std::to_string(op_tally::total(c.ops.in_flight_at_kill)) +
                       " in flight at the kill";
    if (c.checked) {
      for (const auto& [kind, n] : c.checked->landed) totals_.landed[kind] += n;
      for (const auto& [kind, n] : c.checked->not_landed) totals_.not_landed[kind] += n;
      line += " (" + std::to_string(op_tally::total(c.checked->landed)) + " landed)";
    }
    line += " | journal verify " +
            (c.verified.ok ? c.verified.output.substr(0, c.verified.output.find(',')) : "FAILED") +
            " (" + fixed(c.verified.seconds) + " s)";
    if (c.checked) line += " | " + checked_text(c);
    line += " | violations " + std::to_string(c.violations.size());
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    for (const auto& v : c.violations)
      std::fprintf(stderr, "VIOLATION (cycle %u): %s\n", cycle, v.c_str());
    totals_.violations += c.violations.size();
    return c.violations.empty();
  }

  std::string checked_text(const cycle_outcome& c) const {
    const auto& r = *c.checked;
    return "restart " + fixed(c.restart_s) + " s, " +
           std::to_string(daemon_.orphan_files_removed_at_start()) +
           " orphan files removed at start | checked " + std::to_string(r.revisions) +
           " revisions (" + std::to_string(r.deleting) + " DELETING), " +
           std::to_string(r.objects) + " objects, " + std::to_string(r.leases) + " leases, " +
           std::to_string(r.read_back) + " read back, " + std::to_string(r.tier_files) +
           " tier files | HOT " + mib(r.status.hot().used_bytes()) + " of " +
           mib(r.status.hot().capacity_bytes()) + " MiB, COLD " +
           mib(r.status.cold().used_bytes()) + " MiB";
  }

  static std::string fixed(double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", x);
    return buf;
  }
  static std::string mib(uint64_t bytes) { return fixed(static_cast<double>(bytes) / (1 << 20)); }

  /// Every removal the harness had acknowledged finishes (SPEC: DELETING ->
  /// DELETED, also one a crash interrupted): none is left DELETING for long.
  void await_deletions() {
    api::client_options co;
    co.address = daemon_.address();
    api::client client{co};
    v1::ListRevisionsRequest q;
    q.set_tenant(kTenant);
    q.set_ns(kNamespace);
    q.add_states(ev1::DELETING);
    q.set_limit(1000);
    std::string stuck;
    for (auto deadline = steady::now() + std::chrono::seconds(20); steady::now() < deadline;) {
      auto page = client.list_revisions(q);
      if (!page.ok()) {
        stuck = "ListRevisions failed: " + page.error().to_string();
      } else {
        stuck.clear();
        for (const auto& v : page->revisions())
          stuck += " " + events::canonical_text(events::revision_key::from_proto(v.id()));
        if (stuck.empty()) return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    std::fprintf(stderr, "VIOLATION: still DELETING 20 s after the last cycle:%s\n", stuck.c_str());
    ++totals_.violations;
  }

  /// Stops the last incarnation cleanly and verifies the journal once more.
  void finish() {
    if (!daemon_.running()) return;
    if (totals_.violations == 0) await_deletions();
    if (int code = daemon_.stop(); code != 0) {
      std::fprintf(stderr, "VIOLATION: weightd exited with %d on SIGTERM; its log ends with:\n%s",
                   code, daemon_.log_tail().c_str());
      ++totals_.violations;
    }
    auto verified = verify_journal(o_, dirs_);
    if (!verified.ok) {
      std::fprintf(stderr, "VIOLATION: journal verify after the last stop failed:\n  %s\n",
                   verified.output.c_str());
      ++totals_.violations;
    }
  }

  void print_totals(unsigned cycles) {
    const auto& ops = totals_.ops;
    std::printf(
        "weightd_kill9: %u cycles, seed %llu, %u clients: %llu acknowledged operations (%s); "
        "%llu in flight at the kill (%s), of which %llu landed (%s); %llu rejected (%s); %llu "
        "without an answer while weightd ran; violations %zu\n",
        cycles, static_cast<unsigned long long>(o_.seed), o_.clients,
        static_cast<unsigned long long>(op_tally::total(ops.acknowledged)),
        format_counts(ops.acknowledged).c_str(),
        static_cast<unsigned long long>(op_tally::total(ops.in_flight_at_kill)),
        format_counts(ops.in_flight_at_kill).c_str(),
        static_cast<unsigned long long>(op_tally::total(totals_.landed)),
        format_counts(totals_.landed).c_str(),
        static_cast<unsigned long long>(op_tally::total(ops.rejected)),
        format_counts(ops.rejected).c_str(),
        static_cast<unsigned long long>(op_tally::total(ops.unknown_while_alive)),
        totals_.violations);
  }

  int fatal(const std::string& why) {
    std::fprintf(stderr, "weightd_kill9: %s\n", why.c_str());
    return 2;
  }

  options o_;
  store_dirs dirs_;
  daemon_process daemon_;
  std::mt19937_64 rng_;
  std::vector<client_model> clients_;
  std::set<std::string> tombstones_;
  uint64_t highest_lease_id_ = 0;
  totals totals_;
};

bool parse_duration_bounds(options& o) {
  auto colon = o.duration.find(':');
  try {
    o.min_load_s = std::stod(o.duration.substr(0, colon));
    o.max_load_s = colon == std::string::npos ? o.min_load_s : std::stod(o.duration.substr(colon + 1));
  } catch (const std::exception&) {
    return false;
  }
  return o.min_load_s > 0 && o.max_load_s >= o.min_load_s;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"weightd_kill9: SIGKILL weightd under mixed load, restart, check every "
               "acknowledged effect"};
  app.add_option("--cycles", o.cycles, "Load, kill -9, restart and check this many times")
      ->capture_default_str();
  app.add_option("--clients", o.clients, "Load client threads")->capture_default_str()
      ->check(CLI::Range(1u, 256u));
  app.add_option("--seed", o.seed, "Seed of every random choice (0: a random seed, printed)")
      ->capture_default_str();
  app.add_option("--duration-per-cycle", o.duration,
                 "MIN:MAX seconds of load before each kill (uniformly random between)")
      ->capture_default_str();
  app.add_option("--hot-capacity", o.hot_capacity, "weightd's --hot-capacity")->capture_default_str();
  app.add_option("--snapshot-every", o.snapshot_every, "weightd's --snapshot-every")
      ->capture_default_str();
  app.add_option("--read-back", o.read_back,
                 "Acknowledged objects read back in full after each restart (besides every one "
                 "whose put was in flight at the kill)")
      ->capture_default_str();
  app.add_option("--weightd", o.weightd, "The weightd binary")->capture_default_str();
  app.add_option("--weightctl", o.weightctl, "The weightctl binary (journal verify)")
      ->capture_default_str();
  app.add_flag("--keep", o.keep, "Keep the work directory (it is always kept after a violation)");
  CLI11_PARSE(app, argc, argv);
  if (!parse_duration_bounds(o)) {
    std::fprintf(stderr, "--duration-per-cycle must be MIN:MAX seconds with 0 < MIN <= MAX\n");
    return 2;
  }
  if (o.seed == 0) o.seed = std::random_device{}() | 1;

  store_dirs dirs;
  fs::path work, hot_parent;
  try {
    work = make_temp_dir(fs::temp_directory_path(), "weightd-kill9-");
    // The HOT tier on tmpfs as in production, when there is one.
    std::error_code ec;
    hot_parent = fs::is_directory("/dev/shm", ec) ? make_temp_dir("/dev/shm", "weightd-kill9-")
                                                  : work / "hot-parent";
    fs::create_directories(hot_parent);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weightd_kill9: %s\n", e.what());
    return 2;
  }
  dirs.data = work / "var";
  dirs.hot = hot_parent / "hot";
  dirs.logs = work;
  std::printf("weightd_kill9: %u cycles, %u clients, seed %llu, load %.2f-%.2f s a cycle, work "
              "directory %s, HOT tier %s\n",
              o.cycles, o.clients, static_cast<unsigned long long>(o.seed), o.min_load_s,
              o.max_load_s, work.c_str(), dirs.hot.c_str());
  std::fflush(stdout);

  int code = harness{o, dirs}.run();
  if (code == 0 && !o.keep) {
    std::error_code ec;
    fs::remove_all(work, ec);
    fs::remove_all(hot_parent, ec);
  } else {
    std::printf("kept the work directory %s (logs weightd-N.log) and the HOT tier %s\n",
                work.c_str(), dirs.hot.c_str());
  }
  return code;
}
