// The scrub's side in the store: what to read next, what its verdicts drop.
#include "actors/object_store/rooms.hpp"

namespace weightd::actors::store {

/// The next replicas for the scrub: in (key, tier) order after the last
/// round's, wrapping around; at least one, then up to `budget` bytes.
scrub_batch next_scrub_batch(store_pointer self, uint64_t budget) {
  auto& st = self->state;
  scrub_batch batch;
  uint64_t bytes = 0;
  auto take = [&](const object_record& r, v1::Tier tier) {
    if (!(tier == v1::TIER_HOT ? r.hot : r.cold) || st.busy.count(r.ref)) return true;
    if (!batch.items.empty() && bytes + r.size > budget) return false;
    batch.items.push_back({r.ref, tier, r.size, r.checksum});
    st.scrubbing.insert({r.ref, tier});
    st.scrub_after = {r.ref, tier};
    bytes += r.size;
    return true;
  };
  auto from = st.index.objects.lower_bound(st.scrub_after.first);
  // The rest of the object the last round stopped in (its COLD replica).
  if (from != st.index.objects.end() && from->first == st.scrub_after.first) {
    if (st.scrub_after.second == v1::TIER_HOT && !take(from->second, v1::TIER_COLD)) return batch;
    ++from;
  }
  auto visit = [&](auto begin, auto end) {
    for (auto it = begin; it != end; ++it)
      for (auto tier : {v1::TIER_HOT, v1::TIER_COLD})
        if (!take(it->second, tier)) return false;
    return true;
  };
  if (visit(from, st.index.objects.end()) && bytes < budget)
    visit(st.index.objects.begin(), from);  // wrapped: a new pass
  return batch;
}

/// The scrub's verdicts: a mismatching replica is dropped as CORRUPT, a
/// missing one as LOST, and its group is damaged.
void take_scrub_verdicts(store_pointer self, const scrub_batch& batch) {
  auto& st = self->state;
  std::vector<v1::Envelope> drops;
  for (const auto& item : batch.items) {
    if (!st.scrubbing.erase({item.ref, item.tier})) continue;  // changed meanwhile
    st.counters.scrub_bytes += item.size;
    if (!item.missing && !item.corrupt) continue;
    auto it = st.index.objects.find(item.ref);
    if (it == st.index.objects.end() || st.busy.count(item.ref)) continue;
    auto e = object_event(self, item.ref, "");
    auto* dropped = e.mutable_replica_dropped();
    dropped->set_tenant(item.ref.tenant);
    dropped->set_key(item.ref.key);
    dropped->set_tier(item.tier);
    dropped->set_reason(item.missing ? v1::REMOVAL_LOST : v1::REMOVAL_CORRUPT);
    drops.push_back(std::move(e));
    st.busy.insert(item.ref);
    spdlog::error(
        "scrub: the {} replica of {} is {}; dropped it (a revision repairs from "
        "another replica when one exists)",
        tier_name(item.tier), describe(item.ref), item.missing ? "missing" : "corrupt");
  }
  if (drops.empty()) return;
  persist_and_apply(self, drops, [=](status s) {
    auto& st = self->state;
    for (const auto& e : drops) st.busy.erase(object_of(e));
    if (!s.ok()) {
      spdlog::warn("scrub verdicts not recorded: {}; the next pass finds them again",
                   s.to_string());
      return;
    }
    retry_waiters(self);  // a dropped HOT replica freed its bytes
    for (const auto& e : drops) {
      ++st.counters.scrub_corrupt;
      auto ref = object_of(e);
      auto it = st.index.objects.find(ref);
      if (it != st.index.objects.end() && !it->second.group_id.empty())
        st.damaged.insert({ref.tenant, it->second.group_id});
      if (e.replica_dropped().reason() == v1::REMOVAL_CORRUPT)
        unlink_files(self, {st.files.of(e.replica_dropped().tier()).object_path(ref).string()});
    }
  });
}

damaged_groups take_damaged(store_pointer self) {
  damaged_groups out;
  out.groups.assign(self->state.damaged.begin(), self->state.damaged.end());
  self->state.damaged.clear();
  return out;
}

}  // namespace weightd::actors::store
