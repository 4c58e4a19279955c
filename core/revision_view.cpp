#include "core/revision_view.hpp"

#include <algorithm>
#include <memory>

#include "events/identity.hpp"

namespace weightd::actors {

namespace v1 = events::v1;

revision_view view_of(const events::revision_record& r, const events::revision_index& index) {
  revision_view v;
  v.record = r;
  v.active_lease_count = static_cast<uint32_t>(r.leases.size());
  for (const auto& [id, l] : r.leases)
    if (!v.nearest_lease_expiry_ms || l.expiry_ms < v.nearest_lease_expiry_ms)
      v.nearest_lease_expiry_ms = l.expiry_ms;
  for (const auto& [op_id, op] : index.operations) {
    if (!(op.revision == r.id)) continue;
    if (op_id == r.operation_id) v.operation = std::make_shared<const events::operation_record>(op);
    else if (op.state != events::operation_state::running)
      v.last_operation_end_ms = std::max(v.last_operation_end_ms, op.updated_at_ms);
  }
  return v;
}

result<revision_view> get_reply(const revision_view* view, const get_revision& cmd) {
  const auto* r = view ? &view->record : nullptr;
  if (!r || (!r->visible() && !cmd.include_hidden))
    return status{errc::not_found,
                  "revision " + events::canonical_text(cmd.id) + " does not exist" +
                      (r ? " (it is " + v1::Availability_Name(r->availability) +
                               "; pass include_hidden to see it)"
                         : "")};
  return *view;
}

}  // namespace weightd::actors
