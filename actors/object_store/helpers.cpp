// What the store's rooms share: naming, lookups, the guard's questions,
// the events' envelope, and how the store persists (binding).
#include "actors/journaled.hpp"
#include "actors/object_store/rooms.hpp"
#include "events/evolve.hpp"

namespace weightd::actors {

namespace store {

int64_t now_ms(store_pointer self) { return self->state.config.now_ms(); }

std::string describe(const object_ref& ref) {
  return "object '" + ref.key + "' (tenant " + ref.tenant + ")";
}

std::string tier_name(v1::Tier tier) { return tier == v1::TIER_COLD ? "COLD" : "HOT"; }

v1::Envelope object_event(store_pointer self, const object_ref& ref, const std::string& principal) {
  v1::Envelope e;
  e.set_stream(events::object_stream(ref.tenant, ref.key));
  e.set_timestamp_ms(now_ms(self));
  e.set_principal(principal);
  return e;
}

io_actor next_io(store_pointer self) {
  auto& st = self->state;
  return st.io[st.next_io++ % st.io.size()];
}

void unlink_files(store_pointer self, std::vector<std::string> paths) {
  if (!paths.empty()) self->send(next_io(self), unlink_atom::value, std::move(paths));
}

std::vector<std::string> replica_paths(const object_store_state& st, const object_record& r) {
  std::vector<std::string> paths;
  if (r.hot) paths.push_back(st.files.hot->object_path(r.ref).string());
  if (r.cold) paths.push_back(st.files.cold->object_path(r.ref).string());
  return paths;
}

bool leased(const object_store_state& st, const object_ref& ref, int64_t now) {
  auto it = st.read_leases.find(ref);
  return it != st.read_leases.end() && it->second > now;
}

const managed_group* owner_of(const object_store_state& st, const object_record& r) {
  if (r.group_id.empty()) return nullptr;
  auto it = st.managed.find({r.ref.tenant, r.group_id});
  return it == st.managed.end() ? nullptr : &it->second;
}

object_info info_of(const object_store_state& st, const object_record& r, int64_t now) {
  object_info info;
  info.record = r;
  if (auto it = st.last_access_ms.find(r.ref); it != st.last_access_ms.end())
    info.last_access_ms = it->second;
  else
    info.last_access_ms = r.created_at_ms;
  if (leased(st, r.ref, now)) info.read_lease_expiry_ms = st.read_leases.at(r.ref);
  if (const auto* owner = owner_of(st, r)) info.managed_by = owner->owner;
  return info;
}

uint64_t& reserved_of(object_store_state& st, v1::Tier tier) {
  return tier == v1::TIER_COLD ? st.cold_reserved : st.hot_reserved;
}

uint64_t used_of(const object_store_state& st, v1::Tier tier) {
  return tier == v1::TIER_COLD ? st.index.cold_bytes : st.index.hot_bytes;
}

status not_found(const object_ref& ref) {
  return {errc::not_found, describe(ref) + " does not exist"};
}

/// Checks the address a client gave (tenant defaulted) and finds the object.
result<const object_record*> lookup(const object_store_state& st, std::string& tenant,
                                    const std::string& key) {
  if (auto s = check_identity_part("tenant", tenant, "default"); !s.ok()) return s;
  if (auto s = check_key("key", key); !s.ok()) return s;
  const auto* r = st.index.find({tenant, key});
  if (!r) return not_found({tenant, key});
  return r;
}

status check_tier(v1::Tier tier) {
  if (tier == v1::TIER_HOT || tier == v1::TIER_COLD) return {};
  return {errc::invalid_argument, "tier must be HOT or COLD"};
}

/// Why a generic remove of `r` is refused now, if it is.
status removable(const object_store_state& st, const object_record& r, bool force, int64_t now) {
  if (const auto* owner = owner_of(st, r); owner && !owner->importing)
    return {errc::managed_object, describe(r.ref) + " is a member of weight revision " +
                                      owner->owner + "; remove or abort the revision instead"};
  if (st.busy.count(r.ref))
    return {errc::busy, "another operation on " + describe(r.ref) + " is in progress; retry"};
  if (!force && leased(st, r.ref, now))
    return {errc::object_has_lease, describe(r.ref) + " is being read (read lease until " +
                                        std::to_string(st.read_leases.at(r.ref)) +
                                        " ms); retry after it ends or remove with force"};
  return {};
}

/// The object an object event names.
object_ref object_of(const v1::Envelope& e) {
  switch (e.payload_case()) {
    case v1::Envelope::kObjectPut:
      return {e.object_put().tenant(), e.object_put().key()};
    case v1::Envelope::kReplicaAdded:
      return {e.replica_added().tenant(), e.replica_added().key()};
    case v1::Envelope::kReplicaDropped:
      return {e.replica_dropped().tenant(), e.replica_dropped().key()};
    case v1::Envelope::kObjectRemoved:
      return {e.object_removed().tenant(), e.object_removed().key()};
    default:
      return {};
  }
}

/// A scrub verdict on a replica whose object changed since it was handed out
/// says nothing about the replica it has now.
void void_scrub_verdicts(object_store_state& st, const v1::Envelope& e) {
  if (st.scrubbing.empty()) return;
  auto ref = object_of(e);
  st.scrubbing.erase({ref, v1::TIER_HOT});
  st.scrubbing.erase({ref, v1::TIER_COLD});
}

}  // namespace store

journaled binding(store::store_pointer self) {
  using namespace store;
  auto& st = self->state;
  return {st.journal, st.config.journal_timeout, "the object store", [self](const v1::Envelope& e) {
            void_scrub_verdicts(self->state, e);
            return events::evolve_objects(self->state.index, e);
          }};
}

}  // namespace weightd::actors
