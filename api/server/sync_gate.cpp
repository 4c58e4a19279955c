#include "api/server/sync_gate.hpp"

#include <algorithm>

#include "actors/node.hpp"

namespace weightd::api {

sync_gate::sync_gate(unsigned required, std::chrono::milliseconds timeout)
    : required_(required), timeout_(timeout) {
  if (required_ > 0) timer_ = std::thread([this] { run(); });
}

sync_gate::~sync_gate() {
  std::list<waiter> left;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    left.swap(waiters_);
    changed_.notify_all();
  }
  if (timer_.joinable()) timer_.join();
  for (auto& w : left) w.done({errc::busy, "weightd is stopping; retry with the same request id"});
}

uint64_t sync_gate::join(const std::string& member) {
  std::lock_guard lock(mutex_);
  auto handle = next_handle_++;
  standbys_[handle].member = member;
  return handle;
}

void sync_gate::report(uint64_t handle, uint64_t durable_seq, uint64_t mirrored_seq) {
  std::vector<answer> ready;
  {
    std::lock_guard lock(mutex_);
    auto it = standbys_.find(handle);
    if (it == standbys_.end()) return;
    it->second.durable_seq = std::max(it->second.durable_seq, durable_seq);
    it->second.mirrored_seq = std::max(it->second.mirrored_seq, mirrored_seq);
    ready = take_ready({});
  }
  for (auto& [done, outcome] : ready) done(outcome);
}

void sync_gate::leave(uint64_t handle) {
  std::lock_guard lock(mutex_);
  standbys_.erase(handle);
}

std::vector<standby_progress> sync_gate::standbys() const {
  std::lock_guard lock(mutex_);
  std::vector<standby_progress> out;
  for (const auto& [handle, s] : standbys_) out.push_back(s);
  return out;
}

void sync_gate::after(uint64_t seq, bool bytes, std::function<void(const status&)> done) {
  {
    std::lock_guard lock(mutex_);
    if (holding(seq, bytes) < required_) {
      waiters_.push_back({seq, bytes, std::chrono::steady_clock::now() + timeout_, std::move(done)});
      changed_.notify_all();
      return;
    }
  }
  done({});
}

unsigned sync_gate::holding(uint64_t seq, bool bytes) const {
  unsigned n = 0;
  for (const auto& [handle, s] : standbys_)
    if ((bytes ? std::min(s.durable_seq, s.mirrored_seq) : s.durable_seq) >= seq) ++n;
  return n;
}

std::vector<sync_gate::answer> sync_gate::take_ready(std::chrono::steady_clock::time_point now) {
  std::vector<answer> out;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    auto held = holding(it->seq, it->bytes);
    if (held >= required_) {
      out.push_back({std::move(it->done), {}});
    } else if (now != std::chrono::steady_clock::time_point{} && it->deadline <= now) {
      out.push_back({std::move(it->done),
                     {errc::busy, "only " + std::to_string(held) + " of the " +
                                      std::to_string(required_) +
                                      " standbys --sync-standbys asks for hold this change after " +
                                      std::to_string(timeout_.count()) +
                                      " ms; it is durable on this leader: retry with the same "
                                      "request id once they are back"}});
    } else {
      ++it;
      continue;
    }
    it = waiters_.erase(it);
  }
  return out;
}

void sync_gate::run() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (waiters_.empty()) changed_.wait(lock);
    else {
      auto deadline = waiters_.front().deadline;  // a copy: the waiter may go while we wait
      changed_.wait_until(lock, deadline);
    }
    if (stopping_) return;
    auto ready = take_ready(std::chrono::steady_clock::now());
    if (ready.empty()) continue;
    lock.unlock();
    for (auto& [done, outcome] : ready) done(outcome);
    lock.lock();
  }
}

std::function<void(std::function<void(const status&)>)> write_acknowledger(
    std::shared_ptr<sync_gate> gate, actors::node& node, bool bytes) {
  if (!gate || gate->required() == 0) return nullptr;
  return [gate, &node, bytes](std::function<void(const status&)> finish) {
    auto journal = node.backend();
    auto head = journal ? journal->highest_seq()
                        : result<uint64_t>{errc::busy, "weightd is stopping; retry with the "
                                                       "same request id"};
    if (!head) return finish(head.error());
    gate->after(*head, bytes, std::move(finish));
  };
}

}  // namespace weightd::api
