// scale_bench: what a store of many revisions costs (GitHub issue #16, item
// 6). For each N of --revisions, in a fresh data directory:
//   - N tiny READY revisions ("r-0" .. "r-<N-1>", a 16-byte payload and its
//     manifest each, 4 journal events) are created in-process through
//     actors::embedded, on --clients threads: revisions/s. Then, once the
//     store is idle again (its queued snapshots written), GetRevision of a
//     random revision in-process at 1 and --readers threads, and the time the
//     embedded store takes to stop;
//   - the real weightd binary is then started on the same directories, with
//     the daemon's defaults: restart time = fork to the first Status that
//     answers, polled every 5 ms; the baseline is the median of three such
//     starts on an empty store;
//   - the daemon's VmRSS (and RssAnon) after 1 s of settling, against the
//     empty daemon's: per revision in KiB, totals in MiB;
//   - ListRevisions pages of 100 on 1 client, following next_page_token and
//     starting over at the end, --list-samples calls: p50 / p99 / max;
//   - GetRevision of a random revision over gRPC: p50 / p99 and calls/s on 1
//     client, calls/s on --readers clients (each a channel of its own), and
//     each rate's ratio to the in-process rate on the same data;
//   - the daemon's stop (SIGTERM -> exit), and one more restart with
//     --verify-on-start=size (the default reads and checksums every replica
//     file: here one small file per object, two per revision).
// Every figure is from this one run, printed, never asserted.
//
//   scale_bench [--revisions 10000,100000] [--clients 64] [--readers 64]
//               [--seconds 2] [--list-samples 500]
//
// Snapshots: the journal writer asks the snapshotter for a whole-state
// snapshot each time snapshot_every more events are written (daemon flag
// --snapshot-every, default 10,000; 0 = never). Each one folds the newest
// snapshot plus the tail, so requests queue up behind one another while
// writes go on. Nothing is written at a clean shutdown (node::stop only stops
// the actors), and AdminService.Snapshot takes one on demand. This bench
// forces none: the embedded store runs with the daemon's defaults, and it
// prints which seq the newest snapshot had when the writes ended and at the
// stop (what the restart folds on top of it).
#include <CLI/CLI.hpp>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>

#include "api/client/client.hpp"
#include "api/server/daemon_config.hpp"
#include "bench_support.hpp"
#include "events/state_codec.hpp"

using namespace weightd;
using namespace weightd::bench;

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

/// The store the daemon opens for --data-dir=<dir.data> --hot-dir=<dir.hot>
/// with every other flag at its default (weightd_main.cpp maps
/// daemon_config to node_config the same way): journal <data>/journal, COLD
/// <data>/cold, HOT <hot> of --hot-capacity.
actors::node_config daemon_layout(const scratch& dir) {
  api::daemon_config d;
  d.data_dir = dir.data.string();
  d.hot_dir = dir.hot.string();
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

events::revision_key revision(size_t i) {
  return {"default", "default", "r-" + std::to_string(i), "main", 1};
}

/// Creates revisions r-0 .. r-<n-1> on `threads` threads; revisions/s.
double create_revisions(actors::embedded& store, size_t n, int threads) {
  std::atomic<size_t> next{0};
  auto start = clock_type::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&] {
      for (size_t i; (i = next++) < n;) ready_revision(store, "r-" + std::to_string(i));
    });
  for (auto& w : workers) w.join();
  return static_cast<double>(n) / seconds_since(start);
}

/// CPU seconds this process has used so far, every thread (user + system).
double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

/// Waits until this process used under a tenth of a core over half a second
/// (the store's work queued by the writes, snapshots, is done), at most
/// `limit`; the seconds waited, or -1 when it never was that idle.
double wait_until_idle(std::chrono::seconds limit) {
  auto start = clock_type::now();
  while (clock_type::now() - start < limit) {
    double before = cpu_seconds();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    if (cpu_seconds() - before < 0.05) return seconds_since(start);
  }
  return -1;
}

/// The seq of the journal's newest whole-state snapshot (0 = none).
uint64_t newest_snapshot(persistence::journal_backend& journal) {
  auto s = journal.load_snapshot(events::kStateSnapshotStream, {});
  if (!s) fail(s.error().to_string());
  return *s ? (*s)->seq : 0;
}

uint64_t head(persistence::journal_backend& journal) {
  auto h = journal.highest_seq();
  if (!h) fail(h.error().to_string());
  return *h;
}

struct latencies {
  double per_second = 0, p50 = 0, p99 = 0, max = 0;  // p50..max in the caller's unit
};

