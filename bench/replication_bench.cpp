// replication_bench: what SPEC §11 replication costs, with real processes: a
// leader weightd (WEIGHTD_DAEMON) and a standby (--follow it) as children on
// loopback, data under /tmp, HOT tiers under /dev/shm.
//  1. Lag under load: for --seconds, --clients threads do lease acquire +
//     release pairs (2 fsynced events) on 4 READY revisions while one thread
//     imports small models (3 x 32 KiB + manifest). A sampler asks the
//     leader, then the standby, for Status every 5 ms (a sample's time: its
//     call's midpoint). Lag in events: leader - standby journal_seq in one
//     round. Lag in ms: for each leader sample (seq L at t), the first later
//     standby sample with journal_seq >= L, minus t (floor: a Status round
//     trip; grain: the 5 ms). Also the standby's own lag_ms, and the
//     leader's events/s.
//  2. Bytes: after the load, the time until the standby holds every replica
//     (mirror_pending 0, mirror_held == mirror_objects). Then a --model-mib
//     model imported on the leader (BeginImport -> CommitImport: MiB/s), and
//     from the leader having stored its payloads until the standby's
//     mirror_copied_bytes grew by them: MiB/s, and the ratio of the two.
//  3. Promotion: a fresh pair on --revisions tiny READY revisions, created
//     in-process before the leader starts (as scale_bench does). Baseline:
//     kill -9 the leader, start it again on its journal: fork -> the first
//     AcquireLease that succeeds. Then kill -9 it again and, once the standby
//     no longer follows, AdminService.Promote on it -> the first AcquireLease
//     that succeeds there; and promotion / restart. The bench keeps a Status
//     channel open to the standby meanwhile, as a monitor would.
// Every wait is bounded; the children die on every way out (destructors, an
// exit handler, a signal thread, PR_SET_PDEATHSIG). Printed, never asserted.
//
//   replication_bench [--seconds 10] [--clients 16] [--model-mib 64] [--revisions 10000]
#include <CLI/CLI.hpp>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <mutex>
#include <set>

#include "api/client/client.hpp"
#include "api/server/daemon_config.hpp"
#include "bench_support.hpp"

using namespace weightd;
using namespace weightd::bench;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;
using ull = unsigned long long;

namespace {

double seconds_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
double seconds_since(clock_type::time_point a) { return seconds_between(a, clock_type::now()); }
constexpr double kMiB = 1024.0 * 1024.0;

// Children and directories, for clean_up (atexit, and the signal thread):
// fail()'s exit and a signal skip the destructors on main's stack.
std::mutex g_mutex;
std::set<pid_t> g_children;
std::vector<fs::path> g_dirs;

void kill_and_reap(pid_t pid) {  // SIGKILL, then at most 10 s for the exit
  ::kill(pid, SIGKILL);
  for (int i = 0; i < 1000 && ::waitpid(pid, nullptr, WNOHANG) == 0; ++i)
    std::this_thread::sleep_for(10ms);
}

void clean_up() {
  std::lock_guard lock(g_mutex);
  for (pid_t pid : g_children) kill_and_reap(pid);
  g_children.clear();
  std::error_code ec;
  for (const auto& d : g_dirs) fs::remove_all(d, ec);
  g_dirs.clear();
}

/// One weightd child: its directories and ports, the same across restarts.
struct member {
  fs::path data, hot;
  std::string address, http, follow;
  pid_t pid = -1;

  member(const fs::path& work, const std::string& name, std::string leader = "")
      : data(work / name),
        hot(fs::path("/dev/shm") / (work.filename().string() + "-" + name)),
        address("127.0.0.1:" + std::to_string(api::free_loopback_port())),
        http("127.0.0.1:" + std::to_string(api::free_loopback_port())),
        follow(std::move(leader)) {
    fs::create_directories(data);
    std::lock_guard lock(g_mutex);
    g_dirs.push_back(hot);
  }
  ~member() { stop(); }
  member(const member&) = delete;
  member& operator=(const member&) = delete;

