// The registry: routes every revision command to the one actor of its
// identity (spawned on demand) and every lease command to the revision that
// holds the lease, owns the index identity -> view that listings are served
// from, keeps the object store's guard in step with each revision's state
// (SPEC §2 managed groups), and runs the reconciler's rounds.
#pragma once

#include "actors/lineage.hpp"
#include "core/reconcile_plan.hpp"
#include "actors/revision.hpp"

namespace weightd::actors {

struct registry_state {
  revision_deps deps;
  std::map<events::revision_key, revision_view> views;        // every known revision
  std::map<events::revision_key, revision_actor> actors;       // spawned ones
  // A revision without an actor is its view (the record as recovered) and,
  // if it has any, its operations: what its actor starts from when it wakes.
  std::map<events::revision_key, std::map<uint64_t, events::operation_record>> dormant_operations;
  uint64_t recovered_last_operation_id = 0, recovered_last_lease_id = 0;
  std::map<uint64_t, events::revision_key> lease_owners;  // live lease id -> its revision
  std::map<uint64_t, events::revision_key> operation_owners;  // every operation id -> its revision
  std::map<events::revision_key, lineage_actor> lineage_actors;       // spawned ones, by lineage key
  std::map<events::revision_key, events::lineage_record> dormant_lineages;  // no actor yet: their fold
  reconciler_config reconciler;
  events::revision_key reconcile_cursor;  // where the next reconciler round starts
  uint64_t allocation_failures_seen = 0;  // the store's spills + failed HOT reservations
  static const char* name;
};

/// Spawns the registry on the recovered revisions and lineages. A revision
/// gets its actor on demand (its first command or reconciler tick); only
/// those with a running operation or an unfinished deletion wake at once to
/// resume it. Lineages with an unfinished claim resume it.
registry_actor spawn_registry(caf::actor_system& sys, events::revision_index recovered,
                              revision_deps deps, reconciler_config reconciler = {},
                              events::lineage_index lineages = {});

}  // namespace weightd::actors
