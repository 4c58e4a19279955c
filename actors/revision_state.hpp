// The revision actor's own state (revision.hpp): its durable fold, what
// every revision shares (the journal, the store, the registry, the id
// allocators, the bounds), its command queue. Shared by the files that make
// up the actor: revision.cpp (the behavior), revision_queue.cpp (how its
// commands run and persist) and operation_rounds.cpp (its operation rounds).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>

#include "actors/actors.hpp"
#include "actors/command_queue.hpp"
#include "actors/stop_gate.hpp"
#include "core/decision.hpp"
#include "core/migration_plan.hpp"

namespace weightd::actors {


/// What a decision command decided against the scratch fold of its batch.
struct decided_command {
  std::vector<events::v1::Envelope> events;  // already applied to the scratch fold
  std::function<void(const status&)> reply;  // answers the client with the batch's outcome
};

/// A queued decision command: decides against the scratch fold of its batch
/// (after_pending: earlier commands of the batch already added events).
using decision_command = std::function<decided_command(
    events::revision_index& scratch, const decide_context& ctx, bool after_pending)>;


/// What every revision actor shares.
struct revision_deps {
  journal_actor journal;
  object_store_actor store;
  revision_listener registry;  // receives a revision_view after every change
  std::shared_ptr<std::atomic<uint64_t>> operation_ids;  // last id handed out
  std::shared_ptr<std::atomic<uint64_t>> lease_ids;      // last lease id handed out
  // reconcile_report::promotion_headroom_bytes of the registry's last round
  // (INT64_MAX before the first): an access promotion starts only within it.
  std::shared_ptr<std::atomic<int64_t>> promotion_headroom =
      std::make_shared<std::atomic<int64_t>>(INT64_MAX);
  std::function<int64_t()> now_ms;
  events::policy default_policy;
  std::chrono::seconds timeout{30};  // per journal / store request
  std::chrono::seconds copy_timeout{3600};  // a replica copy of a large payload
  std::chrono::milliseconds reconcile_interval{1000};  // the registry's reconciler round
  migration_limits migration;  // the bounds of one operation round
  std::chrono::milliseconds import_abandon{5 * 60'000};  // reconciler_config's, copied by node
  // node::stop's gate: every revision's and lineage's command queue holds
  // it while a command runs; closed, automatic work starts nothing.
  std::shared_ptr<stop_gate> gate = std::make_shared<stop_gate>();
};

struct revision_state {
  events::revision_key id;
  events::revision_index local;  // this revision's record and operations: its durable fold
  revision_deps deps;
  // Commands in arrival order (revision_queue.hpp): decision commands, or a
  // multi-step command to run alone.
  command_queue<decision_command> queue;
  // The lineage events the last committed batch carried along (an upsert's
  // claim): the reply to that command hands them to the lineage.
  std::vector<events::v1::Envelope> committed_along;
  bool tick_queued = false;  // a reconcile tick waits in the queue (ticks do not pile up)
  int64_t retry_backoff_ms = 0;  // > 0: the last operation round failed; wait this long
  static const char* name;

  const events::revision_record* record() const { return local.find(id); }
};

using rev_pointer = revision_actor::stateful_pointer<revision_state>;

}  // namespace weightd::actors
