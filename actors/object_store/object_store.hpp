// The object-store actor (SPEC §2): the master's key space, in which weight
// payloads live beside ordinary objects.
//
// Bytes never travel through it: a put reserves capacity and hands out a temp
// file; the caller streams into it; the digest comes back and the store
// publishes, journals and registers. Metadata changes are events, applied with
// evolve_objects() only after the journal acknowledged them. Keys with a
// mutation in flight are "busy": a second mutation of the same key is refused
// rather than interleaved, so the index always equals the fold of the journal.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <set>

#include "actors/actors.hpp"
#include "actors/io_worker.hpp"

namespace weightd::actors {

struct object_store_config {
  std::function<int64_t()> now_ms;  // wall clock in ms (tests inject a fake one)
  std::chrono::milliseconds read_lease{10'000};
  std::chrono::milliseconds put_timeout{5 * 60'000};  // then an unfinished put is reclaimed
  std::chrono::milliseconds tick_interval{1'000};
  double high_watermark = 0.90;
  double eviction_ratio = 0.05;
  double tenant_reserve_ratio = 1.0;  // of a tier: what one tenant's puts in flight may reserve
  std::chrono::seconds journal_timeout{30};
  std::chrono::seconds io_timeout{3600};  // copies of large replicas take a while
};

struct object_store_state {
  struct pending_put {
    put_request request;
    events::object_ref ref;
    events::v1::Tier tier;
    std::string temp_path;
    int64_t deadline_ms = 0;
  };
  /// A reservation that waits for eviction to free HOT space.
  struct waiter {
    events::v1::Tier tier;
    uint64_t bytes;
    std::function<void(status)> continuation;
  };

  object_store_config config;
  journal_actor journal;
  std::vector<io_actor> io;
  size_t next_io = 0;
  tiers files;
  events::object_index index;

  std::map<events::object_ref, int64_t> last_access_ms;  // memory only (SPEC §2)
  std::map<events::object_ref, int64_t> read_leases;     // expiry, memory only
  std::set<events::object_ref> busy;                     // mutation in flight
  std::map<uint64_t, pending_put> puts;
  uint64_t next_put_id = 1;
  uint64_t hot_reserved = 0, cold_reserved = 0;
  std::map<std::pair<std::string, events::v1::Tier>, uint64_t> tenant_reserved;  // by puts
  uint64_t hot_freeing = 0;  // HOT bytes of evictions in flight
  std::deque<waiter> waiters;
  std::map<events::group_ref, managed_group> managed;
  std::set<events::group_ref> damaged;  // lost a replica; handed to the registry
  // The scrub (scrubber.hpp): where the next round starts, and the replicas
  // out being read (an event on one of them voids its verdict).
  std::pair<events::object_ref, events::v1::Tier> scrub_after{{}, events::v1::TIER_UNSPECIFIED};
  std::set<std::pair<events::object_ref, events::v1::Tier>> scrubbing;
  store_stats counters;

  static const char* name;
};

struct object_store_deps {
  journal_actor journal;
  std::vector<io_actor> io;  // at least one
  tiers files;
  events::object_index index;  // recovered (see object_recovery.hpp)
  std::set<events::group_ref> damaged;  // groups that lost replicas in the startup check
};

/// How the object store persists and folds (journaled.hpp): its committed
/// events through evolve_objects; an event on a replica out being scrubbed
/// voids that scrub's verdict.
struct journaled;
journaled binding(object_store_actor::stateful_pointer<object_store_state> self);

object_store_actor spawn_object_store(caf::actor_system& sys, object_store_config config,
                                      object_store_deps deps);

}  // namespace weightd::actors
