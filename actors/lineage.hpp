// The lineage actor: one lineage (tenant, ns, resource, revision) as an
// event-sourced entity (SPEC §4 Lineage replacement). It owns the lineage's
// watermark and claim and drives a claim through its phases with the
// revisions' own commands (begin, commit, retire, remove), sent through the
// registry. Its commands run one at a time from its command queue
// (command_queue.hpp), so no two claims race, while GetLineage is answered
// from the durable record. Its own events change it through
// persist_and_apply (journaled.hpp); the events that commit along with a
// revision's command come back, as committed, in that command's reply.
//
// Crash safety comes from what commits together: the UpsertClaimed event
// goes into the journal in the same transaction as the target's ImportBegun
// (PUT_FIRST), the RETIRING_BASE phase with the target's ImportCommitted.
// What remains between two transactions (retiring the base, DELETE_FIRST's
// delete, the phases that follow the base's deletion) is re-derived from the
// revisions after a restart by next_upsert_step().
#pragma once

#include <chrono>
#include <functional>

#include "actors/actors.hpp"
#include "actors/command_queue.hpp"
#include "actors/stop_gate.hpp"
#include "events/lineage_fold.hpp"

namespace weightd::actors {

struct lineage_deps {
  journal_actor journal;
  registry_actor revisions;  // routes to the revision actors
  std::function<int64_t()> now_ms;
  events::policy default_policy;
  std::chrono::seconds timeout{30};
  std::chrono::milliseconds retry_interval{1000};  // a step that failed is retried after this
  std::shared_ptr<stop_gate> gate = std::make_shared<stop_gate>();  // node::stop's
};

struct lineage_state {
  events::revision_key lineage;
  events::lineage_index local;  // this lineage's record: its durable fold
  lineage_deps deps;
  command_queue<std::monostate> queue;  // begin, commit, abort, and the steps they wake
  bool retry_scheduled = false;
  static const char* name;
  events::lineage_record& record() {
    auto& l = local.lineages[lineage];
    l.lineage = lineage;
    return l;
  }
};

using lineage_pointer = lineage_actor::stateful_pointer<lineage_state>;

/// How a lineage persists and folds (journaled.hpp): evolve_lineages, with
/// the claim's one log line per change.
struct journaled;
journaled binding(lineage_pointer self);

lineage_actor::behavior_type lineage_impl(lineage_pointer self, events::revision_key lineage,
                                          events::lineage_record initial, lineage_deps deps);

}  // namespace weightd::actors
