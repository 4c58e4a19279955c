#include "actors/object_recovery.hpp"

#include <unordered_set>

#include <set>

#include "events/identity.hpp"

namespace weightd::actors {

namespace v1 = events::v1;

namespace {

/// An event of `ref`'s stream at `now_ms`, its payload still to set.
v1::Envelope replica_event(const events::object_ref& ref, int64_t now_ms) {
  v1::Envelope e;
  e.set_stream(events::object_stream(ref.tenant, ref.key));
  e.set_timestamp_ms(now_ms);
  return e;
}

}  // namespace

std::vector<v1::Envelope> replica_corrections(const events::object_index& index,
                                              const tiers& files, bool checksums, int64_t now_ms,
                                              recovery_report& report) {
  std::vector<v1::Envelope> out;
  for (const auto& [ref, record] : index.objects) {
    for (auto tier : {v1::TIER_HOT, v1::TIER_COLD}) {
      if (!(tier == v1::TIER_HOT ? record.hot : record.cold)) continue;
      auto check = files.of(tier).verify(ref, record.size, record.checksum, checksums);
      if (check == persistence::replica_check::ok) continue;
      bool lost = check == persistence::replica_check::missing;
      ++(lost ? report.lost_replicas : report.corrupt_replicas);
      auto e = replica_event(ref, now_ms);
      auto* dropped = e.mutable_replica_dropped();
      dropped->set_tenant(ref.tenant);
      dropped->set_key(ref.key);
      dropped->set_tier(tier);
      dropped->set_reason(lost ? v1::REMOVAL_LOST : v1::REMOVAL_CORRUPT);
      out.push_back(std::move(e));
    }
  }
  return out;
}

std::vector<v1::Envelope> cold_adoptions(const events::object_index& index, const tiers& files,
                                         int64_t now_ms, recovery_report& report) {
  std::vector<v1::Envelope> out;
  for (const auto& [ref, record] : index.objects) {
    if (!record.hot || record.cold) continue;
    if (files.hot->verify(ref, record.size, record.checksum, false) !=
        persistence::replica_check::missing)
      continue;
    if (files.cold->verify(ref, record.size, record.checksum, true) != persistence::replica_check::ok)
      continue;
    ++report.adopted_replicas;
    auto e = replica_event(ref, now_ms);
    auto* added = e.mutable_replica_added();
    added->set_tenant(ref.tenant);
    added->set_key(ref.key);
    added->set_tier(v1::TIER_COLD);
    out.push_back(std::move(e));
  }
  return out;
}

std::set<events::group_ref> damaged_groups_of(const events::object_index& index,
                                              const std::vector<v1::Envelope>& events) {
  std::set<events::group_ref> out;
  for (const auto& e : events) {
    if (!e.has_replica_dropped()) continue;
    auto it = index.objects.find({e.replica_dropped().tenant(), e.replica_dropped().key()});
    if (it != index.objects.end() && !it->second.group_id.empty())
      out.insert({it->second.ref.tenant, it->second.group_id});
  }
  return out;
}

void remove_orphan_files(const events::object_index& index, const tiers& files,
                         recovery_report& report) {
  for (auto tier : {v1::TIER_HOT, v1::TIER_COLD}) {
    const auto& store = files.of(tier);
    // Hashed plain strings: at 200 000 replicas an ordered set of paths
    // (compared component by component) was a quarter of a restart.
    std::unordered_set<std::string> owned;
    owned.reserve(index.objects.size());
    for (const auto& [ref, record] : index.objects)
      if (tier == v1::TIER_HOT ? record.hot : record.cold) owned.insert(store.object_path(ref).native());
    for (const auto& path : store.list_files()) {
      if (owned.count(path.native())) continue;
      persistence::tier_store::remove_file(path);
      ++report.orphan_files;
    }
  }
}

}  // namespace weightd::actors
