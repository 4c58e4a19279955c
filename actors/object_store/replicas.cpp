// Replicas: a copy to the other tier, a drop from one.
#include "actors/object_store/rooms.hpp"

namespace weightd::actors::store {

caf::result<object_info> add_replica(store_pointer self, std::string& tenant, std::string& key,
                                     v1::Tier tier) {
  auto& st = self->state;
  if (auto s = check_tier(tier); !s.ok()) return to_error(s);
  auto found = lookup(st, tenant, key);
  if (!found) return to_error(found.error());
  const auto* r = *found;
  object_ref ref{tenant, key};
  if (tier == v1::TIER_HOT ? r->hot : r->cold) return info_of(st, *r, now_ms(self));
  if (!r->readable())
    return to_error({errc::not_ready, describe(ref) + " has no replica to copy from"});
  if (st.busy.count(ref))
    return to_error(
        {errc::busy, "another operation on " + describe(ref) + " is in progress; retry"});
  st.busy.insert(ref);
  uint64_t size = r->size;
  std::string checksum = r->checksum;
  auto rp = self->make_response_promise<object_info>();
  reserve(self, tier, size, [=](status reserved) mutable {
    auto& st = self->state;
    if (!reserved.ok()) {
      if (tier == v1::TIER_HOT) ++st.counters.hot_allocation_failures;  // pressure
      st.busy.erase(ref);
      rp.deliver(to_error(reserved));
      return;
    }
    auto temp = "copy-" + std::to_string(st.next_put_id++);
    auto finish = [=](status s) mutable {
      auto& st = self->state;
      st.busy.erase(ref);
      if (!s.ok()) {
        release(self, tier, size);
        rp.deliver(to_error(s));
        return;
      }
      reserved_of(st, tier) -= size;
      (tier == v1::TIER_HOT ? st.counters.copied_to_hot_bytes : st.counters.copied_to_cold_bytes) +=
          size;
      rp.deliver(info_of(st, st.index.objects.at(ref), now_ms(self)));
    };
    self->request(next_io(self), st.config.io_timeout, copy_atom::value, tier, ref, temp)
        .then(
            [=](persistence::blob_digest& d) mutable {
              auto final_path = self->state.files.of(tier).object_path(ref).string();
              if (d.size != size || d.xxh3 != checksum) {
                unlink_files(self, {final_path});
                finish({errc::data_loss,
                        "the " + tier_name(tier == v1::TIER_HOT ? v1::TIER_COLD : v1::TIER_HOT) +
                            " replica of " + describe(ref) +
                            " failed its checksum; the object needs repair"});
                return;
              }
              auto e = object_event(self, ref, "");
              auto* added = e.mutable_replica_added();
              added->set_tenant(ref.tenant);
              added->set_key(ref.key);
              added->set_tier(tier);
              persist_and_apply(self, {std::move(e)}, [=](status s) mutable {
                if (!s.ok()) unlink_files(self, {final_path});
                finish(s);
              });
            },
            [=](caf::error& err) mutable { finish(to_status(err)); });
  });
  return rp;
}

caf::result<object_info> drop_replica(store_pointer self, std::string& tenant, std::string& key,
                                      v1::Tier tier, v1::RemovalReason reason) {
  auto& st = self->state;
  if (auto s = check_tier(tier); !s.ok()) return to_error(s);
  auto found = lookup(st, tenant, key);
  if (!found) return to_error(found.error());
  const auto* r = *found;
  object_ref ref{tenant, key};
  auto now = now_ms(self);
  if (!(tier == v1::TIER_HOT ? r->hot : r->cold)) return info_of(st, *r, now);
  if (!(tier == v1::TIER_HOT ? r->cold : r->hot))
    return to_error({errc::conflict, "the " + tier_name(tier) + " replica is the last one of " +
                                         describe(ref) + "; remove the object instead"});
  if (st.busy.count(ref))
    return to_error(
        {errc::busy, "another operation on " + describe(ref) + " is in progress; retry"});
  if (leased(st, ref, now))
    return to_error({errc::object_has_lease,
                     describe(ref) + " is being read; retry after its read lease ends"});
  st.busy.insert(ref);
  auto e = object_event(self, ref, "");
  auto* dropped = e.mutable_replica_dropped();
  dropped->set_tenant(ref.tenant);
  dropped->set_key(ref.key);
  dropped->set_tier(tier);
  dropped->set_reason(reason);
  auto path = st.files.of(tier).object_path(ref).string();
  auto rp = self->make_response_promise<object_info>();
  persist_and_apply(self, {std::move(e)}, [=](status s) mutable {
    auto& st = self->state;
    st.busy.erase(ref);
    if (!s.ok()) {
      rp.deliver(to_error(s));
      return;
    }
    unlink_files(self, {path});
    rp.deliver(info_of(st, st.index.objects.at(ref), now_ms(self)));
    if (tier == v1::TIER_HOT) retry_waiters(self);
  });
  return rp;
}

}  // namespace weightd::actors::store