  void start() {
    std::vector<std::string> args{"weightd", "--listen=" + address, "--http-listen=" + http,
                                  "--data-dir=" + data.string(), "--hot-dir=" + hot.string(),
                                  "--log-level=warn", "--scrub-rate=0"};
    if (!follow.empty()) args.push_back("--follow=" + follow);
    std::vector<char*> argv;  // before fork: the child calls only async-signal-safe functions
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t parent = ::getpid();
    pid = ::fork();
    if (pid < 0) fail("fork failed");
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the bench killed -9: its daemons too
      if (::getppid() != parent) _exit(127);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::execv(WEIGHTD_DAEMON, argv.data());
      _exit(127);
    }
    std::lock_guard lock(g_mutex);
    g_children.insert(pid);
  }
  void kill9() {
    if (pid < 0) return;
    kill_and_reap(pid);
    std::lock_guard lock(g_mutex);
    g_children.erase(std::exchange(pid, -1));
  }
  void stop() {  // SIGTERM, at most 30 s for the exit, then SIGKILL
    if (pid < 0) return;
    ::kill(pid, SIGTERM);
    for (int i = 0; i < 3000 && !exited(); ++i) std::this_thread::sleep_for(10ms);
    kill9();  // reaps it (a zombie until then: its pid is still ours)
  }
  bool exited() const {  // without reaping it
    siginfo_t info{};
    return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           info.si_pid == pid;
  }
};

api::client_options options_for(const std::string& address, int attempts = 3,
                                std::chrono::milliseconds deadline = 30s) {
  api::client_options o;
  o.address = address, o.attempts = attempts, o.deadline = deadline;
  return o;
}

v1::StatusResponse status_of(const std::string& address) {
  auto s = api::client(options_for(address)).server_status();
  if (!s) fail(address + ": " + s.error().to_string());
  return *s;
}

/// Polls `done` every 5 ms for at most `limit`, else fails naming `what`.
void wait_for(const std::function<bool()>& done, std::chrono::seconds limit,
              const std::string& what) {
  for (auto deadline = clock_type::now() + limit; !done(); std::this_thread::sleep_for(5ms))
    if (clock_type::now() > deadline)
      fail(what + ": not within " + std::to_string(limit.count()) + " s");
}

/// A plain TCP connect: a gRPC channel polling a refusing port backs off for
/// a second and more, so the polls below connect first, then use a fresh client.
bool port_accepts(const std::string& address) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1))));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

