// The journal reader: History and Watch (SPEC §4) read the journal here, on a
// thread of their own, never on a gRPC thread or a cooperative worker.
//
// Watch is pull-based. A watcher asks for the events from a position; the
// reader hands it the next batch matching its filter and forgets it until it
// asks again, which it does only after writing that batch to its client. So a
// slow client holds one batch and its position — memory does not grow with
// its lag — and no writer ever waits for a reader (LMDB readers see a stable
// snapshot). A watcher at the head is parked; the reader asks the journal
// writer for its committed position every `poll` and serves parked watchers
// when it moved: what a watcher sees was acknowledged, fsync included.
#pragma once

#include <chrono>
#include <memory>

#include "actors/actors.hpp"
#include "persistence/journal_backend.hpp"

namespace weightd::actors {

struct journal_reader_config {
  std::chrono::milliseconds poll{10};  // how often parked watchers look for commits
  size_t batch_events = 256;           // events per delivery at most
  size_t batch_bytes = 1u << 20;       // ... and their encoded bytes (one event may pass it)
  uint64_t scan_events = 4096;         // events one pull examines before it yields
  std::chrono::seconds timeout{30};    // asking the journal writer
};

journal_reader_actor spawn_journal_reader(caf::actor_system& sys,
                                          std::shared_ptr<const persistence::journal_backend> backend,
                                          journal_actor writer, journal_reader_config config,
                                          bool detached);

}  // namespace weightd::actors
