#include "api/server/stream_limits.hpp"

#include <malloc.h>

#include <algorithm>

namespace weightd::api {

namespace {

int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void put_watch::touch() { last_bytes_ms.store(steady_ms(), std::memory_order_relaxed); }

stream_limits::stream_limits(stream_limit_options options) : options_(options) {
  sweeper_ = std::thread([this] { sweep(); });
}

stream_limits::~stream_limits() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  sweeper_.join();
}

stream_limits::slot& stream_limits::slot::operator=(slot&& other) noexcept {
  if (this != &other) {
    if (owner_) owner_->release(key_, tenant_put_);
    owner_ = std::exchange(other.owner_, nullptr);
    key_ = std::move(other.key_);
    tenant_put_ = other.tenant_put_;
  }
  return *this;
}

stream_limits::slot::~slot() {
  if (owner_) owner_->release(key_, tenant_put_);
}

size_t stream_limits::take_get_bytes(size_t wanted, size_t floor) {
  if (wanted <= floor) return wanted;
  uint64_t held = get_bytes_.load();
  do {
    if (held + wanted > options_.get_buffer_bytes) return floor;  // the floor is not counted
  } while (!get_bytes_.compare_exchange_weak(held, held + wanted));
  return wanted;
}

void stream_limits::give_get_bytes(size_t bytes) { get_bytes_.fetch_sub(bytes); }

result<stream_limits::slot> stream_limits::admit(const std::string& peer) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (open_ >= options_.max_streams)
    return status{errc::resource_exhausted,
                  "weightd has " + std::to_string(open_) + " object streams open, its limit "
                  "(--max-streams " + std::to_string(options_.max_streams) +
                  "); retry when streams have finished, or raise the flag"};
  auto& mine = by_peer_[peer];
  if (mine >= options_.max_streams_per_connection)
    return status{errc::resource_exhausted,
                  "this connection has " + std::to_string(mine) + " object streams open, its "
                  "limit (--max-streams-per-connection " +
                  std::to_string(options_.max_streams_per_connection) +
                  "); finish or cancel some first, or spread them over more connections"};
  ++mine;
  ++open_;
  return slot{this, peer, false};
}

result<stream_limits::slot> stream_limits::admit_put(const std::string& tenant) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& puts = puts_by_tenant_[tenant];
  if (puts >= options_.max_puts_per_tenant)
    return status{errc::resource_exhausted,
                  "tenant '" + tenant + "' has " + std::to_string(puts) + " puts open, its limit "
                  "(--max-puts-per-tenant " + std::to_string(options_.max_puts_per_tenant) +
                  "); retry when some have finished"};
  ++puts;
  return slot{this, tenant, true};
}

void stream_limits::release(const std::string& key, bool tenant_put) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& counts = tenant_put ? puts_by_tenant_ : by_peer_;
  if (!tenant_put) {
    --open_;
    closed_since_trim_ = true;
  }
  if (auto it = counts.find(key); it != counts.end() && --it->second == 0) counts.erase(it);
}

uint32_t stream_limits::open_streams() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return open_;
}

std::shared_ptr<put_watch> stream_limits::watch_put() {
  auto watch = std::make_shared<put_watch>();
  watch->touch();
  std::lock_guard<std::mutex> lock(mutex_);
  puts_.push_back(watch);
  return watch;
}

/// Every quarter of the idle timeout (at most a second): ends the Puts that
/// have been silent too long, and forgets the ones that are gone.
void stream_limits::sweep() {
  auto period = std::clamp(std::min(options_.put_idle_timeout, options_.watch_stall_timeout) / 4,
                           std::chrono::milliseconds{10},
                           std::chrono::milliseconds{1'000});
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, period);
    if (stopping_) break;
    std::vector<std::shared_ptr<put_watch>> idle;
    auto now = steady_ms();
    auto timeout = options_.put_idle_timeout.count();
    puts_.erase(std::remove_if(puts_.begin(), puts_.end(),
                               [&](const std::weak_ptr<put_watch>& weak) {
                                 auto watch = weak.lock();
                                 if (!watch) return true;
                                 int64_t own = watch->idle_timeout_ms.load();
                                 auto limit = own ? own : timeout;
                                 if (now - watch->last_bytes_ms.load(std::memory_order_relaxed) <
                                     limit)
                                   return false;
                                 idle.push_back(std::move(watch));
                                 return true;
                               }),
                puts_.end());
    // When the last stream of a burst has closed, the heap gives its free
    // pages back: transfers keep chunk buffers cached (transfer_buffers.hpp),
    // which must not make a burst of streams a permanent cost.
    bool trim = open_ == 0 && closed_since_trim_;
    closed_since_trim_ = false;
    // The streams' callbacks take this lock under their own (a stream gives
    // its place back as it finishes): never take theirs while holding this.
    lock.unlock();
    if (trim) malloc_trim(0);
    for (auto& watch : idle) {
      std::lock_guard<std::recursive_mutex> call(watch->lock);
      if (watch->finished || !watch->on_idle) continue;
      auto expire = watch->on_idle;  // a copy: the call's OnDone may clear the original
      expire();
    }
    lock.lock();
  }
}

}  // namespace weightd::api