result<v1::Lease> acquire(api::client& c, const events::revision_key& rid,
                          const std::string& holder) {
  v1::AcquireLeaseRequest req;
  *req.mutable_id() = rid.to_proto();
  req.set_holder(holder);
  req.set_ttl_ms(60'000);
  return c.acquire_lease(req);
}

void release(api::client& c, uint64_t lease_id) {
  v1::ReleaseLeaseRequest req;
  req.set_lease_id(lease_id);
  if (auto r = c.release_lease(req); !r) fail(r.error().to_string());
}

/// Seconds from `from` until `call` (a fresh client each 5 ms poll, at most
/// 10 minutes) returns "" at `m`; else it returns why it failed.
double until_done(const member& m, clock_type::time_point from,
                  const std::function<std::string(api::client&)>& call) {
  std::string last = "the port refused";
  for (; clock_type::now() < from + 10min; std::this_thread::sleep_for(5ms)) {
    if (m.exited()) fail("weightd at " + m.address + " exited");
    api::client c(options_for(m.address, 1, 5s));
    if (port_accepts(m.address) && (last = call(c)).empty()) return seconds_since(from);
  }
  fail("weightd at " + m.address + ": nothing worked within 10 minutes (last: " + last + ")");
}

double until_serving(const member& m, clock_type::time_point from) {
  return until_done(m, from, [](api::client& c) {
    auto s = c.server_status();
    return s ? "" : s.error().to_string();
  });
}

/// Seconds from `from` until an AcquireLease on `rid` succeeds (then released).
double until_written(const member& m, const events::revision_key& rid,
                     clock_type::time_point from) {
  return until_done(m, from, [&](api::client& c) {
    auto lease = acquire(c, rid, "first-write");
    if (!lease) return lease.error().to_string();
    release(c, lease->lease_id());
    return std::string{};
  });
}

events::revision_key revision(const std::string& name) {
  return {"default", "default", name, "main", 1};
}

/// A READY revision of payloads of `sizes` bytes and a manifest, over the
/// client; `stored` (if given) is stamped once every payload is stored.
void import_model(api::client& c, const events::revision_key& id,
                  const std::vector<uint64_t>& sizes, clock_type::time_point* stored = nullptr) {
  uint64_t total = 0;
  for (auto s : sizes) total += s;
  v1::BeginImportRequest begin;
  *begin.mutable_id() = id.to_proto();
  begin.set_expected_payload_count(sizes.size());
  begin.set_expected_logical_bytes(std::max<uint64_t>(total, 1));
  auto begun = c.begin_import(begin);
  if (!begun) fail(begun.error().to_string());
  v1::PutHeader h;
  h.set_group_id(events::payload_group_id(id));
  h.set_data_type(events::v1::DATA_TYPE_WEIGHT);
  auto prefix = events::manifest_key(id);
  prefix.resize(prefix.size() - std::string("manifest").size());
  std::vector<std::string> keys;
  for (size_t i = 0; i < sizes.size(); ++i) {
    h.set_key(prefix + "files/part-" + std::to_string(i));
    if (auto put = c.put_bytes(h, std::string(sizes[i], static_cast<char>('a' + i % 26))); !put)
      fail(put.error().to_string());
    keys.push_back(h.key());
  }
  if (stored) *stored = clock_type::now();
  h.set_key(events::manifest_key(id));
  h.set_data_type(events::v1::DATA_TYPE_METADATA);
  auto meta = c.put_bytes(h, "{\"payloads\":" + std::to_string(keys.size()) + "}");
  if (!meta) fail(meta.error().to_string());
  v1::CommitImportRequest commit;
  *commit.mutable_id() = id.to_proto();
  commit.set_expected_metadata_generation(begun->metadata_generation());
  auto* m = commit.mutable_manifest();
  m->set_manifest_key(h.key());
  m->set_manifest_sha256(meta->sha256());
  m->set_payload_keys_sha256(events::payload_keys_sha256(keys));
  m->set_payload_count(keys.size());
  m->set_logical_bytes(std::max<uint64_t>(total, 1));
  for (const auto& k : keys) commit.add_payload_keys(k);
  if (auto r = c.commit_import(commit); !r) fail(r.error().to_string());
}

bool mirror_done(const v1::StatusResponse& s) {
  return s.mirror_pending() == 0 && s.mirror_held() == s.mirror_objects();
}

/// Waits (at most `limit`) until the standby holds the leader's journal as
/// of now and every replica its journal lists.
void wait_caught_up(const member& leader, api::client& standby, std::chrono::seconds limit) {
  uint64_t target = status_of(leader.address).journal_seq();
  wait_for([&] {
    auto s = standby.server_status();
    return s && s->journal_seq() >= target && mirror_done(*s);
  }, limit, "the standby catching up with seq " + std::to_string(target));
}

ull ready_count(const v1::StatusResponse& s) {
  auto it = s.revisions_by_state().find("READY");
  return it == s.revisions_by_state().end() ? 0 : it->second;
}

struct spread {
  double p50 = 0, p99 = 0, max = 0;
  size_t n = 0;
};
spread summary(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))]; };
  return {at(0.50), at(0.99), v.back(), v.size()};
}

/// The store the daemon opens for --data-dir and --hot-dir, every other flag
/// at its default (weightd_main.cpp maps daemon_config to node_config so).
actors::node_config daemon_layout(const member& m) {
  api::daemon_config d;
  d.data_dir = m.data.string();
  d.hot_dir = m.hot.string();
  actors::node_config c;
  c.journal.dir = d.journal_path();
  c.journal.mode = d.durability();
  c.journal.initial_map_bytes = d.journal_initial_map_bytes;
  c.journal.max_map_bytes = d.journal_max_map_bytes;
  c.hot = {events::v1::TIER_HOT, d.hot_path(), d.hot_capacity_bytes, false};
  c.cold = {events::v1::TIER_COLD, d.cold_path(), d.cold_capacity_bytes, true};
  c.io_workers = d.io_workers;
  c.snapshot_every = d.snapshot_every;
  return c;
}

