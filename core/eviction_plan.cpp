#include "core/eviction_plan.hpp"

#include <algorithm>
#include <tuple>

namespace weightd::actors {

eviction_plan plan_eviction(const eviction_candidates& c, uint64_t bytes_to_free) {
  eviction_plan plan;
  struct candidate {
    int64_t access;
    const events::object_record* record;
  };
  std::vector<candidate> order;
  for (const auto& [ref, record] : c.index.objects) {
    if (!record.hot || c.busy.count(ref)) continue;
    if (record.hard_pin) {
      ++plan.skipped_pinned;
      continue;
    }
    if (auto lease = c.read_lease_expiry_ms.find(ref);
        lease != c.read_lease_expiry_ms.end() && lease->second > c.now_ms) {
      ++plan.skipped_leased;
      continue;
    }
    if (c.is_managed && c.is_managed(record)) {
      ++plan.skipped_managed;
      continue;
    }
    auto access = c.last_access_ms.find(ref);
    order.push_back({access == c.last_access_ms.end() ? record.created_at_ms : access->second,
                     &record});
  }
  std::sort(order.begin(), order.end(), [](const candidate& a, const candidate& b) {
    return std::tie(a.access, a.record->ref) < std::tie(b.access, b.record->ref);
  });
  for (const auto& cand : order) {
    if (plan.bytes >= bytes_to_free && bytes_to_free > 0) break;
    if (bytes_to_free == 0) break;
    plan.victims.push_back(cand.record->ref);
    plan.bytes += cand.record->size;
  }
  return plan;
}

}  // namespace weightd::actors
