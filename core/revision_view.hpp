// What a revision shows its readers: the view of its record (lease facts,
// active operation) and GetRevision's answer from it. Pure: the registry
// answers reads from the views revisions send it after every change, the
// revision actor from its own, with the same rule.
#pragma once

#include "core/messages.hpp"
#include "events/revision_fold.hpp"

namespace weightd::actors {

/// The view of a record: the record, its lease facts, its active operation.
revision_view view_of(const events::revision_record& r, const events::revision_index& index);

/// GetRevision's answer from a revision's current view (null: never seen;
/// hidden states only with include_hidden).
result<revision_view> get_reply(const revision_view* view, const get_revision& cmd);

}  // namespace weightd::actors