/// Sorted samples -> p50 / p99 / max, each multiplied by `unit`.
latencies summary(std::vector<double> samples, double unit) {
  latencies l;
  if (samples.empty()) return l;
  std::sort(samples.begin(), samples.end());
  auto at = [&](double q) {
    return samples[std::min(samples.size() - 1,
                            static_cast<size_t>(q * static_cast<double>(samples.size())))];
  };
  l.p50 = at(0.50) * unit;
  l.p99 = at(0.99) * unit;
  l.max = samples.back() * unit;
  return l;
}

/// `op` back to back on this thread for `seconds`: calls/s and latency in µs.
latencies timed_calls(double seconds, const std::function<void()>& op) {
  std::vector<double> took;
  auto start = clock_type::now();
  auto deadline = start + std::chrono::duration<double>(seconds);
  for (auto t = start; t < deadline;) {
    op();
    auto done = clock_type::now();
    took.push_back(std::chrono::duration<double>(done - t).count());
    t = done;
  }
  double calls = static_cast<double>(took.size());
  double elapsed = seconds_since(start);
  auto l = summary(std::move(took), 1e6);
  l.per_second = calls / elapsed;
  return l;
}

/// A random revision among `n`, from a generator per thread.
struct random_revisions {
  size_t n;
  std::vector<std::mt19937_64> rng;
  random_revisions(size_t n, int threads) : n(n) {
    for (int t = 0; t < threads; ++t) rng.emplace_back(0x5ca1e + t);
  }
  events::revision_key pick(int thread) { return revision(rng[thread]() % n); }
};

// ------------------------------------------------------------- the daemon

struct memory {
  double rss_kib = 0, anon_kib = 0;
};

/// VmRSS and RssAnon of process `pid` (/proc/<pid>/status, in kB).
memory memory_of(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  memory m;
  for (std::string line; std::getline(status, line);) {
    auto value = [&] { return std::stod(line.substr(line.find(':') + 1)); };
    if (line.rfind("VmRSS:", 0) == 0) m.rss_kib = value();
    if (line.rfind("RssAnon:", 0) == 0) m.anon_kib = value();
  }
  if (m.rss_kib == 0) fail("cannot read the memory of process " + std::to_string(pid));
  return m;
}

