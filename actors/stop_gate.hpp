// node::stop's gate (Seastar's gate: close, then wait for what is inside).
//
// Every command queue (command_queue.hpp) holds the gate while a command of
// it runs. node::stop closes the gate: the registry then refuses new
// commands (UNAVAILABLE), automatic work (reconciler rounds, operation
// rounds, upsert steps) starts nothing new, and a removal stops after the
// batch it is deleting; what already runs reaches its next durable point.
// node::stop waits, bounded, until nothing holds the gate, and only then
// stops the actors — so no step is cut between its journal append and the
// memory that follows it, and the next start in the same process begins
// from a journal nobody writes to any more.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>

namespace weightd::actors {

class stop_gate {
 public:
  /// A command starts running (counted even once closed: it was accepted).
  void hold() {
    std::lock_guard lock{mutex_};
    ++inside_;
  }
  /// That command finished.
  void release() {
    std::lock_guard lock{mutex_};
    if (inside_ > 0 && --inside_ == 0) idle_.notify_all();
  }
  bool closed() const {
    std::lock_guard lock{mutex_};
    return closed_;
  }
  /// From now on nothing new is accepted.
  void close() {
    std::lock_guard lock{mutex_};
    closed_ = true;
  }
  /// Waits until nothing holds the gate; false when `bound` passed first.
  /// Never on an actor's thread: it blocks.
  bool wait_idle(std::chrono::milliseconds bound) {
    std::unique_lock lock{mutex_};
    return idle_.wait_for(lock, bound, [this] { return inside_ == 0; });
  }
  size_t inside() const {
    std::lock_guard lock{mutex_};
    return inside_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable idle_;
  size_t inside_ = 0;
  bool closed_ = false;
};

}  // namespace weightd::actors
