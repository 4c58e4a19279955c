// Reads: Get (with its read lease), local files, stat, list, a group's
// members, the counters.
#include "actors/object_store/rooms.hpp"

namespace weightd::actors::store {

caf::result<read_grant> get_object(store_pointer self, std::string& tenant, std::string& key,
                                   bool for_copy) {
  auto& st = self->state;
  auto found = lookup(st, tenant, key);
  if (!found) return to_error(found.error());
  const auto* r = *found;
  object_ref ref{tenant, key};
  if (!r->readable())
    return to_error({errc::not_ready, describe(ref) + " has no readable replica (its files were "
                                                      "lost); remove it and put it again"});
  bool hot = r->hot && !(st.busy.count(ref) && r->cold);  // a HOT drop may be in flight
  auto now = now_ms(self);
  if (!for_copy) {
    auto& lease = st.read_leases[ref];
    lease = std::max(lease, now + st.config.read_lease.count());
    st.last_access_ms[ref] = now;
  }
  read_grant grant;
  grant.info = info_of(st, *r, now);
  grant.tier = hot ? v1::TIER_HOT : v1::TIER_COLD;
  grant.path = st.files.of(grant.tier).object_path(ref).string();
  return grant;
}

caf::result<std::vector<local_file>> local_files(store_pointer self, std::string& tenant,
                                                 std::vector<std::string>& keys) {
  auto& st = self->state;
  std::vector<local_file> out;
  out.reserve(keys.size());
  for (const auto& key : keys) {
    auto found = lookup(st, tenant, key);
    if (!found) return to_error(found.error());
    const auto* r = *found;
    object_ref ref{tenant, key};
    if (!r->readable())
      return to_error({errc::not_ready, describe(ref) + " has no readable replica"});
    bool hot = r->hot && !(st.busy.count(ref) && r->cold);  // as Get: a HOT drop may run
    local_file f;
    f.key = key;
    f.tier = hot ? v1::TIER_HOT : v1::TIER_COLD;
    f.path = std::filesystem::absolute(st.files.of(f.tier).object_path(ref)).string();
    f.size = r->size;
    f.checksum_algorithm = r->checksum_algorithm;
    f.checksum = r->checksum;
    f.sha256 = r->sha256;
    out.push_back(std::move(f));
  }
  return out;
}

caf::result<object_info> stat_object(store_pointer self, std::string& tenant, std::string& key) {
  auto found = lookup(self->state, tenant, key);
  if (!found) return to_error(found.error());
  return info_of(self->state, **found, now_ms(self));
}

caf::result<object_page> list_objects(store_pointer self, std::string& tenant, std::string& prefix,
                                      std::string& start_after, uint32_t limit) {
  auto& st = self->state;
  if (auto s = check_identity_part("tenant", tenant, "default"); !s.ok()) return to_error(s);
  if (limit > 1000)
    return to_error({errc::invalid_argument, "limit must be at most 1000 (0 means 100)"});
  if (limit == 0) limit = 100;
  auto it = st.index.objects.lower_bound({tenant, std::max(prefix, start_after)});
  if (it != st.index.objects.end() && !start_after.empty() && it->first.key == start_after) ++it;
  object_page page;
  auto now = now_ms(self);
  for (; it != st.index.objects.end() && it->first.tenant == tenant &&
         it->first.key.compare(0, prefix.size(), prefix) == 0;
       ++it) {
    if (page.objects.size() == limit) {
      page.next_start_after = page.objects.back().record.ref.key;
      break;
    }
    page.objects.push_back(info_of(st, it->second, now));
  }
  return page;
}

caf::result<group_snapshot> group_of(store_pointer self, std::string& tenant, std::string& group_id,
                                     std::vector<std::string>& also) {
  auto& st = self->state;
  if (auto s = check_identity_part("tenant", tenant, "default"); !s.ok()) return to_error(s);
  if (group_id.empty()) return to_error({errc::invalid_argument, "group_id is empty"});
  group_snapshot snap{tenant, group_id, {}, {}};
  if (auto it = st.index.groups.find({tenant, group_id}); it != st.index.groups.end())
    for (const auto& key : it->second) {
      snap.members.push_back(st.index.objects.at({tenant, key}));
      snap.last_put_ms = std::max(snap.last_put_ms, snap.members.back().created_at_ms);
    }
  for (const auto& [id, put] : st.puts)
    if (put.ref.tenant == tenant && put.request.group_id == group_id)
      snap.last_put_ms = now_ms(self);
  for (const auto& key : also)
    if (const auto* r = st.index.find({tenant, key}); r && r->group_id != group_id)
      snap.outside.emplace(key, *r);
  return snap;
}

store_stats stats_of(store_pointer self) {
  auto& st = self->state;
  auto out = st.counters;
  out.hot = {st.index.hot_bytes, st.hot_reserved, st.files.hot->options().capacity_bytes};
  out.cold = {st.index.cold_bytes, st.cold_reserved, st.files.cold->options().capacity_bytes};
  out.objects = st.index.objects.size();
  return out;
}

}  // namespace weightd::actors::store
