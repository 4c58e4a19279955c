// SPEC §11 Acknowledgement: with --sync-standbys N the leader answers a
// write only once N standbys report its seq durable in their journals, and a
// CommitImport or CommitUpsert only once they also hold the bytes of every
// object event up to it (so a READY revision stays readable after a
// failover). Without N of them for --sync-timeout the write answers BUSY
// (UNAVAILABLE): the change is durable on the leader, and a retry with the
// same request id is answered from it once the standbys caught up.
//
// The follow streams report what their standby holds (join, report, leave);
// a write asks to be answered after a seq (after); a thread of the gate's
// own ends the waits that time out. Every callback runs outside its lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "events/status.hpp"

namespace weightd::actors {
class node;
}

namespace weightd::api {

struct standby_progress {
  std::string member;
  uint64_t durable_seq = 0;   // its journal holds every event up to it
  uint64_t mirrored_seq = 0;  // and the bytes of every object event up to it
};

class sync_gate {
 public:
  sync_gate(unsigned required, std::chrono::milliseconds timeout);
  ~sync_gate();
  sync_gate(const sync_gate&) = delete;
  sync_gate& operator=(const sync_gate&) = delete;

  unsigned required() const { return required_; }

  /// A follow stream's standby, until leave(): its handle.
  uint64_t join(const std::string& member);
  void report(uint64_t handle, uint64_t durable_seq, uint64_t mirrored_seq);
  void leave(uint64_t handle);
  std::vector<standby_progress> standbys() const;

  /// `done({})` once `required` standbys hold `seq` (and its bytes when
  /// `bytes`), at once when they do already or none is required;
  /// `done(BUSY)` after the timeout.
  void after(uint64_t seq, bool bytes, std::function<void(const status&)> done);

 private:
  struct waiter {
    uint64_t seq;
    bool bytes;
    std::chrono::steady_clock::time_point deadline;
    std::function<void(const status&)> done;
  };
  struct answer {
    std::function<void(const status&)> done;
    status outcome;
  };
  unsigned holding(uint64_t seq, bool bytes) const;  // under mutex_
  /// Takes the waiters that are satisfied, or (given `now`) past their
  /// deadline, with what to answer each.
  std::vector<answer> take_ready(std::chrono::steady_clock::time_point now);  // under mutex_
  void run();

  const unsigned required_;
  const std::chrono::milliseconds timeout_;
  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable changed_;
  bool stopping_ = false;
  uint64_t next_handle_ = 1;
  std::map<uint64_t, standby_progress> standbys_;
  std::list<waiter> waiters_;  // in deadline order (one timeout for all)
  std::thread timer_;
};

/// What holds a write's answer (call_bridge::call_write): none without a
/// gate that asks for standbys; else one that waits for them to hold the
/// journal's committed head — at or past the write's own events, as the
/// write was committed before its reply — and its bytes when `bytes`.
std::function<void(std::function<void(const status&)>)> write_acknowledger(
    std::shared_ptr<sync_gate> gate, actors::node& node, bool bytes);

}  // namespace weightd::api
