#include "actors/object_store.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "actors/errors.hpp"
#include "core/eviction_plan.hpp"
#include "actors/journaled.hpp"
#include "actors/log_value.hpp"
#include "core/validate.hpp"
#include "events/evolve.hpp"

namespace weightd::actors {

const char* object_store_state::name = "weightd.object_store";

namespace {

namespace v1 = events::v1;
using events::object_record;
using events::object_ref;
using store_pointer = object_store_actor::stateful_pointer<object_store_state>;

// ---------------------------------------------------------------- helpers

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
    return {errc::object_has_lease,
            describe(r.ref) + " is being read (read lease until " +
                std::to_string(st.read_leases.at(r.ref)) +
                " ms); retry after it ends or remove with force"};
  return {};
}

/// The object an object event names.
object_ref object_of(const v1::Envelope& e) {
  switch (e.payload_case()) {
    case v1::Envelope::kObjectPut: return {e.object_put().tenant(), e.object_put().key()};
    case v1::Envelope::kReplicaAdded: return {e.replica_added().tenant(), e.replica_added().key()};
    case v1::Envelope::kReplicaDropped:
      return {e.replica_dropped().tenant(), e.replica_dropped().key()};
    case v1::Envelope::kObjectRemoved:
      return {e.object_removed().tenant(), e.object_removed().key()};
    default: return {};
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

}  // namespace

journaled binding(object_store_actor::stateful_pointer<object_store_state> self) {
  auto& st = self->state;
  return {st.journal, st.config.journal_timeout, "the object store",
          [self](const v1::Envelope& e) {
            void_scrub_verdicts(self->state, e);
            return events::evolve_objects(self->state.index, e);
          }};
}

namespace {

// ------------------------------------------------------- capacity, eviction

eviction_plan plan_for(store_pointer self, uint64_t bytes) {
  auto& st = self->state;
  eviction_candidates c{st.index, st.last_access_ms, st.read_leases, st.busy,
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

void reserve(store_pointer self, v1::Tier tier, uint64_t bytes, std::function<void(status)> cont);

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
    spdlog::info("eviction round objects={} bytes={} hot_used_bytes={} skipped_managed={} "
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
  double target = (st.config.high_watermark - st.config.eviction_ratio) * static_cast<double>(capacity);
  auto plan = plan_for(self, used - static_cast<uint64_t>(std::max(0.0, target)));
  if (!plan.victims.empty()) start_eviction(self, plan, nullptr);
}

// -------------------------------------------------------------------- put

/// Moves `bytes` of a tenant's reserved share from one tier to another
/// (TIER_UNSPECIFIED = outside: a put starting or ending).
void move_share(object_store_state& st, const std::string& tenant, v1::Tier from, v1::Tier to,
                uint64_t bytes) {
  if (from != v1::TIER_UNSPECIFIED) {
    auto it = st.tenant_reserved.find({tenant, from});
    if (it != st.tenant_reserved.end()) {
      it->second -= std::min(it->second, bytes);
      if (it->second == 0) st.tenant_reserved.erase(it);
    }
  }
  if (to != v1::TIER_UNSPECIFIED) st.tenant_reserved[{tenant, to}] += bytes;
}

/// Creates a put's temp file with its bytes set aside by the filesystem. A
/// full HOT filesystem is an allocation failure like a full account (SPEC §2):
/// eviction frees the bytes and the allocation is tried once more.
void allocate_file(store_pointer self, io_actor io, v1::Tier tier, uint64_t bytes, std::string temp,
                   bool may_evict, std::function<void(status)> cont) {
  auto& st = self->state;
  self->request(io, st.config.io_timeout, allocate_atom::value, tier, temp, bytes)
      .then([=](bool) { cont({}); },
            [=](caf::error& err) {
              auto failed = to_status(err);
              if (failed.code() != errc::no_available_space || !may_evict) return cont(failed);
              auto plan = plan_for(self, bytes);
              if (plan.victims.empty()) return cont(failed);
              spdlog::info("the HOT filesystem is full; evicting {} objects ({} bytes) for a put "
                           "of {} bytes",
                           plan.victims.size(), plan.bytes, bytes);
              start_eviction(self, plan, [=](result<eviction_summary>) {
                // The worker that got the victims' unlinks (just now): it
                // allocates after it has freed their space.
                auto& st = self->state;
                auto unlinker = st.io[(st.next_io + st.io.size() - 1) % st.io.size()];
                allocate_file(self, unlinker, tier, bytes, temp, false, cont);
              });
            });
}

/// Holds room for a put in `tier`: weightd's account of the tier first
/// (reserve), then the filesystem's (allocate_file). On failure nothing is held.
void hold_room(store_pointer self, v1::Tier tier, uint64_t bytes, std::string temp,
               std::function<void(status)> cont) {
  reserve(self, tier, bytes, [=](status reserved) {
    if (!reserved.ok()) return cont(reserved);
    allocate_file(self, next_io(self), tier, bytes, temp, tier == v1::TIER_HOT,
                  [=](status allocated) {
      if (!allocated.ok()) release(self, tier, bytes);
      cont(allocated);
    });
  });
}

/// One tenant's puts in flight may reserve at most tenant_reserve_ratio of a
/// tier, so that puts that never finish cannot starve every other tenant. A
/// tenant with nothing reserved may always try: one object is never refused
/// by this rule, only by space.
status check_tenant_share(const object_store_state& st, const std::string& tenant,
                          v1::Tier tier, uint64_t bytes) {
  uint64_t capacity = st.files.of(tier).options().capacity_bytes;
  auto it = st.tenant_reserved.find({tenant, tier});
  if (capacity == 0 || it == st.tenant_reserved.end()) return {};
  auto share = static_cast<uint64_t>(st.config.tenant_reserve_ratio * static_cast<double>(capacity));
  if (it->second + bytes <= share) return {};
  return {errc::resource_exhausted,
          "tenant '" + tenant + "' has " + std::to_string(it->second) + " bytes reserved by puts "
          "in flight in the " + tier_name(tier) + " tier; " + std::to_string(bytes) +
          " more would pass its share of " + std::to_string(share) +
          " bytes (--tenant-reserve-ratio); finish or cancel puts first"};
}

caf::result<put_ticket> put_start(store_pointer self, put_request& req) {
  auto& st = self->state;
  if (auto s = check_identity_part("tenant", req.tenant, "default"); !s.ok()) return to_error(s);
  if (auto s = check_key("key", req.key); !s.ok()) return to_error(s);
  if (req.group_id.size() > kMaxKeyBytes)
    return to_error({errc::invalid_argument, "group_id is longer than 4096 bytes"});
  if (req.affinity_id.size() > kMaxKeyBytes)
    return to_error({errc::invalid_argument, "affinity_id is longer than 4096 bytes"});
  if (!v1::DataType_IsValid(req.data_type))
    return to_error({errc::invalid_argument, "data_type is not GENERAL, WEIGHT or METADATA"});
  // The importing revision a member belongs to (SPEC §2 Spill): it lands
  // where the revision prefers, and spills to COLD when HOT cannot fit it.
  const managed_group* importer = nullptr;
  if (!req.group_id.empty())
    if (auto it = st.managed.find({req.tenant, req.group_id});
        it != st.managed.end() && it->second.importing && req.data_type == v1::DATA_TYPE_WEIGHT)
      importer = &it->second;
  if (req.tier == v1::TIER_UNSPECIFIED)
    req.tier = importer && importer->preferred == v1::RESIDENCY_COLD ? v1::TIER_COLD : v1::TIER_HOT;
  if (req.tier != v1::TIER_HOT && req.tier != v1::TIER_COLD)
    return to_error({errc::invalid_argument, "tier must be HOT or COLD"});
  bool may_spill = importer && req.tier == v1::TIER_HOT;
  bool sha_expected = req.expected_algorithm == v1::CHECKSUM_SHA256;
  if (!req.expected_checksum.empty())
    if (auto s = check_hex("checksum", req.expected_checksum, sha_expected ? 64 : 16); !s.ok())
      return to_error(s);
  object_ref ref{req.tenant, req.key};
  if (st.index.find(ref))
    return to_error({errc::object_already_exists,
                     describe(ref) + " already exists; remove it first or use another key"});
  if (st.busy.count(ref))
    return to_error({errc::object_already_exists,
                     "a put or removal of " + describe(ref) + " is in progress"});
  if (auto s = check_tenant_share(st, req.tenant, req.tier, req.size); !s.ok()) return to_error(s);
  st.busy.insert(ref);
  move_share(st, req.tenant, v1::TIER_UNSPECIFIED, req.tier, req.size);  // counted from now on
  auto rp = self->make_response_promise<put_ticket>();
  uint64_t id = st.next_put_id++;
  auto temp_in = [self, id](v1::Tier t) {
    return self->state.files.of(t).temp_path("put-" + std::to_string(id)).string();
  };
  // Step 2: room is held in `in`: hand out the allocated temp file.
  auto ready_in = [=](v1::Tier in) mutable {
    auto& st = self->state;
    req.tier = in;
    put_ticket ticket;
    ticket.put_id = id;
    ticket.temp_path = temp_in(in);
    ticket.want_sha256 = req.want_sha256 || sha_expected ||
                         req.data_type == v1::DATA_TYPE_METADATA;
    ticket.enospc_after_bytes = st.files.of(in).options().inject_enospc_after_bytes;
    req.want_sha256 = ticket.want_sha256;
    st.puts[id] = {req, ref, req.tier, ticket.temp_path,
                   now_ms(self) + st.config.put_timeout.count()};
    rp.deliver(ticket);
  };
  auto refuse = [=](const status& why, v1::Tier held_share) mutable {
    auto& st = self->state;
    st.busy.erase(ref);
    move_share(st, req.tenant, held_share, v1::TIER_UNSPECIFIED, req.size);
    rp.deliver(to_error(why));
  };
  // Step 1: hold room; a member of an importing revision that HOT cannot fit
  // even after eviction spills to COLD (an import never fails for lack of
  // memory while the disk has room).
  auto tier = req.tier;
  hold_room(self, tier, req.size, temp_in(tier), [=](status held) mutable {
    auto& st = self->state;
    if (held.ok()) return ready_in(tier);
    bool full = held.code() == errc::no_available_space;
    if (full && tier == v1::TIER_HOT) ++st.counters.hot_allocation_failures;
    if (!(full && may_spill)) {
      if (full)  // the store is out of room: an operator must act
        spdlog::warn("put refused NO_AVAILABLE_SPACE tenant={} key={} bytes={} error={}",
                     quote_value(req.tenant), quote_value(req.key), req.size,
                     quote_value(held.message()));
      return refuse(held, tier);
    }
    ++st.counters.spills;
    spdlog::info("put spilled to COLD key=\"{}\" group={} bytes={}", req.key, req.group_id,
                 req.size);
    move_share(st, req.tenant, tier, v1::TIER_COLD, req.size);
    hold_room(self, v1::TIER_COLD, req.size, temp_in(v1::TIER_COLD), [=](status cold) mutable {
      if (cold.ok()) return ready_in(v1::TIER_COLD);
      if (cold.code() == errc::no_available_space)
        spdlog::warn("put refused NO_AVAILABLE_SPACE tenant={} key={} bytes={} error={} "
                     "(neither tier has room)",
                     quote_value(req.tenant), quote_value(req.key), req.size,
                     quote_value(cold.message()));
      refuse(cold, v1::TIER_COLD);
    });
  });
  return rp;
}

/// A put's reservation ends (registered, dropped or failed): its tenant's
/// share goes down.
void end_share(object_store_state& st, const object_store_state::pending_put& p) {
  move_share(st, p.ref.tenant, p.tier, v1::TIER_UNSPECIFIED, p.request.size);
}

/// Ends a put that will not be registered: capacity back, file gone.
void drop_put(store_pointer self, const object_store_state::pending_put& p) {
  self->state.busy.erase(p.ref);
  end_share(self->state, p);
  unlink_files(self, {p.temp_path});
  release(self, p.tier, p.request.size);
}

caf::result<object_info> put_end(store_pointer self, uint64_t id,
                                 const persistence::blob_digest& digest) {
  auto& st = self->state;
  auto it = st.puts.find(id);
  if (it == st.puts.end())
    return to_error({errc::not_found, "put " + std::to_string(id) +
                                          " is unknown: it finished, was aborted, or expired; "
                                          "start the put again"});
  auto p = std::move(it->second);
  st.puts.erase(it);
  const auto& req = p.request;
  status bad;
  if (digest.size != req.size)
    bad = {errc::invalid_argument, "size: the put announced " + std::to_string(req.size) +
                                       " bytes but " + std::to_string(digest.size) +
                                       " arrived; nothing was stored"};
  else if (req.want_sha256 && digest.sha256.empty())
    bad = {errc::invalid_argument, "sha256 of the bytes is required for this put"};
  else if (!req.expected_checksum.empty()) {
    bool sha = req.expected_algorithm == v1::CHECKSUM_SHA256;
    const auto& actual = sha ? digest.sha256 : digest.xxh3;
    if (actual != req.expected_checksum)
      bad = {errc::invalid_argument,
             std::string{"checksum: the bytes' "} + (sha ? "sha256" : "xxh3") + " is " + actual +
                 " but the client sent " + req.expected_checksum +
                 "; the data changed in transit — retry the put"};
  }
  if (!bad.ok()) {
    drop_put(self, p);
    return to_error(bad);
  }
  auto rp = self->make_response_promise<object_info>();
  self->request(next_io(self), st.config.io_timeout, publish_atom::value, p.tier, p.temp_path, p.ref)
      .then(
          [=](bool) {
            auto e = object_event(self, p.ref, req.principal);
            auto* put = e.mutable_object_put();
            put->set_tenant(p.ref.tenant);
            put->set_key(p.ref.key);
            put->set_data_type(req.data_type);
            put->set_group_id(req.group_id);
            put->set_affinity_id(req.affinity_id);
            put->set_size(digest.size);
            put->set_checksum_algorithm(v1::CHECKSUM_XXH3_64);
            put->set_checksum(digest.xxh3);
            put->set_sha256(digest.sha256);
            put->set_hard_pin(req.hard_pin);
            put->set_tier(p.tier);
            persist_and_apply(self, {std::move(e)}, [=](status committed) mutable {
              auto& st = self->state;
              st.busy.erase(p.ref);
              end_share(st, p);
              if (!committed.ok()) {
                unlink_files(self, {st.files.of(p.tier).object_path(p.ref).string()});
                release(self, p.tier, req.size);
                rp.deliver(to_error(committed));
                return;
              }
              reserved_of(st, p.tier) -= req.size;  // now counted as used
              auto now = now_ms(self);
              st.last_access_ms[p.ref] = now;
              rp.deliver(info_of(st, st.index.objects.at(p.ref), now));
              enforce_watermark(self);
            });
          },
          [=](caf::error& err) mutable {
            self->state.busy.erase(p.ref);  // the worker removed the temp file
            end_share(self->state, p);
            release(self, p.tier, req.size);
            rp.deliver(err);
          });
  return rp;
}

// ---------------------------------------------------------------- removal

/// Removes `records` (already checked removable) as one journal batch.
void remove_records(store_pointer self, std::vector<object_record> records, v1::RemovalReason reason,
                    const std::string& principal, std::function<void(status)> done) {
  auto& st = self->state;
  std::vector<v1::Envelope> batch;
  std::vector<std::string> files;
  for (const auto& r : records) {
    st.busy.insert(r.ref);
    auto e = object_event(self, r.ref, principal);
    auto* removed = e.mutable_object_removed();
    removed->set_tenant(r.ref.tenant);
    removed->set_key(r.ref.key);
    removed->set_reason(reason);
    batch.push_back(std::move(e));
    for (auto& path : replica_paths(st, r)) files.push_back(std::move(path));
  }
  persist_and_apply(self, std::move(batch), [=](status result) {
    auto& st = self->state;
    for (const auto& r : records) {
      st.busy.erase(r.ref);
      if (result.ok()) {
        st.last_access_ms.erase(r.ref);
        st.read_leases.erase(r.ref);
      }
    }
    if (result.ok()) unlink_files(self, files);
    done(result);
    if (result.ok()) retry_waiters(self);
  });
}

// ------------------------------------------------------------------ ticks

// ------------------------------------------------------------- the scrub

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
    spdlog::error("scrub: the {} replica of {} is {}; dropped it (a revision repairs from "
                  "another replica when one exists)",
                  tier_name(item.tier), describe(item.ref), item.missing ? "missing" : "corrupt");
  }
  if (drops.empty()) return;
  persist_and_apply(self, drops, [=](status s) {
    auto& st = self->state;
    for (const auto& e : drops) st.busy.erase(object_of(e));
    if (!s.ok()) {
      spdlog::warn("scrub verdicts not recorded: {}; the next pass finds them again", s.to_string());
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

void on_tick(store_pointer self) {
  auto& st = self->state;
  auto now = now_ms(self);
  std::vector<object_store_state::pending_put> expired;
  for (auto it = st.puts.begin(); it != st.puts.end();) {
    if (it->second.deadline_ms <= now) {
      expired.push_back(std::move(it->second));
      it = st.puts.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& p : expired) {
    ++st.counters.reclaimed_puts;
    drop_put(self, p);
  }
  for (auto it = st.read_leases.begin(); it != st.read_leases.end();)
    it = it->second <= now ? st.read_leases.erase(it) : std::next(it);
}

}  // namespace

object_store_actor spawn_object_store(caf::actor_system& sys, object_store_config config,
                                      object_store_deps deps) {
  return sys.spawn([config = std::move(config), deps = std::move(deps)](
                       store_pointer self) mutable -> object_store_actor::behavior_type {
    auto& st = self->state;
    st.config = std::move(config);
    st.journal = deps.journal;
    st.io = deps.io;
    st.files = deps.files;
    st.index = std::move(deps.index);
    st.damaged = std::move(deps.damaged);
    self->delayed_send(self, st.config.tick_interval, caf::tick_atom::value);
    return {
        [=](put_atom, put_request& req) { return put_start(self, req); },
        [=](put_atom, uint64_t id, persistence::blob_digest& digest) {
          return put_end(self, id, digest);
        },
        [=](abort_atom, uint64_t id) {
          auto& st = self->state;
          auto it = st.puts.find(id);
          if (it == st.puts.end()) return;
          auto p = std::move(it->second);
          st.puts.erase(it);
          drop_put(self, p);
        },
        [=](caf::get_atom, std::string& tenant, std::string& key) -> caf::result<read_grant> {
          auto& st = self->state;
          auto found = lookup(st, tenant, key);
          if (!found) return to_error(found.error());
          const auto* r = *found;
          object_ref ref{tenant, key};
          if (!r->readable())
            return to_error({errc::not_ready, describe(ref) +
                                                  " has no readable replica (its files were "
                                                  "lost); remove it and put it again"});
          bool hot = r->hot && !(st.busy.count(ref) && r->cold);  // a HOT drop may be in flight
          auto now = now_ms(self);
          auto& lease = st.read_leases[ref];
          lease = std::max(lease, now + st.config.read_lease.count());
          st.last_access_ms[ref] = now;
          read_grant grant;
          grant.info = info_of(st, *r, now);
          grant.tier = hot ? v1::TIER_HOT : v1::TIER_COLD;
          grant.path = st.files.of(grant.tier).object_path(ref).string();
          return grant;
        },
        [=](local_atom, std::string& tenant,
            std::vector<std::string>& keys) -> caf::result<std::vector<local_file>> {
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
        },
        [=](stat_atom, std::string& tenant, std::string& key) -> caf::result<object_info> {
          auto found = lookup(self->state, tenant, key);
          if (!found) return to_error(found.error());
          return info_of(self->state, **found, now_ms(self));
        },
        [=](remove_atom, std::string& tenant, std::string& key, bool force,
            std::string& principal) -> caf::result<object_info> {
          auto& st = self->state;
          auto found = lookup(st, tenant, key);
          if (!found) return to_error(found.error());
          const auto* r = *found;
          auto now = now_ms(self);
          if (auto s = removable(st, *r, force, now); !s.ok()) return to_error(s);
          auto info = info_of(st, *r, now);
          auto rp = self->make_response_promise<object_info>();
          remove_records(self, {*r}, v1::REMOVAL_USER, principal, [=](status s) mutable {
            if (s.ok()) rp.deliver(info); else rp.deliver(to_error(s));
          });
          return rp;
        },
        [=](remove_atom, std::string& tenant, std::vector<std::string>& keys, bool force,
            std::string& principal) -> caf::result<batch_removal> {
          auto& st = self->state;
          if (auto s = check_identity_part("tenant", tenant, "default"); !s.ok()) return to_error(s);
          // Malformed input refuses the whole batch: nothing is removed.
          if (keys.size() > kMaxBatchKeys)
            return to_error({errc::invalid_argument,
                             "keys has " + std::to_string(keys.size()) + " entries; at most " +
                                 std::to_string(kMaxBatchKeys) + " per call"});
          for (size_t i = 0; i < keys.size(); ++i)
            if (auto s = check_key(("keys[" + std::to_string(i) + "]").c_str(), keys[i]); !s.ok())
              return to_error(s);
          auto now = now_ms(self);
          auto out = std::make_shared<batch_removal>();
          std::vector<size_t> pending;  // indexes into out->results
          std::vector<object_record> records;
          std::set<std::string> seen;
          for (const auto& key : keys) {
            if (!seen.insert(key).second) continue;
            remove_outcome outcome{key, {}};
            const object_record* r = nullptr;
            if (!(r = st.index.find({tenant, key}))) outcome.result = not_found({tenant, key});
            else if (auto s2 = removable(st, *r, force, now); !s2.ok()) outcome.result = s2;
            else {
              pending.push_back(out->results.size());
              records.push_back(*r);
            }
            out->results.push_back(std::move(outcome));
          }
          if (records.empty()) return *out;
          auto rp = self->make_response_promise<batch_removal>();
          remove_records(self, records, v1::REMOVAL_USER, principal, [=](status s) mutable {
            for (auto i : pending) out->results[i].result = s;
            rp.deliver(*out);
          });
          return rp;
        },
        [=](removeall_atom, std::string& tenant, std::string& prefix, bool all,
            std::string& principal) -> caf::result<removal_summary> {
          auto& st = self->state;
          if (auto s = check_identity_part("tenant", tenant, "default"); !s.ok()) return to_error(s);
          // An empty request (or a garbage frame) must not empty the tenant.
          if (prefix.empty() && !all)
            return to_error({errc::invalid_argument,
                             "prefix is required; pass all=true (weightctl obj rm-all --all) to "
                             "remove every unmanaged object of the tenant"});
          if (!prefix.empty() && all)
            return to_error({errc::invalid_argument, "prefix and all=true exclude each other"});
          auto now = now_ms(self);
          auto summary = std::make_shared<removal_summary>();
          std::vector<object_record> records;
          for (auto it = st.index.objects.lower_bound({tenant, prefix});
               it != st.index.objects.end() && it->first.tenant == tenant &&
               it->first.key.compare(0, prefix.size(), prefix) == 0;
               ++it) {
            const auto& r = it->second;
            if (owner_of(st, r)) {
              ++summary->skipped_managed;
              ++st.counters.guard_skips["remove_all"];
            } else if (st.busy.count(r.ref)) {
              ++summary->skipped_busy;
            } else if (leased(st, r.ref, now)) {
              ++summary->skipped_leased;
            } else {
              records.push_back(r);
            }
          }
          if (records.empty()) return *summary;
          auto rp = self->make_response_promise<removal_summary>();
          remove_records(self, records, v1::REMOVAL_USER, principal, [=](status s) mutable {
            if (!s.ok()) {
              rp.deliver(to_error(s));
              return;
            }
            for (const auto& r : records) summary->removed_keys.push_back(r.ref.key);
            rp.deliver(*summary);
          });
          return rp;
        },
        [=](evict_atom, double target_ratio) -> caf::result<eviction_summary> {
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
            if (r.ok()) rp.deliver(*r); else rp.deliver(to_error(r.error()));
          });
          return rp;
        },
        [=](group_atom, std::string& tenant, std::string& group_id,
            std::vector<std::string>& also) -> caf::result<group_snapshot> {
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
        },
        [=](remove_atom, std::string& tenant, std::vector<std::string>& keys,
            v1::RemovalReason reason) -> caf::result<batch_removal> {
          auto& st = self->state;
          auto out = std::make_shared<batch_removal>();
          std::vector<size_t> pending;
          std::vector<object_record> records;
          for (const auto& key : keys) {
            remove_outcome outcome{key, {}};
            const auto* r = st.index.find({tenant, key});
            if (r && st.busy.count(r->ref))
              outcome.result = {errc::busy, "another operation on " + describe(r->ref) +
                                                " is in progress; retry"};
            else if (r) {
              pending.push_back(out->results.size());
              records.push_back(*r);
            }  // an absent key is already removed: ok
            out->results.push_back(std::move(outcome));
          }
          if (records.empty()) return *out;
          auto rp = self->make_response_promise<batch_removal>();
          remove_records(self, records, reason, "", [=](status s) mutable {
            for (auto i : pending) out->results[i].result = s;
            rp.deliver(*out);
          });
          return rp;
        },
        [=](caf::add_atom, std::string& tenant, std::string& key,
            v1::Tier tier) -> caf::result<object_info> {
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
            return to_error({errc::busy, "another operation on " + describe(ref) +
                                             " is in progress; retry"});
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
              (tier == v1::TIER_HOT ? st.counters.copied_to_hot_bytes
                                    : st.counters.copied_to_cold_bytes) += size;
              rp.deliver(info_of(st, st.index.objects.at(ref), now_ms(self)));
            };
            self->request(next_io(self), st.config.io_timeout, copy_atom::value, tier, ref, temp)
                .then(
                    [=](persistence::blob_digest& d) mutable {
                      auto final_path = self->state.files.of(tier).object_path(ref).string();
                      if (d.size != size || d.xxh3 != checksum) {
                        unlink_files(self, {final_path});
                        finish({errc::data_loss,
                                       "the " + tier_name(tier == v1::TIER_HOT ? v1::TIER_COLD
                                                                               : v1::TIER_HOT) +
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
        },
        [=](drop_atom, std::string& tenant, std::string& key, v1::Tier tier,
            v1::RemovalReason reason) -> caf::result<object_info> {
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
            return to_error({errc::busy, "another operation on " + describe(ref) +
                                             " is in progress; retry"});
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
        },
        [=](list_atom, std::string& tenant, std::string& prefix, std::string& start_after,
            uint32_t limit) -> caf::result<object_page> {
          auto& st = self->state;
          if (auto s = check_identity_part("tenant", tenant, "default"); !s.ok()) return to_error(s);
          if (limit > 1000)
            return to_error({errc::invalid_argument, "limit must be at most 1000 (0 means 100)"});
          if (limit == 0) limit = 100;
          auto it = st.index.objects.lower_bound({tenant, std::max(prefix, start_after)});
          if (it != st.index.objects.end() && !start_after.empty() && it->first.key == start_after)
            ++it;
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
        },
        [=](guard_atom, std::string& tenant, std::string& group_id, managed_group& group) {
          self->state.managed[{tenant, group_id}] = std::move(group);
        },
        [=](guard_atom, std::string& tenant, std::string& group_id) {
          self->state.managed.erase({tenant, group_id});
        },
        [=](caf::tick_atom) {
          on_tick(self);
          self->delayed_send(self, self->state.config.tick_interval, caf::tick_atom::value);
        },
        [=](scrub_atom, uint64_t budget) { return next_scrub_batch(self, budget); },
        [=](scrub_atom, scrub_batch& verdicts) { take_scrub_verdicts(self, verdicts); },
        [=](damaged_atom) {
          damaged_groups out;
          out.groups.assign(self->state.damaged.begin(), self->state.damaged.end());
          self->state.damaged.clear();
          return out;
        },
        [=](stats_atom) {
          auto& st = self->state;
          auto out = st.counters;
          out.hot = {st.index.hot_bytes, st.hot_reserved, st.files.hot->options().capacity_bytes};
          out.cold = {st.index.cold_bytes, st.cold_reserved, st.files.cold->options().capacity_bytes};
          out.objects = st.index.objects.size();
          return out;
        },
    };
  });
}

}  // namespace weightd::actors
