#include "core/lease_facts.hpp"

#include <algorithm>
#include <cstdio>

#include "events/time_text.hpp"

namespace weightd::actors {

namespace v1 = events::v1;
using events::lease_record;
using events::revision_record;

std::string lease_name(uint64_t id) { return "lease " + std::to_string(id); }

v1::Envelope lease_expired_event(const revision_record& r, uint64_t lease_id,
                                 const decide_context& ctx) {
  auto e = revision_envelope(r.id, ctx.now_ms, "", "");
  *e.mutable_lease_expired()->mutable_id() = r.id.to_proto();
  e.mutable_lease_expired()->set_lease_id(lease_id);
  return e;
}

const lease_record* lease_of_holder(const revision_record& r, const std::string& holder) {
  for (auto it = r.leases.rbegin(); it != r.leases.rend(); ++it)
    if (it->second.holder == holder) return &it->second;
  return nullptr;
}

std::vector<lease_record> live_leases(const revision_record& r, int64_t now_ms) {
  std::vector<lease_record> out;
  for (const auto& [id, l] : r.leases)
    if (l.live_at(now_ms)) out.push_back(l);
  return out;
}

std::vector<v1::Envelope> expire_lapsed(const revision_record& r, const decide_context& ctx) {
  std::vector<v1::Envelope> out;
  for (const auto& [id, l] : r.leases)
    if (!l.live_at(ctx.now_ms)) out.push_back(lease_expired_event(r, id, ctx));
  return out;
}

std::string lease_blockers(const revision_record& r, int64_t now_ms) {
  auto live = live_leases(r, now_ms);
  if (live.empty()) return "no live lease";
  std::string holders;
  int64_t nearest = live.front().expiry_ms;
  for (const auto& l : live) {
    if (!holders.empty()) holders += ", ";
    holders += "'" + l.holder + "' (" + lease_name(l.id) + ")";
    nearest = std::min(nearest, l.expiry_ms);
  }
  char in[32];
  std::snprintf(in, sizeof in, "%.1f", static_cast<double>(nearest - now_ms) / 1000.0);
  return std::to_string(live.size()) + (live.size() == 1 ? " live lease" : " live leases") +
         " held by " + holders + "; the nearest expires at " + events::utc_text(nearest) + " (in " + in +
         " s)";
}

}  // namespace weightd::actors
