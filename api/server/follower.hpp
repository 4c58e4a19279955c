// A standby's side of SPEC §11 Follow: it keeps a copy of the leader's
// journal and folds it with the functions a restart uses. A standby runs no
// revision actors; its journal and its fold are the leader's, seq for seq.
//
// One thread of its own (blocking gRPC and LMDB calls, never a CAF worker):
//   1. at start, fold its own journal (snapshot + tail: fold_journal);
//   2. connect and say who it is: schema, event types, durable seq;
//   3. refuse a leader whose schema is newer than it decodes (naming both);
//   4. each message: append its envelopes as copied (append_copied: same
//      seqs, one transaction and one fsync per message: the leader's batch is
//      the group), fold each (fold_event), report the new durable seq;
//   5. when the stream ends or fails: wait (backoff from 100 ms, doubling to
//      5 s, reset once a stream was welcomed) and go to 2.
// A journal that went past where the leader's history left it (a former
// leader's, SPEC §11 Divergence) hears so in the leader's first message: it
// sets its tail aside (divergence.hpp), folds again and goes to 2 at once.
// A copied batch the journal refuses (not the next seqs: this journal is not
// a prefix of the leader's) or an event the fold refuses stops following
// for good: `failure()` says why, and a person must look.
// Every snapshot_every events it saves its fold as a state snapshot, as the
// leader's snapshotter does, so that a restart or a promotion folds little.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/client/client.hpp"
#include "events/state.hpp"
#include "persistence/journal_backend.hpp"

namespace weightd::api {

struct follower_options {
  client_options leader;  // its address, token and TLS files
  std::string member;     // this standby's name for the leader ("" = its peer address)
  std::chrono::milliseconds min_backoff{100};
  std::chrono::milliseconds max_backoff{5'000};
  uint64_t snapshot_every = 10'000;  // events between state snapshots (0 = never)
  std::filesystem::path data_dir;    // where a diverged tail is set aside (divergence.hpp)
};

/// Where the standby is.
struct follower_status {
  bool connected = false;    // a stream is welcomed and open
  uint64_t durable_seq = 0;  // the highest seq of its journal (and its fold)
  uint64_t epoch = 0;        // the highest epoch in it
  uint64_t leader_seq = 0;   // the leader's highest seq, as last heard
  uint64_t streams = 0;      // streams the leader welcomed so far
  std::string last_error;    // why the last stream ended ("" = none yet)
  std::string failure;       // set: following stopped for good (see above)
  /// When it last held every event its leader had told it of (at start:
  /// when it started).
  std::chrono::steady_clock::time_point caught_up_at{};

  /// How stale its fold may be: 0 while it holds all the leader has, else
  /// the ms since it last did (the leader may have moved on unheard).
  uint64_t lag_ms(std::chrono::steady_clock::time_point now) const {
    if (connected && durable_seq >= leader_seq) return 0;
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(now - caught_up_at).count());
  }
};

class follower {
 public:
  /// Folds `journal` and starts following; an unreadable journal fails here.
  static result<std::unique_ptr<follower>> start(
      std::shared_ptr<persistence::journal_backend> journal, follower_options options);
  ~follower();
  follower(const follower&) = delete;
  follower& operator=(const follower&) = delete;

  /// Ends the stream and the thread; the journal has every message it took.
  void stop();
  follower_status status() const;
  /// The fold at status().durable_seq (a copy).
  events::store_state state() const;
  /// `read(fold)` on the fold as it is now, under the lock the fold step
  /// takes: keep it short (a lookup, a page), never I/O.
  template <class Read>
  auto read(Read&& read) const {
    std::lock_guard lock(mutex_);
    return read(static_cast<const events::store_state&>(state_));
  }
  /// Waits until durable_seq >= seq (true), for at most `timeout`.
  bool wait_for(uint64_t seq, std::chrono::milliseconds timeout) const;

  /// A fold step, as its listener hears it: the seqs it folded (from..to)
  /// and the objects their events touched; `everything` after a diverged
  /// tail was set aside (the fold was rebuilt: every object may have changed).
  struct fold_step {
    std::vector<events::object_ref> touched;
    bool everything = false;
    uint64_t from_seq = 0, to_seq = 0;
  };
  /// Called on the follower's thread after each fold step. The replica
  /// mirror listens (replica_mirror.hpp). Once listen(nullptr) returns, no
  /// call is under way.
  using fold_listener = std::function<void(const fold_step& step)>;
  void listen(fold_listener listener);
  /// The mirror's word (SPEC §11 Bytes): every object event up to `seq` has
  /// its bytes here. Reported to the leader at once (its --sync-standbys
  /// counts it) and with every later acknowledgement.
  void mirrored(uint64_t seq);

 private:
  follower(std::shared_ptr<persistence::journal_backend> journal, follower_options options,
           events::store_state folded);
  void run();
  /// One stream, from hello to its end: why it ended.
  weightd::status follow_once();
  /// Appends and folds one message's envelopes; a failure stops following.
  weightd::status take(v1::FollowResponse& message);
  /// The leader said this journal diverged: sets the tail aside, truncates,
  /// folds again (divergence.hpp); a failure stops following.
  weightd::status step_back(const v1::Divergence& divergence);

  std::shared_ptr<persistence::journal_backend> journal_;
  follower_options options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::ReplicationService::Stub> stub_;
  uint64_t since_snapshot_ = 0;  // events appended since the last snapshot (thread only)
  bool stepped_back_ = false;    // the last stream ended in step_back: reconnect at once (thread only)

  void tell(const fold_step& step);
  /// Tells the leader the durable and mirrored seqs on the open stream
  /// (false: it is gone). The follower's thread and the mirror's both send.
  bool acknowledge();
  std::mutex listener_mutex_;  // held while the listener is called
  fold_listener listener_;
  std::atomic<uint64_t> mirrored_seq_{0};
  std::mutex write_mutex_;  // one writer on the stream at a time; before mutex_
  grpc::ClientReaderWriter<v1::FollowRequest, v1::FollowResponse>* writer_ = nullptr;

  mutable std::mutex mutex_;  // guards everything below
  mutable std::condition_variable changed_;
  events::store_state state_;
  follower_status status_;
  bool stopping_ = false;
  grpc::ClientContext* stream_ = nullptr;  // the open stream's, to cancel it
  std::thread thread_;
};

/// Promotion's first step (SPEC §11), once the follower stopped: appends
/// leadership_taken with the journal's highest epoch + 1, naming `member`
/// and where clients reach it, and the seq the previous epoch ended at.
/// Returns the new epoch.
result<uint64_t> take_leadership(persistence::journal_backend& journal, const std::string& member,
                                 const std::string& advertise, int64_t now_ms);

}  // namespace weightd::api
