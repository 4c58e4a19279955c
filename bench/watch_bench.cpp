// watch_bench: what Watch (SPEC §4) costs and how fast it delivers. A real
// weightd process serves one READY revision; --writers client threads drive
// durable lease acquire + release pairs on it (two fsynced journal events per
// pair) as fast as they can, while N watchers (each a thread with a client of
// its own, watching everything from the head) take every event. Printed, for
// N = 0 (the baseline) and each --watchers count:
//   - the writer's events/s and its ratio to the rate with no watcher;
//   - events/s each watcher took while the writer ran (mean and slowest) and
//     how long the slowest took to catch up after the writer stopped;
//   - commit -> watcher latency: --samples single acquires, one at a time;
//     time from the AcquireLease reply to each watcher's on_event for that
//     event (matched by request_id), p50 / p99 / max over every watcher.
// Prints figures; asserts nothing.
//
//   watch_bench [--seconds 3] [--watchers 1,64] [--writers 8] [--samples 200]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>

#include "api/client/client.hpp"
#include "bench_support.hpp"
#include "events/event_type.hpp"

using namespace weightd;
using namespace weightd::bench;

namespace {

using clock_type = std::chrono::steady_clock;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch())
      .count();
}

api::client_options options_for(const std::string& address) {
  api::client_options o;
  o.address = address;
  o.deadline = std::chrono::milliseconds{30'000};
  return o;
}

/// One watcher: a thread with a client of its own in client::watch from
/// `from_seq` until stop(). It counts events, keeps the last global_seq, and
/// stamps the arrival of latency sample i (a lease_granted whose request_id
/// is "lat-<i>").
struct watcher {
  api::client client;
  grpc::ClientContext ctx;
  std::atomic<uint64_t> events{0}, last_seq{0};
  std::vector<int64_t> arrival_ns;    // per latency sample, written before `samples_seen`
  std::atomic<size_t> samples_seen{0};
  status ended;
  std::thread thread;

  watcher(const std::string& address, uint64_t from_seq, size_t samples)
      : client(options_for(address)), arrival_ns(samples, 0) {
    v1::WatchRequest req;
    req.set_from_seq(from_seq);
    thread = std::thread([this, req] {
      ended = client.watch(req, [this](const events::v1::Envelope& e) {
        const auto& rid = e.request_id();
        if (e.has_lease_granted() && rid.size() > 4 && rid.compare(0, 4, "lat-") == 0) {
          size_t i = std::stoul(rid.substr(4));
          if (i < arrival_ns.size()) {
            arrival_ns[i] = now_ns();
            samples_seen.store(i + 1, std::memory_order_release);
          }
        }
        last_seq.store(e.global_seq(), std::memory_order_relaxed);
        events.fetch_add(1, std::memory_order_relaxed);
        return true;
      }, &ctx);
    });
  }
  void stop() {
    ctx.TryCancel();
    if (thread.joinable()) thread.join();
  }
  ~watcher() { stop(); }
};

using watchers_t = std::vector<std::unique_ptr<watcher>>;

/// Waits until `done()` (polling every 200 µs) for at most `limit`; false
/// when it never was.
bool wait_for(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  auto deadline = clock_type::now() + limit;
  while (!done()) {
    if (clock_type::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

bool all_at(const watchers_t& ws, uint64_t seq) {
  for (const auto& w : ws)
    if (w->last_seq.load(std::memory_order_relaxed) < seq) return false;
  return true;
}

uint64_t journal_seq(api::client& c) {
  auto s = c.server_status();
  if (!s) fail(s.error().to_string());
  return s->journal_seq();
}

/// Acquires a lease on `rid` (request_id `request_id`); returns its id.
uint64_t acquire(api::client& c, const events::revision_key& rid, const std::string& holder,
                 const std::string& request_id = "") {
  v1::AcquireLeaseRequest req;
  *req.mutable_id() = rid.to_proto();
  req.set_holder(holder);
  req.set_ttl_ms(60'000);
  req.set_request_id(request_id);
  auto lease = c.acquire_lease(req);
  if (!lease) fail(lease.error().to_string());
  return lease->lease_id();
}

void release(api::client& c, uint64_t lease_id) {
  v1::ReleaseLeaseRequest req;
  req.set_lease_id(lease_id);
  if (auto r = c.release_lease(req); !r) fail(r.error().to_string());
}

struct throughput {
  double writer_events_per_s = 0;
  double mean_watcher_events_per_s = 0, slowest_watcher_events_per_s = 0;
  double catch_up_ms = 0;
};

/// The writers' pairs for `seconds`, with `ws` watching.
throughput drive(std::vector<std::unique_ptr<api::client>>& writers, api::client& status_client,
                 const events::revision_key& rid, const watchers_t& ws, double seconds) {
  std::vector<uint64_t> before;
  for (const auto& w : ws) before.push_back(w->events.load());
  auto start = clock_type::now();
  double pairs_per_s = ops_per_second(static_cast<int>(writers.size()), seconds, [&](int c) {
    release(*writers[c], acquire(*writers[c], rid, "writer-" + std::to_string(c)));
  });
  auto stop = clock_type::now();
  throughput t;
  t.writer_events_per_s = 2 * pairs_per_s;
  if (ws.empty()) return t;
  double elapsed = std::chrono::duration<double>(stop - start).count();
  double sum = 0, slowest = INFINITY;
  for (size_t i = 0; i < ws.size(); ++i) {
    double rate = static_cast<double>(ws[i]->events.load() - before[i]) / elapsed;
    sum += rate;
    slowest = std::min(slowest, rate);
  }
  t.mean_watcher_events_per_s = sum / static_cast<double>(ws.size());
  t.slowest_watcher_events_per_s = slowest;
  uint64_t head = journal_seq(status_client);
  if (!wait_for([&] { return all_at(ws, head); }, std::chrono::seconds(60)))
    fail("the watchers did not catch up with seq " + std::to_string(head));
  t.catch_up_ms = std::chrono::duration<double, std::milli>(clock_type::now() - stop).count();
  return t;
}

struct latency {
  double p50 = 0, p99 = 0, max = 0;
  size_t before_reply = 0, count = 0;
};

/// `samples` acquires one at a time; each waits for every watcher to take
/// its lease_granted before it is released and the next one starts.
latency measure_latency(api::client& c, const events::revision_key& rid, const watchers_t& ws,
                        size_t samples) {
  std::vector<double> ms;
  for (size_t i = 0; i < samples; ++i) {
    uint64_t id = acquire(c, rid, "latency", "lat-" + std::to_string(i));
    int64_t reply = now_ns();
    bool came = wait_for([&] {
      for (const auto& w : ws)
        if (w->samples_seen.load(std::memory_order_acquire) < i + 1) return false;
      return true;
    }, std::chrono::seconds(10));
    if (!came) fail("latency sample " + std::to_string(i) + " never reached every watcher");
    for (const auto& w : ws) ms.push_back(static_cast<double>(w->arrival_ns[i] - reply) / 1e6);
    release(c, id);
  }
  latency l;
  l.count = ms.size();
  if (ms.empty()) return l;
  for (double m : ms) l.before_reply += m < 0;
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(q * static_cast<double>(ms.size())))];
  };
  l.p50 = at(0.50);
  l.p99 = at(0.99);
  l.max = ms.back();
  return l;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"watch_bench: Watch delivery rate and commit -> watcher latency"};
  double seconds = 3;
  std::vector<int> watcher_counts{1, 64};
  int writer_threads = 8;
  size_t samples = 200;
  app.add_option("--seconds", seconds, "Writer time per throughput figure")->capture_default_str();
  app.add_option("--watchers", watcher_counts, "Concurrent watcher counts")->delimiter(',');
  app.add_option("--writers", writer_threads, "Writer threads (acquire+release loops)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--samples", samples, "Single writes per latency figure")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  scratch dir("weightd-watch-bench");
  daemon_process daemon(dir);
  api::client control(options_for(daemon.address));
  daemon.wait_until_up(control);
  events::revision_key rid{"default", "default", "watched-model", "main", 1};
  ready_revision(control, rid);
  std::vector<std::unique_ptr<api::client>> writers;
  for (int i = 0; i < writer_threads; ++i)
    writers.push_back(std::make_unique<api::client>(options_for(daemon.address)));

  std::printf("watch_bench: %d writer threads of lease acquire+release (2 fsynced events each), "
              "%.0f s per figure; latency over %zu single acquires\n",
              writer_threads, seconds, samples);
  std::printf("%8s %12s %9s %14s %14s %10s %9s %9s %9s\n", "watchers", "writer ev/s", "vs none",
              "watcher ev/s", "slowest ev/s", "catch-up", "p50 ms", "p99 ms", "max ms");
  double baseline = drive(writers, control, rid, {}, seconds).writer_events_per_s;
  std::printf("%8d %12.0f %8.2fx %14s %14s %10s %9s %9s %9s\n", 0, baseline, 1.0, "-", "-", "-",
              "-", "-", "-");
  std::fflush(stdout);

  for (int n : watcher_counts) {
    watchers_t ws;
    uint64_t from = journal_seq(control) + 1;
    for (int i = 0; i < n; ++i)
      ws.push_back(std::make_unique<watcher>(daemon.address, from, samples));
    // One pair every watcher sees: all of them are streaming, at the head.
    release(control, acquire(control, rid, "warm-up"));
    uint64_t head = journal_seq(control);
    if (!wait_for([&] { return all_at(ws, head); }, std::chrono::seconds(30)))
      fail("the watchers did not start");

    auto t = drive(writers, control, rid, ws, seconds);
    auto l = measure_latency(control, rid, ws, samples);
    for (auto& w : ws) w->stop();
    std::printf("%8d %12.0f %8.2fx %14.0f %14.0f %7.0f ms %9.2f %9.2f %9.2f\n", n,
                t.writer_events_per_s, t.writer_events_per_s / baseline,
                t.mean_watcher_events_per_s, t.slowest_watcher_events_per_s, t.catch_up_ms, l.p50,
                l.p99, l.max);
    if (l.before_reply)
      std::printf("%8s (%zu of %zu deliveries came before the writer had its reply)\n", "",
                  l.before_reply, l.count);
    std::fflush(stdout);
  }
  return 0;
}
