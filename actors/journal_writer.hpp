// The journal writer actor: group commit over a journal backend.
#pragma once

#include <memory>

#include "actors/actors.hpp"
#include "persistence/journal_backend.hpp"

namespace weightd::actors {

struct journal_writer_options {
  /// Run on a thread of its own (production: commits fsync and must not block
  /// a cooperative worker). Tests turn it off to stay on the deterministic
  /// scheduler.
  bool detached = true;
  /// Asked for a snapshot every `snapshot_every` events (none when unset).
  snapshotter_actor snapshotter;
  uint64_t snapshot_every = 10'000;
};

/// Spawns the snapshotter (detached unless `detached` is false).
snapshotter_actor spawn_snapshotter(caf::actor_system& sys,
                                    std::shared_ptr<persistence::journal_backend> backend,
                                    bool detached = true);

struct journal_writer_state {
  struct pending_append {
    event_batch batch;
    caf::typed_response_promise<event_batch> promise;
  };
  std::shared_ptr<persistence::journal_backend> backend;
  std::vector<pending_append> pending;
  journal_stats stats;
  journal_writer_options options;
  uint64_t last_snapshot_seq = 0;
  static const char* name;
};

journal_actor spawn_journal_writer(caf::actor_system& sys,
                                   std::shared_ptr<persistence::journal_backend> backend,
                                   journal_writer_options options = {});

}  // namespace weightd::actors
