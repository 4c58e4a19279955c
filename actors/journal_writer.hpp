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
};

struct journal_writer_state {
  struct pending_append {
    event_batch batch;
    caf::typed_response_promise<event_batch> promise;
  };
  std::shared_ptr<persistence::journal_backend> backend;
  std::vector<pending_append> pending;
  journal_stats stats;
  static const char* name;
};

journal_actor spawn_journal_writer(caf::actor_system& sys,
                                   std::shared_ptr<persistence::journal_backend> backend,
                                   journal_writer_options options = {});

}  // namespace weightd::actors
