// The I/O worker: blocking file work of the tiers (fsync, rename, copy,
// unlink) on a thread of its own, so cooperative workers never block.
#pragma once

#include <memory>

#include "actors/actors.hpp"
#include "persistence/tier_store.hpp"

namespace weightd::actors {

/// The two tiers the store writes to; shared read-only by I/O workers.
struct tiers {
  std::shared_ptr<const persistence::tier_store> hot;
  std::shared_ptr<const persistence::tier_store> cold;
  const persistence::tier_store& of(events::v1::Tier tier) const {
    return tier == events::v1::TIER_COLD ? *cold : *hot;
  }
  const persistence::tier_store& other(events::v1::Tier tier) const {
    return tier == events::v1::TIER_COLD ? *hot : *cold;
  }
};

/// Spawns one I/O worker; detached unless `detached` is false (tests).
io_actor spawn_io_worker(caf::actor_system& sys, tiers t, bool detached = true);

}  // namespace weightd::actors
