// The revision actor: one weight revision as an event-sourced entity.
// Each command: decide (core/revision_decide.hpp, core/lease_decide.hpp) -> persist the
// events -> evolve_revisions -> reply. Commands run one after another from the
// revision's command queue (revision_queue.hpp): one revision's commands are
// serialized without a lock, so e.g. two racing mutations never both pass the
// fence; decisions queued behind an in-flight write share the next one. Its
// active operation runs in bounded rounds (operation_rounds.hpp), each a
// command of the same queue.
#pragma once

#include "actors/revision_state.hpp"
#include "core/revision_view.hpp"

namespace weightd::actors {

/// The behavior of the actor of `id`, starting from `initial` (its recovered
/// fold, or empty for an identity never seen). The registry spawns it linked.
revision_actor::behavior_type revision_impl(rev_pointer self, events::revision_key id,
                                            events::revision_index initial, revision_deps deps);

}  // namespace weightd::actors
