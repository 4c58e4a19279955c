#include "core/reads.hpp"

#include "core/revision_view.hpp"
#include "core/validate.hpp"
#include "events/lineage_fold.hpp"

namespace weightd::actors {

result<listing> plan_listing(const list_revisions& q) {
  // The identity rule of every other call (no control characters, <= 1024 bytes).
  listing l{q.tenant, q.ns, q.resource};
  for (auto [field, value] : {std::pair{"tenant", &l.tenant}, std::pair{"ns", &l.ns}})
    if (auto st = check_identity_part(field, *value, "default"); !st.ok()) return st;
  if (!l.resource.empty())
    if (auto st = check_identity_part("resource", l.resource, ""); !st.ok()) return st;
  l.start = {l.tenant, l.ns, l.resource, "", 0};
  if (q.limit > 1000)
    return status{errc::invalid_argument, "limit must be at most 1000 (0 means 100)"};
  l.limit = q.limit ? q.limit : 100;
  l.states = {q.states.begin(), q.states.end()};
  if (l.states.empty()) l.states = {events::v1::READY, events::v1::DEGRADED};
  if (!q.page_token.empty()) {
    auto parsed = parse_page_token(q.page_token, l.start);
    if (!parsed) return parsed.error();
    l.start = *parsed;
    l.after = true;
  }
  return l;
}

status check_operation_visible(uint64_t operation_id, const events::revision_key* owner,
                               const std::string& caller_tenant) {
  if (operation_id == 0) return {errc::invalid_argument, "operation_id must be at least 1"};
  if (!owner || (!caller_tenant.empty() && owner->tenant != caller_tenant))
    return {errc::not_found, "operation " + std::to_string(operation_id) + " does not exist"};
  return {};
}

result<events::revision_key> checked_lineage_id(const events::revision_key& id, const char* field) {
  auto proto = id.to_proto();
  if (proto.weight_generation() == 0) proto.set_weight_generation(1);  // GetLineage names none
  auto checked = events::checked_revision_key(proto);
  if (!checked) {
    auto st = checked.error();
    return status{st.code(), std::string{field} + ": " + st.message()};
  }
  checked->generation = id.generation;
  return checked;
}

status unknown_lineage(const events::revision_key& lineage) {
  return {errc::not_found, "lineage " + events::canonical_text(lineage) + " has no revision"};
}

result<revision_view> get_revision_in(const events::store_state& fold, get_revision cmd) {
  auto checked = events::checked_revision_key(cmd.id.to_proto());
  if (!checked) return checked.error();
  cmd.id = *checked;
  const auto* record = fold.revisions.find(cmd.id);
  if (!record) return get_reply(nullptr, cmd);
  auto view = view_of(*record, fold.revisions);
  return get_reply(&view, cmd);
}

result<revision_page> list_revisions_in(const events::store_state& fold, const list_revisions& q) {
  auto planned = plan_listing(q);
  if (!planned) return planned.error();
  return list_page(fold.revisions.revisions, *planned,
                   [&](const events::revision_record& r) { return view_of(r, fold.revisions); });
}

result<events::operation_record> get_operation_in(const events::store_state& fold,
                                                  const get_operation& cmd) {
  auto it = fold.revisions.operations.find(cmd.operation_id);
  const auto* owner = it == fold.revisions.operations.end() ? nullptr : &it->second.revision;
  if (auto st = check_operation_visible(cmd.operation_id, owner, cmd.caller_tenant); !st.ok())
    return st;
  return it->second;
}

result<lineage_view> get_lineage_in(const events::store_state& fold, const get_lineage& cmd) {
  auto id = checked_lineage_id(cmd.lineage, "lineage");
  if (!id) return id.error();
  auto key = events::lineage_key(*id);
  if (const auto* l = fold.lineages.find(key)) return lineage_view{key, l->watermark, l->claim};
  auto first = fold.revisions.revisions.lower_bound(key);
  if (first == fold.revisions.revisions.end() || !first->first.same_lineage(key))
    return unknown_lineage(key);
  return lineage_view{key, 0, std::nullopt};
}

}  // namespace weightd::actors
