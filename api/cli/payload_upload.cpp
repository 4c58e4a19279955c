#include "api/cli/payload_upload.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "api/cli/lease_commands.hpp"

namespace weightd::api {

namespace {

/// What the workers share: the next payload, the first failure, and the
/// puts in flight (a refused put waits for another one to end).
struct upload_floor {
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> done{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;  // guards everything below
  std::condition_variable flight_ended;
  status failure;
  int in_flight = 0;      // puts under way
  uint64_t released = 0;  // puts that ended holding a reservation

  void fail(const status& why) {
    std::lock_guard lock{mutex};
    if (!failed.exchange(true)) failure = why;
    flight_ended.notify_all();  // a waiter sees `failed` on waking
  }
};

/// Puts one payload, waiting and trying again while the refusal is this
/// import's own parallelism; the put's result.
result<v1::ObjectInfo> put_one(client& c, const payload_put& p, upload_floor& floor,
                               progress_line& bar) {
  for (;;) {
    uint64_t released_before;
    {
      std::lock_guard lock{floor.mutex};
      ++floor.in_flight;
      released_before = floor.released;
    }
    uint64_t sent = 0;
    auto put = c.put_file(p.header, p.source, p.offset, p.size, [&](uint64_t d) {
      bar.show(floor.done += d - sent, p.file, p.file_number);
      sent = d;
      return !interrupted();
    });
    floor.done -= sent;  // counted whole by the caller when it stands
    bool refused = !put && put.error().code() == errc::resource_exhausted;
    std::unique_lock lock{floor.mutex};
    --floor.in_flight;
    if (!refused) ++floor.released;
    floor.flight_ended.notify_all();
    if (!refused || (floor.in_flight == 0 && floor.released == released_before)) return put;
    // Wait until another upload gives its reservation back.
    floor.flight_ended.wait(lock, [&] {
      return floor.failed || floor.in_flight == 0 || floor.released != released_before;
    });
    if (floor.failed || floor.released == released_before) return put;
  }
}

}  // namespace

status put_payloads(const client_options& connection, const std::vector<payload_put>& puts,
                    unsigned jobs, progress_line& bar, uint64_t already_done,
                    const std::function<void(const std::string&)>& stored) {
  upload_floor floor;
  floor.done = already_done;
  auto worker = [&] {
    client c{connection};
    for (size_t i; !floor.failed && !interrupted() && (i = floor.next++) < puts.size();) {
      const auto& p = puts[i];
      auto put = put_one(c, p, floor, bar);
      if (!put) return floor.fail(put.error());
      floor.done += p.size;
      bar.show(floor.done, p.file, p.file_number);
      stored(p.header.key());
    }
  };
  std::vector<std::thread> workers;
  for (size_t j = 0; j < std::min<size_t>(jobs, puts.size()); ++j) workers.emplace_back(worker);
  for (auto& w : workers) w.join();
  return floor.failure;
}

}  // namespace weightd::api
