// The scrub (SPEC §4 Scrub): re-reads every replica's bytes against its
// checksum at a bounded rate, so a replica that rotted on disk, or a tier file
// changed behind the daemon's back, is found before a reader trips over it.
//
// One round: the scrubber asks the object store for the next replicas
// (`scrub_atom, budget`: at least one, then up to `budget` bytes, in key
// order from where the last round stopped, wrapping around: the replica
// checked longest ago comes next), reads them on its own thread (detached:
// file I/O never runs on a cooperative worker), and hands the verdicts back
// (`scrub_atom, scrub_verdicts`). The store drops a mismatching replica as
// CORRUPT (a missing one as LOST) with a ReplicaDropped event and marks its
// group damaged, so the revision degrades or repairs (replica_observation.hpp).
// A replica whose object changed while it was read is not judged.
//
// The next round starts after max(interval, bytes read / rate): the rate
// holds over time whatever the object sizes. Rate 0 = no scrubber.
#pragma once

#include <chrono>

#include "actors/actors.hpp"
#include "actors/io_worker.hpp"

namespace weightd::actors {

struct scrubber_config {
  uint64_t rate_bytes = 64ull << 20;  // per second (SPEC §8 scrub 64 MiB/s)
  std::chrono::milliseconds interval{1000};
  std::chrono::seconds timeout{30};  // per store request
};

/// `start` = schedule the first round itself (off in tests driving it).
scrubber_actor spawn_scrubber(caf::actor_system& sys, object_store_actor store, tiers files,
                              scrubber_config config, bool detached, bool start = true);

}  // namespace weightd::actors
