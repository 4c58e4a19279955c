// The read RPCs' rules (SPEC §4), one for every place that answers them: the
// leader's registry answers from the views its revisions send it, a standby
// (SPEC §11) from its fold of the journal — with the same checks, the same
// order and the same errors, so a client cannot tell which one answered.
#pragma once

#include <set>

#include "core/messages.hpp"
#include "core/page_token.hpp"
#include "events/state.hpp"

namespace weightd::actors {

// ------------------------------------------------------------ ListRevisions

/// A checked ListRevisions: where its page starts, how long it is, which
/// states it shows.
struct listing {
  std::string tenant, ns, resource;  // checked and defaulted ("" resource = every one)
  events::revision_key start;
  bool after = false;  // start is the previous page's last key: begin past it
  uint32_t limit = 100;
  std::set<events::v1::Availability> states;
};

/// Checks the query (INVALID_ARGUMENT naming the field) and resolves its
/// page token.
result<listing> plan_listing(const list_revisions& q);

inline const events::revision_record& record_of(const revision_view& v) { return v.record; }
inline const events::revision_record& record_of(const events::revision_record& r) { return r; }

/// One page of `map` (revision_key → a view or a record), in key order;
/// `view` turns an entry that is shown into its revision_view.
template <class Map, class View>
revision_page list_page(const Map& map, const listing& l, View view) {
  revision_page page;
  for (auto it = l.after ? map.upper_bound(l.start) : map.lower_bound(l.start); it != map.end();
       ++it) {
    const auto& k = it->first;
    if (k.tenant != l.tenant || k.ns != l.ns || (!l.resource.empty() && k.resource != l.resource))
      break;
    if (!l.states.count(record_of(it->second).availability)) continue;
    if (page.revisions.size() == l.limit) {
      page.next_page_token = page_token(page.revisions.back().record.id);
      break;
    }
    page.revisions.push_back(view(it->second));
  }
  return page;
}

// ---------------------------------------------------- GetOperation, lineages

/// An operation as its caller may see it: operation_id 0 is INVALID_ARGUMENT;
/// one that does not exist (owner null) or belongs to another tenant than a
/// set `caller_tenant` is NOT_FOUND.
status check_operation_visible(uint64_t operation_id, const events::revision_key* owner,
                               const std::string& caller_tenant);

/// A lineage command's id, checked (the generation is ignored: kept as
/// given); errors name `field`.
result<events::revision_key> checked_lineage_id(const events::revision_key& id, const char* field);

/// NOT_FOUND for a lineage no revision was ever imported into.
status unknown_lineage(const events::revision_key& lineage);

// ------------------------------------------------------- reads from a fold

/// GetRevision, ListRevisions, GetOperation and GetLineage answered from a
/// fold (a standby's): the registry's answers at the same journal position.
result<revision_view> get_revision_in(const events::store_state& fold, get_revision cmd);
result<revision_page> list_revisions_in(const events::store_state& fold, const list_revisions& q);
result<events::operation_record> get_operation_in(const events::store_state& fold,
                                                  const get_operation& cmd);
result<lineage_view> get_lineage_in(const events::store_state& fold, const get_lineage& cmd);

}  // namespace weightd::actors
