// Startup check of the tiers against the object index (the fold of the
// journal): the journal says which replicas exist, the files say which
// survived. Runs before the actors start, on the starting thread.
#pragma once

#include <set>
#include <vector>

#include "actors/io_worker.hpp"
#include "events/events.pb.h"
#include "events/state.hpp"

namespace weightd::actors {

struct recovery_report {
  uint64_t lost_replicas = 0;     // file missing (e.g. tmpfs emptied by a reboot)
  uint64_t corrupt_replicas = 0;  // wrong size or checksum
  uint64_t orphan_files = 0;      // files no replica owns: crashed puts, copies, removals
  uint64_t adopted_replicas = 0;  // COLD files taken in for a lost HOT replica (cold_adoptions)
  // What the start found (the recovered state itself goes to the actors).
  uint64_t applied_seq = 0, revisions = 0, objects = 0, hot_bytes = 0, cold_bytes = 0;
};

/// The events that drop every replica whose file is missing (reason LOST) or
/// has the wrong size or, when `checksums`, the wrong xxh3 (reason CORRUPT).
/// The payload groups whose members the ReplicaDropped events among `events` touch.
std::set<events::group_ref> damaged_groups_of(const events::object_index& index,
                                              const std::vector<events::v1::Envelope>& events);

/// ReplicaAdded COLD for each object the index has HOT only whose HOT file
/// is missing but whose COLD file holds its bytes (checked by checksum, as
/// the journal never vouched for it): a promoted standby's copy that its
/// HOT tier could not hold (replica_mirror.hpp), or a COLD replica whose
/// drop was journaled but whose file a crash left. What would be LOST is
/// then readable, and the observation repairs it back to HOT.
std::vector<events::v1::Envelope> cold_adoptions(const events::object_index& index,
                                                 const tiers& files, int64_t now_ms,
                                                 recovery_report& report);

std::vector<events::v1::Envelope> replica_corrections(const events::object_index& index,
                                                      const tiers& files, bool checksums,
                                                      int64_t now_ms, recovery_report& report);

/// Deletes every file in the tiers that no replica of `index` owns.
void remove_orphan_files(const events::object_index& index, const tiers& files,
                         recovery_report& report);

}  // namespace weightd::actors
