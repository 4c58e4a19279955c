// Capacity: reservations, the HOT watermark, eviction.
#include "actors/object_store/rooms.hpp"

namespace weightd::actors::store {

eviction_plan plan_for(store_pointer self, uint64_t bytes) {
  auto& st = self->state;
  eviction_candidates c{st.index,
                        st.last_access_ms,
                        st.read_leases,
                        st.busy,
                        [&st](const object_record& r) { return owner_of(st, r) != nullptr; },
                        now_ms(self)};
  auto plan = plan_eviction(c, bytes);
  st.counters.guard_skips["evict"] += plan.skipped_managed;
  return plan;
}

void fail_waiters(store_pointer self, const status& why) {
  auto waiting = std::move(self->state.waiters);
  self->state.waiters.clear();
  for (auto& w : waiting) w.continuation(why);
}

void retry_waiters(store_pointer self) {
  auto waiting = std::move(self->state.waiters);
  self->state.waiters.clear();
  for (auto& w : waiting) reserve(self, w.tier, w.bytes, std::move(w.continuation));
}

/// Drops the HOT replicas of `plan`'s victims (an object without a COLD
/// replica goes away) as one journal batch.
void start_eviction(store_pointer self, const eviction_plan& plan,
                    std::function<void(result<eviction_summary>)> done) {
  auto& st = self->state;
  std::vector<v1::Envelope> batch;
  std::vector<std::string> files;
  for (const auto& ref : plan.victims) {
    const auto& r = st.index.objects.at(ref);
    st.busy.insert(ref);
    auto e = object_event(self, ref, "");
    if (r.cold) {
      auto* d = e.mutable_replica_dropped();
      d->set_tenant(ref.tenant);
      d->set_key(ref.key);
      d->set_tier(v1::TIER_HOT);
      d->set_reason(v1::REMOVAL_EVICTED);
    } else {
      auto* d = e.mutable_object_removed();
      d->set_tenant(ref.tenant);
      d->set_key(ref.key);
      d->set_reason(v1::REMOVAL_EVICTED);
    }
    batch.push_back(std::move(e));
    files.push_back(st.files.hot->object_path(ref).string());
  }
  st.hot_freeing += plan.bytes;
  persist_and_apply(self, std::move(batch), [=](status result) {
    auto& st = self->state;
    st.hot_freeing -= plan.bytes;
    for (const auto& ref : plan.victims) {
      st.busy.erase(ref);
      if (!st.index.find(ref)) {
        st.last_access_ms.erase(ref);
        st.read_leases.erase(ref);
      }
    }
    if (!result.ok()) {
      if (done) done(result);
      fail_waiters(self, result);
      return;
    }
    unlink_files(self, files);
    st.counters.evicted_objects += plan.victims.size();
    st.counters.evicted_bytes += plan.bytes;
    // One line per round (not per object): what went and what HOT holds now.
    spdlog::info(
        "eviction round objects={} bytes={} hot_used_bytes={} skipped_managed={} "
        "skipped_pinned={} skipped_leased={}",
        plan.victims.size(), plan.bytes, st.index.hot_bytes, plan.skipped_managed,
        plan.skipped_pinned, plan.skipped_leased);
    if (done) {
      eviction_summary summary;
      summary.evicted_objects = plan.victims.size();
      summary.freed_bytes = plan.bytes;
      summary.skipped_managed = plan.skipped_managed;
      summary.skipped_pinned = plan.skipped_pinned;
      summary.skipped_leased = plan.skipped_leased;
      summary.hot_used_bytes = st.index.hot_bytes;
      done(summary);
    }
    retry_waiters(self);
  });
}

/// Reserves `bytes` in `tier`, evicting from HOT when it does not fit; runs
/// `cont` once the reservation holds (or with NO_AVAILABLE_SPACE).
void reserve(store_pointer self, v1::Tier tier, uint64_t bytes, std::function<void(status)> cont) {
  auto& st = self->state;
  uint64_t capacity = st.files.of(tier).options().capacity_bytes;
  uint64_t& reserved = reserved_of(st, tier);
  uint64_t used = used_of(st, tier);
  if (capacity == 0 || used + reserved + bytes <= capacity) {
    reserved += bytes;
    cont({});
    return;
  }
  auto full = [&](const std::string& why) {
    return status{errc::no_available_space,
                  "the " + tier_name(tier) + " tier cannot fit " + std::to_string(bytes) +
                      " bytes (used " + std::to_string(used) + " bytes, reserved " +
                      std::to_string(reserved) + " bytes of " + std::to_string(capacity) +
                      " bytes)" + why +
                      "; remove objects, put to another tier, or raise the tier's capacity"};
  };
  if (tier == v1::TIER_COLD || bytes > capacity) return cont(full(""));
  uint64_t shortfall = used + reserved + bytes - capacity;
  if (shortfall > st.hot_freeing) {
    auto plan = plan_for(self, shortfall - st.hot_freeing);
    if (plan.bytes < shortfall - st.hot_freeing)
      return cont(full(" even after eviction: " + std::to_string(plan.skipped_managed) +
                       " managed, " + std::to_string(plan.skipped_pinned) + " pinned and " +
                       std::to_string(plan.skipped_leased) + " leased objects stay"));
    start_eviction(self, plan, nullptr);
  }
  st.waiters.push_back({tier, bytes, std::move(cont)});
}

/// Returns a reservation (a put or copy that ended) and lets waiters retry.
void release(store_pointer self, v1::Tier tier, uint64_t bytes) {
  reserved_of(self->state, tier) -= bytes;
  retry_waiters(self);
}

/// Above the high watermark, evicts down to high - eviction_ratio.
void enforce_watermark(store_pointer self) {
  auto& st = self->state;
  uint64_t capacity = st.files.hot->options().capacity_bytes;
  if (capacity == 0) return;
  uint64_t used = st.index.hot_bytes - std::min(st.index.hot_bytes, st.hot_freeing);
  if (used <= st.config.high_watermark * static_cast<double>(capacity)) return;
  double target =
      (st.config.high_watermark - st.config.eviction_ratio) * static_cast<double>(capacity);
  auto plan = plan_for(self, used - static_cast<uint64_t>(std::max(0.0, target)));
  if (!plan.victims.empty()) start_eviction(self, plan, nullptr);
}

caf::result<eviction_summary> evict_to(store_pointer self, double target_ratio) {
  auto& st = self->state;
  if (!(target_ratio >= 0.0 && target_ratio <= 1.0))
    return to_error({errc::invalid_argument, "target_ratio must be within [0, 1]"});
  uint64_t capacity = st.files.hot->options().capacity_bytes;
  uint64_t used = st.index.hot_bytes - std::min(st.index.hot_bytes, st.hot_freeing);
  double target = target_ratio * static_cast<double>(capacity);
  eviction_summary nothing;
  nothing.hot_used_bytes = st.index.hot_bytes;
  if (capacity == 0 || static_cast<double>(used) <= target) return nothing;
  auto plan = plan_for(self, used - static_cast<uint64_t>(target));
  if (plan.victims.empty()) {
    nothing.skipped_managed = plan.skipped_managed;
    nothing.skipped_pinned = plan.skipped_pinned;
    nothing.skipped_leased = plan.skipped_leased;
    return nothing;
  }
  auto rp = self->make_response_promise<eviction_summary>();
  start_eviction(self, plan, [=](result<eviction_summary> r) mutable {
    if (r.ok())
      rp.deliver(*r);
    else
      rp.deliver(to_error(r.error()));
  });
  return rp;
}

}  // namespace weightd::actors::store
