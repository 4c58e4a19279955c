// Limits on the object streams of one daemon (SPEC §9: "concurrent streams per
// connection"), so that no client can exhaust it with streams it leaves open:
//
// - at most `max_streams` Put and Get streams are open in all, and at most
//   `max_streams_per_connection` from one client connection; a stream over a
//   limit is refused at once with RESOURCE_EXHAUSTED naming the flag; and at
//   most `max_puts_per_tenant` Put streams of one tenant are open (one tenant
//   cannot take every place, SPEC §9);
// - a Put that sends no bytes for `put_idle_timeout` is ended by the sweeper
//   (its reservation is given back), besides the store's overall put timeout;
//   so is a Watch whose client takes no event for `watch_stall_timeout`;
// - the chunks all Get streams hold in flight (a chunk read and not yet taken
//   by its client) add up to at most `get_buffer_bytes`, beyond a small floor
//   each stream always has: streams that a client opens and never reads cost
//   the daemon little, however many they are.
//
// Everything here runs on gRPC threads and one sweeper thread of its own; the
// lock is held only to count or to look at a clock, never across I/O.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "events/status.hpp"

namespace weightd::api {

struct stream_limit_options {
  uint32_t max_streams = 1024;
  uint32_t max_streams_per_connection = 128;
  std::chrono::milliseconds put_idle_timeout{30'000};
  // A Watch whose client takes no event for this long is ended (it resumes
  // from its last seq): a stalled watcher must not hold a stream for ever.
  std::chrono::milliseconds watch_stall_timeout{30'000};
  uint32_t max_puts_per_tenant = 256;  // Put streams one tenant may have open
  uint64_t get_buffer_bytes = 16ull << 20;  // Get chunks in flight, all streams together
};

/// What a Put stream shares with the sweeper: when bytes last arrived, and the
/// one lock under which the call is finished exactly once (by the stream or
/// by the sweeper). The lock is recursive because gRPC may run the stream's
/// OnDone inline from a Finish called under it.
struct put_watch {
  std::atomic<int64_t> last_bytes_ms{0};
  std::atomic<int64_t> idle_timeout_ms{0};  // 0 = put_idle_timeout (a Watch sets its own)
  std::recursive_mutex lock;
  bool finished = false;             // under lock
  std::function<void()> on_idle;     // under lock; empty once the call is done
  void touch();
  /// Under lock: marks the call finished and forgets on_idle; false when it
  /// was finished already (the caller must not Finish it again).
  bool end() {
    if (finished) return false;
    finished = true;
    on_idle = nullptr;
    return true;
  }
  /// Not waiting for the client now (a Watch at the head): never idle.
  void pause() { last_bytes_ms.store(std::numeric_limits<int64_t>::max() / 2); }
};

class stream_limits {
 public:
  explicit stream_limits(stream_limit_options options);
  ~stream_limits();
  stream_limits(const stream_limits&) = delete;
  stream_limits& operator=(const stream_limits&) = delete;

  /// One open stream (of a connection, or a Put of a tenant); gives its
  /// place back when destroyed.
  class slot {
   public:
    slot() = default;
    slot(stream_limits* owner, std::string key, bool tenant_put)
        : owner_(owner), key_(std::move(key)), tenant_put_(tenant_put) {}
    slot(slot&& other) noexcept { *this = std::move(other); }
    slot& operator=(slot&& other) noexcept;
    ~slot();

   private:
    stream_limits* owner_ = nullptr;
    std::string key_;  // the connection's peer string, or the tenant
    bool tenant_put_ = false;
  };

  /// A place for one more stream of `peer` (gRPC's peer string names the
  /// connection), or RESOURCE_EXHAUSTED naming the limit that is reached.
  result<slot> admit(const std::string& peer);

  /// A place for one more Put stream of `tenant`, or RESOURCE_EXHAUSTED
  /// naming --max-puts-per-tenant.
  result<slot> admit_put(const std::string& tenant);

  /// Watches a Put: its `on_idle` runs on the sweeper thread, under the
  /// watch's lock, once no bytes arrived for put_idle_timeout.
  std::shared_ptr<put_watch> watch_put();

  /// The size of a Get stream's next chunk: `wanted` while the chunks of all
  /// Get streams fit in get_buffer_bytes, else `floor` (a stream always moves).
  /// The bytes are held until give_get_bytes.
  size_t take_get_bytes(size_t wanted, size_t floor);
  void give_get_bytes(size_t bytes);
  uint64_t get_bytes_held() const { return get_bytes_.load(); }

  const stream_limit_options& options() const { return options_; }
  uint32_t open_streams() const;

 private:
  void release(const std::string& key, bool tenant_put);
  void sweep();

  stream_limit_options options_;
  mutable std::mutex mutex_;
  uint32_t open_ = 0;                        // under mutex_
  std::map<std::string, uint32_t> by_peer_;  // under mutex_
  std::map<std::string, uint32_t> puts_by_tenant_;  // under mutex_
  std::vector<std::weak_ptr<put_watch>> puts_;  // under mutex_
  bool stopping_ = false;                    // under mutex_
  bool closed_since_trim_ = false;           // under mutex_
  std::atomic<uint64_t> get_bytes_{0};  // Get chunks in flight above the floor
  std::condition_variable wake_;
  std::thread sweeper_;
};

}  // namespace weightd::api
