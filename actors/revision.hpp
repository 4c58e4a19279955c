// The revision actor: one weight revision as an event-sourced entity.
// Each command: decide (revision_decide.hpp, lease_decide.hpp) -> persist the
// events -> evolve_revisions -> reply. Commands run one after another from a
// queue (revision.cpp, "command queue"): one revision's commands are
// serialized without a lock, so e.g. two racing mutations never both pass the
// fence; decisions queued behind an in-flight write share the next one.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <deque>
#include <optional>
#include <variant>

#include "actors/actors.hpp"
#include "actors/revision_decide.hpp"

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

/// A queued multi-step command: runs alone, every step with .await.
using multi_step_command = std::function<void()>;

/// What every revision actor shares.
struct revision_deps {
  journal_actor journal;
  object_store_actor store;
  revision_listener registry;  // receives a revision_view after every change
  std::shared_ptr<std::atomic<uint64_t>> operation_ids;  // last id handed out
  std::shared_ptr<std::atomic<uint64_t>> lease_ids;      // last lease id handed out
  std::function<int64_t()> now_ms;
  events::policy default_policy;
  std::chrono::seconds timeout{30};  // per journal / store request
  std::chrono::milliseconds reconcile_interval{1000};  // the registry's reconciler round
};

struct revision_state {
  events::revision_key id;
  events::revision_index local;  // this revision's record and operations: its durable fold
  revision_deps deps;
  // Commands in arrival order (revision.cpp, "command queue"): a decision
  // command, or a multi-step command to run alone.
  std::deque<std::variant<decision_command, multi_step_command>> queue;
  bool busy = false;  // a batch or a multi-step command is in flight
  static const char* name;

  const events::revision_record* record() const { return local.find(id); }
};

/// The behavior of the actor of `id`, starting from `initial` (its recovered
/// fold, or empty for an identity never seen). The registry spawns it linked.
revision_actor::behavior_type revision_impl(revision_actor::stateful_pointer<revision_state> self,
                                            events::revision_key id,
                                            events::revision_index initial, revision_deps deps);

/// The view of a record: the record, its lease facts, its active operation.
revision_view view_of(const events::revision_record& r, const events::revision_index& index);

}  // namespace weightd::actors
