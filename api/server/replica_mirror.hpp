// A standby's copies of its leader's replicas (SPEC §11 Bytes): the
// journal a standby follows says which objects exist and in which tiers;
// this puts their bytes in the standby's own tiers, so that a promoted
// standby serves what it lists.
//
// The rule for one object (place_mirror, a pure function): each tier the
// leader holds it in, HOT only where this standby's HOT tier can hold it
// (else COLD); nothing once it is removed or unreadable. A copy comes over
// the leader's ObjectService (Get with for_replica: not an access), is
// checked against the object's size and checksum while it streams, and is
// published like any replica (temp file, fsync when COLD, rename). A second
// tier is copied from the first, locally.
//
// How it keeps up, on threads of its own (blocking gRPC and file I/O):
//   1. at start it removes files no object of the fold owns (and temp
//      files) and queues every object of the fold;
//   2. the follower tells it which objects each folded batch touched
//      (follower::listen), and it queues them; after a diverged tail was set
//      aside it queues everything again;
//   2b. it tells the follower how far every object event has its bytes here
//      (follower::mirrored: the seq before the oldest batch with an object
//      still to copy), which the leader's --sync-standbys counts;
//   3. `parallelism` workers take objects from the queue, one worker per
//      object at a time; each compares the fold's record with the files it
//      knows (a file it did not write in this run is checked once, by
//      checksum or size) and copies or removes;
//   4. a failed copy (the leader away, a checksum that does not match, a full
//      disk) is retried after a backoff, 0.5 s doubling to 30 s.
// `rate_bytes` caps the bytes per second all copies take from the network.
// At promotion the ordinary startup reconciles the fold with the files
// (object_recovery.hpp): a HOT copy this placed in COLD is adopted there, then
// repaired back to HOT.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "actors/io_worker.hpp"
#include "api/client/client.hpp"
#include "api/server/follower.hpp"

namespace weightd::api {

struct mirror_options {
  client_options leader;     // its address, admin token and TLS files
  unsigned parallelism = 4;  // objects copied at once
  uint64_t rate_bytes = 0;   // bytes per second over the network, all copies (0 = no cap)
  bool checksums = true;     // a file found at start is checked by checksum, else by size
  std::chrono::milliseconds min_retry{500};
  std::chrono::milliseconds max_retry{30'000};
};

struct mirror_status {
  uint64_t held = 0;     // objects whose bytes are here as the fold last said
  uint64_t pending = 0;  // objects queued, being copied or waiting to retry
  uint64_t copied_objects = 0, copied_bytes = 0;  // over the network, since the start
  uint64_t local_copies = 0;                      // a second tier copied from the first
  uint64_t failures = 0;                          // copies that failed (and were retried)
  std::string last_error;                         // the last failure's ("" = none yet)
};

/// Which tiers of this standby hold a copy of an object.
struct mirror_placement {
  bool hot = false;
  bool cold = false;
  friend bool operator==(const mirror_placement& a, const mirror_placement& b) {
    return a.hot == b.hot && a.cold == b.cold;
  }
};

/// Where `record` goes (the rule above); null or unreadable: nowhere.
mirror_placement place_mirror(const events::object_record* record, bool hot_fits);

class replica_mirror {
 public:
  /// Cleans the tiers, queues the fold's objects and starts the workers.
  static result<std::unique_ptr<replica_mirror>> start(follower& standby, actors::tiers files,
                                                       mirror_options options);
  ~replica_mirror();
  replica_mirror(const replica_mirror&) = delete;
  replica_mirror& operator=(const replica_mirror&) = delete;

  /// Stops listening, cancels the copies in flight (their temp files are
  /// removed) and joins the workers.
  void stop();
  mirror_status status() const;

 private:
  struct held_file {  // what this run knows is in a tier's file
    uint64_t size = 0;
    std::string checksum;
  };
  struct known {  // per object
    std::optional<held_file> hot, cold;
  };

  replica_mirror(follower& standby, actors::tiers files, mirror_options options);
  void remove_unowned_files();
  void queue(const events::object_ref& ref, uint64_t since);  // under mutex_
  void touched(const follower::fold_step& step);
  /// Every object event up to it has its bytes here (under mutex_).
  uint64_t mirrored_seq() const;
  /// Tells the follower when mirrored_seq() moved (not under mutex_).
  void report();
  void work();
  /// Makes the files of `ref` match the fold's record.
  weightd::status reconcile(const events::object_ref& ref);
  /// The file in `tier` as this run knows it, checking one it has not seen.
  std::optional<held_file> look(const events::object_ref& ref, events::v1::Tier tier,
                                const events::object_record* record);
  weightd::status copy(const events::object_record& record, events::v1::Tier into,
              const std::optional<held_file>& other);
  weightd::status fetch(const events::object_record& record, const persistence::tier_store& into);
  void forget(const events::object_ref& ref, events::v1::Tier tier);
  void remember(const events::object_ref& ref, events::v1::Tier tier, held_file file);
  bool hot_fits(const events::object_ref& ref, uint64_t size) const;  // under mutex_
  bool pace(size_t bytes);  // false: stopping

  follower& standby_;
  actors::tiers files_;
  mirror_options options_;
  client leader_;

  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable wake_;
  bool stopping_ = false;
  std::deque<events::object_ref> queue_;
  std::set<events::object_ref> queued_, busy_, dirty_;
  std::multimap<std::chrono::steady_clock::time_point, events::object_ref> retry_at_;
  std::map<events::object_ref, std::chrono::milliseconds> backoff_;
  std::map<events::object_ref, known> known_;
  std::set<events::object_ref> held_;  // objects whose files matched the fold when last reconciled
  // The first seq each object to copy was touched at (a batch's first: its
  // events up to then may be the object's), and those seqs, for the least.
  std::map<events::object_ref, uint64_t> since_;
  std::multiset<uint64_t> since_seqs_;
  uint64_t folded_seq_ = 0;    // the last seq the follower told of
  uint64_t reported_seq_ = 0;  // the last mirrored_seq() told to the follower
  uint64_t hot_bytes_ = 0;             // sizes of the HOT files in known_
  std::set<grpc::ClientContext*> in_flight_;
  std::chrono::steady_clock::time_point next_free_{};  // the pacer's
  uint64_t temp_names_ = 0;
  mirror_status counts_;
  std::vector<std::thread> workers_;
};

}  // namespace weightd::api
