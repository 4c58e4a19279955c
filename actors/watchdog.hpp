// The node's watchdog ("let it crash, visibly"): it monitors every core actor
// (journal writer, snapshotter, I/O workers, object store, registry — a
// revision actor is linked to the registry, so its death takes the registry
// down — and the scrubber). One that stops while the node runs is a failure:
// the watchdog logs which actor and why, records it in `node_health`
// (/healthz answers 503 from then on) and calls the host's `on_failure`
// (weightd exits non-zero so that its supervisor restarts it from the
// journal). A half-working daemon that keeps answering INTERNAL is worse
// than one that restarts.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "actors/actors.hpp"

namespace weightd::actors {

class node_health {
 public:
  /// The first failure wins; later ones are only logged.
  bool fail(const std::string& what) {
    std::lock_guard<std::mutex> g{m_};
    if (!failure_.empty()) return false;
    failure_ = what;
    return true;
  }
  /// "" while every core actor runs.
  std::string failure() const {
    std::lock_guard<std::mutex> g{m_};
    return failure_;
  }
  /// Set before the node stops its actors: their exits are no failure.
  std::atomic<bool> stopping{false};

 private:
  mutable std::mutex m_;
  std::string failure_;
};

/// Monitors `actors` (name, handle); see above.
watchdog_actor spawn_watchdog(caf::actor_system& sys,
                          std::vector<std::pair<std::string, caf::actor>> actors,
                          std::shared_ptr<node_health> health,
                          std::function<void(const std::string&)> on_failure);

}  // namespace weightd::actors