/// CPU seconds process `pid` has used (utime + stime of /proc/<pid>/stat).
double cpu_seconds_of(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text{std::istreambuf_iterator<char>(stat), std::istreambuf_iterator<char>()};
  // Fields after the command name in parentheses: state is field 3, utime 14, stime 15.
  std::istringstream rest(text.substr(text.rfind(')') + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

bool port_accepts(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

api::client_options options_for(const std::string& address) {
  api::client_options o;
  o.address = address;
  return o;
}

/// Seconds from `forked` until `d` answers Status, polled every 5 ms (up to
/// 10 minutes). One gRPC channel polling a port that refuses would back off
/// its reconnects by a second and more, so each poll first tries a plain TCP
/// connect, and only a port that accepts gets a Status call, on a fresh
/// client that does not retry.
double wait_until_serving(const daemon_process& d, clock_type::time_point forked) {
  int port = std::stoi(d.address.substr(d.address.rfind(':') + 1));
  auto deadline = forked + std::chrono::minutes(10);
  while (clock_type::now() < deadline) {
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(d.pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == d.pid)
      fail("weightd exited (status " + std::to_string(info.si_status) + ") before it served");
    if (port_accepts(port)) {
      auto o = options_for(d.address);
      o.attempts = 1;
      if (api::client(o).server_status().ok()) return seconds_since(forked);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  fail("weightd did not serve at " + d.address + " within 10 minutes");
}

/// A daemon started on `dir` (with `flags`), measured once it serves and
/// has settled 1 s (its CPU use over that second: a share of one core).
struct started_daemon {
  std::unique_ptr<daemon_process> process;
  double start_seconds = 0, settle_cpu = 0;
  memory mem;
  v1::StatusResponse status;

  explicit started_daemon(const scratch& dir, const std::vector<std::string>& flags = {}) {
    auto forked = clock_type::now();
    process = std::make_unique<daemon_process>(dir, flags);
    start_seconds = wait_until_serving(*process, forked);
    double cpu = cpu_seconds_of(process->pid);
    auto settling = clock_type::now();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    settle_cpu = (cpu_seconds_of(process->pid) - cpu) / seconds_since(settling);
    mem = memory_of(process->pid);
    api::client c(options_for(process->address));
    auto s = c.server_status();
    if (!s) fail(s.error().to_string());
    status = *s;
  }
};

uint64_t ready_count(const v1::StatusResponse& s) {
  auto it = s.revisions_by_state().find("READY");
  return it == s.revisions_by_state().end() ? 0 : it->second;
}

/// `samples` ListRevisions pages of 100 on one client, through the whole
/// listing and over again; latencies in ms.
latencies list_pages(api::client& c, size_t samples, size_t& pages_per_pass) {
  std::vector<double> took;
  std::string token;
  size_t pages = 0;
  pages_per_pass = 0;
  for (size_t i = 0; i < samples; ++i) {
    v1::ListRevisionsRequest req;
    req.set_tenant("default");
    req.set_ns("default");
    req.set_limit(100);
    req.set_page_token(token);
    auto start = clock_type::now();
    auto page = c.list_revisions(req);
    took.push_back(seconds_since(start));
    if (!page) fail(page.error().to_string());
    ++pages;
    token = page->next_page_token();
    if (token.empty()) {
      if (!pages_per_pass) pages_per_pass = pages;
      pages = 0;
    }
  }
  return summary(std::move(took), 1e3);
}

std::vector<std::unique_ptr<api::client>> clients_of(int n, const std::string& address) {
  std::vector<std::unique_ptr<api::client>> out;
  for (int i = 0; i < n; ++i) out.push_back(std::make_unique<api::client>(options_for(address)));
  return out;
}

double mib(double kib) { return kib / 1024; }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"scale_bench: N revisions - creation, restart, RSS, ListRevisions, GetRevision"};
  std::vector<size_t> revision_counts{10'000, 100'000};
  int clients = 64, readers = 64;
  double seconds = 2;
  size_t list_samples = 500;
  app.add_option("--revisions", revision_counts, "Revision counts, one store each")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--clients", clients, "Threads creating the revisions")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--readers", readers, "Threads (and gRPC clients) of the many-reader figures")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--seconds", seconds, "Measuring time per GetRevision figure")
      ->capture_default_str();
  app.add_option("--list-samples", list_samples, "ListRevisions calls per latency figure")
      ->check(CLI::Range(size_t{1}, size_t{10'000'000}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);  // the embedded store logs at info

  std::printf("scale_bench: tiny READY revisions (16-byte payload + manifest), created in-process "
              "on %d threads; then the weightd binary restarted on them\n", clients);
  // The empty store's start is a few tens of ms, where a single sample can
  // be off by 3x (a busy core): the baseline is the median of three starts.
  memory empty_mem;
  double empty_start = 0;
  {
    std::vector<double> starts;
    uint64_t empty_seq = 0;
    for (int i = 0; i < 3; ++i) {
      scratch empty{"weightd-scale-bench-empty"};
      started_daemon d{empty};
      starts.push_back(d.start_seconds);
      if (i == 1) empty_mem = d.mem;
      empty_seq = d.status.journal_seq();
    }
    std::sort(starts.begin(), starts.end());
    empty_start = starts[1];
    std::printf("empty store: daemon serves %.3f s after fork (median of 3: %.3f %.3f %.3f), "
                "VmRSS %.1f MiB (RssAnon %.1f MiB), journal seq %llu\n",
                empty_start, starts[0], starts[1], starts[2], mib(empty_mem.rss_kib),
                mib(empty_mem.anon_kib), static_cast<unsigned long long>(empty_seq));
    std::fflush(stdout);
  }

  for (size_t n : revision_counts) {
    if (n == 0) continue;
    scratch dir{"weightd-scale-bench-" + std::to_string(n)};
    double created_per_s = 0, idle_after_s = 0, stop_s = 0;
    uint64_t written_seq = 0, written_snapshot = 0, stop_seq = 0, stop_snapshot = 0;
    latencies local_one;
    double local_many = 0;
    {
      auto started = actors::embedded::start(daemon_layout(dir));
      if (!started) fail(started.error().to_string());
      auto store = std::move(*started);
      auto journal = store->handles().backend();
      created_per_s = create_revisions(*store, n, clients);
      written_seq = head(*journal);
      written_snapshot = newest_snapshot(*journal);
      // The in-process figures on a quiet store, as the daemon's are.
      idle_after_s = wait_until_idle(std::chrono::seconds(300));
      random_revisions pick{n, std::max(1, readers)};
      auto get = [&](int t) {
        if (auto r = store->get_revision({pick.pick(t), false}).get(); !r)
          fail(r.error().to_string());
      };
      local_one = timed_calls(seconds, [&] { get(0); });
      local_many = ops_per_second(readers, seconds, get);
      stop_seq = head(*journal);
      stop_snapshot = newest_snapshot(*journal);
      journal.reset();
      auto stopping = clock_type::now();
      store.reset();  // its locks are released, the journal closed
      stop_s = seconds_since(stopping);
    }

    started_daemon d{dir};
    api::client control(options_for(d.process->address));
    size_t pages_per_pass = 0;
    auto list = list_pages(control, list_samples, pages_per_pass);

    random_revisions pick{n, std::max(1, readers)};
    auto remote = clients_of(readers, d.process->address);
    auto get = [&](api::client& c, int t) {
      v1::GetRevisionRequest req;
      *req.mutable_id() = pick.pick(t).to_proto();
      if (auto r = c.get_revision(req); !r) fail(r.error().to_string());
    };
    auto remote_one = timed_calls(seconds, [&] { get(control, 0); });
    double remote_many = ops_per_second(readers, seconds, [&](int t) { get(*remote[t], t); });
    remote.clear();
    auto stopping = clock_type::now();
    d.process.reset();  // SIGTERM, then waits for the exit
    double daemon_stop_s = seconds_since(stopping);
    // The same restart with the replicas' sizes checked instead of their
    // checksums (reading every replica file is the default).
    double sizes_only_start_s = started_daemon{dir, {"--verify-on-start=size"}}.start_seconds;

    double per_revision_kib = (d.mem.rss_kib - empty_mem.rss_kib) / static_cast<double>(n);
    double per_revision_anon_kib = (d.mem.anon_kib - empty_mem.anon_kib) / static_cast<double>(n);
    uint64_t seq = d.status.journal_seq();
    std::printf("\nN = %zu revisions\n", n);
    std::printf("  %-30s %10.0f revisions/s (%.1f s)\n", "create (embedded)", created_per_s,
                static_cast<double>(n) / created_per_s);
    std::printf("  %-30s %10llu events, %.2f per revision; READY %llu\n", "journal after restart",
                static_cast<unsigned long long>(seq),
                static_cast<double>(seq) / static_cast<double>(n),
                static_cast<unsigned long long>(ready_count(d.status)));
    std::printf("  %-30s every %llu events; newest at seq %llu of %llu when the writes ended, ",
                "snapshots",
                static_cast<unsigned long long>(api::daemon_config{}.snapshot_every),
                static_cast<unsigned long long>(written_snapshot),
                static_cast<unsigned long long>(written_seq));
    if (idle_after_s >= 0)
      std::printf("store idle %.1f s later\n", idle_after_s);
    else
      std::printf("store still busy 300 s later\n");
    std::printf("  %-30s %10.3f s  (newest snapshot at seq %llu of %llu: %llu events to fold)\n",
                "stop (embedded)", stop_s, static_cast<unsigned long long>(stop_snapshot),
                static_cast<unsigned long long>(stop_seq),
                static_cast<unsigned long long>(stop_seq - stop_snapshot));
    std::printf("  %-30s %10.3f s  (empty %.3f s, %.2fx)\n", "restart (fork -> Status)",
                d.start_seconds, empty_start, d.start_seconds / empty_start);
    std::printf("  %-30s %10.3f s\n", "  --verify-on-start=size", sizes_only_start_s);
    std::printf("  %-30s %10.3f s\n", "daemon stop (SIGTERM -> exit)", daemon_stop_s);
    std::printf("  %-30s %9.0f%% of a core\n", "daemon CPU in the settle 1 s", 100 * d.settle_cpu);
    std::printf("  %-30s %10.1f MiB (empty %.1f MiB); %.2f KiB per revision\n", "daemon VmRSS",
                mib(d.mem.rss_kib), mib(empty_mem.rss_kib), per_revision_kib);
    std::printf("  %-30s %10.1f MiB (empty %.1f MiB); %.2f KiB per revision\n", "daemon RssAnon",
                mib(d.mem.anon_kib), mib(empty_mem.anon_kib), per_revision_anon_kib);
    std::printf("  %-30s p50 %.2f ms, p99 %.2f ms, max %.2f ms (%zu calls; %zu pages a pass)\n",
                "ListRevisions, 100 a page", list.p50, list.p99, list.max, list_samples,
                pages_per_pass ? pages_per_pass : (n + 99) / 100);
    std::printf("  %-30s %8s %13s %10s %8s %9s %9s\n", "GetRevision (random)", "threads",
                "in-process/s", "gRPC/s", "ratio", "p50 us", "p99 us");
    std::printf("  %-30s %8d %13.0f %10.0f %7.3fx %9.0f %9.0f\n", "", 1, local_one.per_second,
                remote_one.per_second, remote_one.per_second / local_one.per_second,
                remote_one.p50, remote_one.p99);
    std::printf("  %-30s %8d %13.0f %10.0f %7.3fx %9s %9s\n", "", readers, local_many, remote_many,
                remote_many / local_many, "-", "-");
    std::fflush(stdout);
  }
  return 0;
}