// ------------------------------------------------------- 1 and 2: lag, bytes
void lag_and_bytes(const fs::path& work, double seconds, int clients, uint64_t model_mib) {
  member leader(work, "leader"), standby(work, "standby", leader.address);
  leader.start();
  until_serving(leader, clock_type::now());
  standby.start();
  until_serving(standby, clock_type::now());
  api::client lc(options_for(leader.address)), sc(options_for(standby.address));
  std::vector<events::revision_key> leased;
  for (int i = 0; i < 4; ++i)
    ready_revision(lc, leased.emplace_back(revision("leased-" + std::to_string(i))));
  wait_caught_up(leader, sc, 60s);

  struct sample { double t; uint64_t seq; };
  std::vector<sample> lead, follow;  // one of each per round
  std::vector<double> own_lag_ms;
  std::atomic<bool> sampling{true}, loading{true};
  std::atomic<uint64_t> standby_seq{0};
  auto t0 = clock_type::now();
  std::thread sampler([&] {
    api::client l(options_for(leader.address, 1, 2s)), s(options_for(standby.address, 1, 2s));
    auto mid = [&](auto a, auto b) { return seconds_between(t0, a) + seconds_between(a, b) / 2; };
    for (auto tick = clock_type::now(); sampling;
         std::this_thread::sleep_until(tick = std::max(tick + 5ms, clock_type::now()))) {
      auto a = clock_type::now();
      auto ls = l.server_status();
      auto b = clock_type::now();
      auto ss = s.server_status();
      if (!ls || !ss) continue;
      lead.push_back({mid(a, b), ls->journal_seq()});
      follow.push_back({mid(b, clock_type::now()), ss->journal_seq()});
      own_lag_ms.push_back(static_cast<double>(ss->lag_ms()));
      standby_seq = ss->journal_seq();
    }
  });
  uint64_t seq_before = status_of(leader.address).journal_seq();
  size_t models = 0;
  std::thread importer([&] {
    api::client c(options_for(leader.address));
    for (uint64_t kib32 = 32 << 10; loading; ++models)
      import_model(c, revision("small-" + std::to_string(models)), {kib32, kib32, kib32});
  });
  std::vector<std::unique_ptr<api::client>> lessees;
  for (int i = 0; i < clients; ++i)
    lessees.push_back(std::make_unique<api::client>(options_for(leader.address)));
  double pairs_per_s = ops_per_second(clients, seconds, [&](int i) {
    auto lease = acquire(*lessees[i], leased[i % leased.size()], "load-" + std::to_string(i));
    if (!lease) fail(lease.error().to_string());
    release(*lessees[i], lease->lease_id());
  });
  loading = false;
  importer.join();
  auto load_end = clock_type::now();
  double load_s = seconds_between(t0, load_end);
  uint64_t seq_after = status_of(leader.address).journal_seq();
  wait_for([&] { return standby_seq >= seq_after; }, 120s, "the standby's journal after the load");
  double journal_after_ms = 1e3 * seconds_since(load_end);
  sampling = false;
  sampler.join();
  wait_for([&] { auto s = sc.server_status(); return s && mirror_done(*s); }, 300s,
           "the standby's copies after the load");
  double bytes_after_ms = 1e3 * seconds_since(load_end);
  auto after_load = status_of(standby.address);

  // Lag in ms: the first standby sample at >= L (an upper bound), and the
  // crossing interpolated between it and the sample before it.
  std::vector<double> behind, lag_ms, crossed_ms;
  size_t unreached = 0;
  for (size_t i = 0, j = 0; i < lead.size() && lead[i].t <= load_s; ++i) {
    behind.push_back(lead[i].seq > follow[i].seq ? double(lead[i].seq - follow[i].seq) : 0.0);
    while (j < follow.size() && (follow[j].t < lead[i].t || follow[j].seq < lead[i].seq)) ++j;
    if (j == follow.size()) {
      ++unreached;
      continue;
    }
    const auto &at = follow[j], &prev = follow[j ? j - 1 : 0];
    double cross = prev.seq >= lead[i].seq  // had it already (or j is 0)
                       ? prev.t
                       : prev.t + (at.t - prev.t) * double(lead[i].seq - prev.seq) /
                                      double(at.seq - prev.seq);
    lag_ms.push_back(1e3 * (at.t - lead[i].t));
    crossed_ms.push_back(1e3 * std::max(0.0, cross - lead[i].t));
  }
  own_lag_ms.resize(std::min(own_lag_ms.size(), behind.size()));
  auto ev = summary(behind), ms = summary(lag_ms), own = summary(own_lag_ms);
  auto crossed = summary(crossed_ms);
  std::printf("\n1. lag under load: %d lease acquire+release threads on %zu revisions and 1 "
              "importing 3 x 32 KiB models, %.1f s\n", clients, leased.size(), load_s);
  std::printf("  %-36s %9.0f events/s (%.0f lease pairs/s, %zu models imported)\n",
              "leader's journal", double(seq_after - seq_before) / load_s, pairs_per_s, models);
  std::printf("  %-36s p50 %.0f, p99 %.0f, max %.0f events (%zu Status rounds)\n",
              "lag in events (leader - standby)", ev.p50, ev.p99, ev.max, ev.n);
  std::printf("  %-36s p50 %.2f, p99 %.2f, max %.2f ms (%zu leader samples, %zu never reached)\n",
              "lag in ms (leader seq -> standby)", ms.p50, ms.p99, ms.max, ms.n, unreached);
  std::printf("  %-36s p50 %.2f, p99 %.2f, max %.2f ms\n", "  interpolated between samples",
              crossed.p50, crossed.p99, crossed.max);
  std::printf("  %-36s p50 %.0f, p99 %.0f, max %.0f ms\n", "the standby's own lag_ms", own.p50,
              own.p99, own.max);
  std::printf("  %-36s %9.1f ms after the load (seq %llu)\n", "standby's journal caught up",
              journal_after_ms, ull(seq_after));

  // 2. The bytes: every replica after the load, then one large model.
  std::printf("\n2. bytes\n");
  std::printf("  %-36s %9.1f ms after the load (%llu objects, %.1f MiB copied so far)%s%s\n",
              "standby holds every replica", bytes_after_ms, ull(after_load.mirror_held()),
              double(after_load.mirror_copied_bytes()) / kMiB,
              after_load.mirror_error().empty() ? "" : "; last copy error: ",
              after_load.mirror_error().c_str());
  std::fflush(stdout);
  uint64_t model_bytes = model_mib << 20, copied_before = after_load.mirror_copied_bytes();
  std::vector<uint64_t> parts;  // payloads of <= 64 MiB, as weightctl import cuts them
  for (uint64_t left = model_bytes; left > 0; left -= parts.back())
    parts.push_back(std::min<uint64_t>(left, 64ull << 20));
  std::atomic<bool> watching{true};
  std::atomic<int64_t> held_ns{0};  // since `begun`, when the standby's copy was seen
  auto begun = clock_type::now();
  std::thread copy_watch([&] {
    api::client s(options_for(standby.address, 1, 2s));
    for (; watching; std::this_thread::sleep_for(5ms)) {
      auto st = s.server_status();
      if (st && st->mirror_copied_bytes() >= copied_before + model_bytes)
        return held_ns.store((clock_type::now() - begun).count());
    }
  });
  clock_type::time_point stored;
  import_model(lc, revision("large-model"), parts, &stored);
  double import_s = seconds_since(begun);
  wait_for([&] { return held_ns != 0; }, 600s, "the standby's copy of the model");
  watching = false;
  copy_watch.join();
  auto held = begun + clock_type::duration(held_ns.load());
  double copy_s = std::max(1e-6, seconds_between(stored, held));
  double import_rate = double(model_bytes) / kMiB / import_s;
  double copy_rate = double(model_bytes) / kMiB / copy_s;
  std::printf("  %-36s %9.3f s, %.0f MiB/s (BeginImport -> CommitImport, %zu payloads)\n",
              ("import of " + std::to_string(model_mib) + " MiB on the leader").c_str(), import_s,
              import_rate, parts.size());
  std::printf("  %-36s %9.3f s after the leader stored it (%.3f s after the commit), %.0f MiB/s: "
              "%.2fx the import's\n", "the standby holds its bytes", copy_s,
              seconds_between(begun, held) - import_s, copy_rate, copy_rate / import_rate);
  std::fflush(stdout);
}

// ------------------------------------------------------------ 3. promotion
void promotion(const fs::path& work, size_t revisions, int clients) {
  member leader(work, "leader-n"), standby(work, "standby-n", leader.address);
  auto created = clock_type::now();
  {
    auto started = actors::embedded::start(daemon_layout(leader));
    if (!started) fail(started.error().to_string());
    auto store = std::move(*started);
    std::atomic<size_t> next{0};
    std::vector<std::thread> workers;
    for (int t = 0; t < clients; ++t)
      workers.emplace_back([&] {
        for (size_t i; (i = next++) < revisions;) ready_revision(*store, "r-" + std::to_string(i));
      });
    for (auto& w : workers) w.join();
  }  // the embedded store stops; its journal is the leader's
  double created_per_s = double(revisions) / seconds_since(created);
  leader.start();
  double first_start_s = until_serving(leader, clock_type::now());
  auto forked = clock_type::now();
  standby.start();
  until_serving(standby, forked);
  api::client sc(options_for(standby.address));
  auto limit = std::chrono::seconds(120 + revisions / 50);
  wait_caught_up(leader, sc, limit);
  double first_copy_s = seconds_since(forked);
  auto before = status_of(leader.address);

  // The baseline: the leader itself, killed and started again on its journal.
  auto rid = revision("r-0");
  leader.kill9();
  auto restarted = clock_type::now();
  leader.start();
  double restart_s = until_written(leader, rid, restarted);
  auto after_restart = status_of(leader.address);
  wait_for([&] { auto s = sc.server_status(); return s && s->following(); }, 60s,
           "the standby following again");
  wait_caught_up(leader, sc, limit);
  uint64_t last_seq = status_of(leader.address).journal_seq();

  leader.kill9();
  auto killed = clock_type::now();
  wait_for([&] { auto s = sc.server_status(); return s && !s->following(); }, 60s,
           "the standby noticing its leader gone");
  double noticed_ms = 1e3 * seconds_since(killed);
  auto promoting = clock_type::now();
  result<v1::PromoteResponse> promoted{errc::not_ready, "not asked"};
  wait_for([&] {  // NOT_READY while it still believes in a stream to its leader
    promoted = api::client(options_for(standby.address, 1, 10s)).promote({});
    return promoted.ok() || promoted.error().code() != errc::not_ready;
  }, 30s, "Promote");
  if (!promoted) fail("Promote: " + promoted.error().to_string());
  double promote_ms = 1e3 * seconds_since(promoting);
  double promotion_s = until_written(standby, rid, promoting);
  auto now_leader = status_of(standby.address);

  std::printf("\n3. promotion: %zu tiny READY revisions (created in-process, %.0f revisions/s)\n",
              revisions, created_per_s);
  std::printf("  %-36s %9llu events, READY %llu; the leader served %.3f s after fork\n",
              "leader's journal", ull(before.journal_seq()), ready_count(before), first_start_s);
  std::printf("  %-36s %9.3f s (fork -> its journal and every replica)\n", "standby's first copy",
              first_copy_s);
  std::printf("  %-36s %9.3f s (then READY %llu, journal seq %llu)\n",
              "leader restart: fork -> 1st write", restart_s, ready_count(after_restart),
              ull(after_restart.journal_seq()));
  std::printf("  %-36s %9.1f ms after kill -9 (the leader's last seq %llu)\n",
              "standby stops following", noticed_ms, ull(last_seq));
  std::printf("  %-36s %9.3f s (Promote answered in %.1f ms: epoch %llu at seq %llu; then READY "
              "%llu, journal seq %llu)\n", "promotion: Promote -> 1st write", promotion_s,
              promote_ms, ull(promoted->epoch()), ull(promoted->journal_seq()),
              ready_count(now_leader), ull(now_leader.journal_seq()));
  std::printf("  %-36s %9.2fx\n", "promotion / restart", promotion_s / restart_s);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"replication_bench: a standby's lag, its copy of the bytes, and promotion"};
  double seconds = 10;
  int clients = 16;
  uint64_t model_mib = 64;
  size_t revisions = 10'000;
  app.add_option("--seconds", seconds, "Length of the load (part 1)")->capture_default_str();
  app.add_option("--clients", clients, "Lease acquire+release threads of the load")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--model-mib", model_mib, "The model whose copy is timed (part 2)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{16384}))
      ->capture_default_str();
  app.add_option("--revisions", revisions, "Revisions on the leader at the promotion (part 3)")
      ->check(CLI::Range(size_t{1}, size_t{10'000'000}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);  // the embedded store of part 3 logs at info

  // SIGINT, SIGTERM and SIGHUP go to one thread: it kills the children and leaves.
  sigset_t stops;
  sigemptyset(&stops);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stops, s);
  ::pthread_sigmask(SIG_BLOCK, &stops, nullptr);
  std::thread([stops] {
    int sig = 0;
    ::sigwait(&stops, &sig);
    std::fprintf(stderr, "bench: signal %d; killing the daemons\n", sig);
    clean_up();
    _exit(128 + sig);
  }).detach();
  std::atexit(clean_up);
  auto work = fs::temp_directory_path() /
              ("weightd-replication-bench-" + std::to_string(::getpid()));
  {
    std::lock_guard lock(g_mutex);
    g_dirs.push_back(work);
  }

  std::printf("replication_bench: a leader and a standby weightd (--follow) as child processes on "
              "loopback, fsynced journals, HOT tiers under /dev/shm\n");
  std::fflush(stdout);
  lag_and_bytes(work, seconds, clients, model_mib);
  promotion(work, revisions, clients);
  return 0;
}
