// Puts: reserve, hand out a temp file, publish what comes back; abort
// and reclaim the ones that never finish.
#include "actors/object_store/rooms.hpp"

namespace weightd::actors::store {

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
              spdlog::info(
                  "the HOT filesystem is full; evicting {} objects ({} bytes) for a put "
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
status check_tenant_share(const object_store_state& st, const std::string& tenant, v1::Tier tier,
                          uint64_t bytes) {
  uint64_t capacity = st.files.of(tier).options().capacity_bytes;
  auto it = st.tenant_reserved.find({tenant, tier});
  if (capacity == 0 || it == st.tenant_reserved.end()) return {};
  auto share =
      static_cast<uint64_t>(st.config.tenant_reserve_ratio * static_cast<double>(capacity));
  if (it->second + bytes <= share) return {};
  return {errc::resource_exhausted,
          "tenant '" + tenant + "' has " + std::to_string(it->second) +
              " bytes reserved by puts "
              "in flight in the " +
              tier_name(tier) + " tier; " + std::to_string(bytes) +
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
    return to_error(
        {errc::object_already_exists, "a put or removal of " + describe(ref) + " is in progress"});
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
    ticket.want_sha256 = req.want_sha256 || sha_expected || req.data_type == v1::DATA_TYPE_METADATA;
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
        spdlog::warn(
            "put refused NO_AVAILABLE_SPACE tenant={} key={} bytes={} error={} "
            "(neither tier has room)",
            quote_value(req.tenant), quote_value(req.key), req.size, quote_value(cold.message()));
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
      bad = {errc::invalid_argument, std::string{"checksum: the bytes' "} +
                                         (sha ? "sha256" : "xxh3") + " is " + actual +
                                         " but the client sent " + req.expected_checksum +
                                         "; the data changed in transit — retry the put"};
  }
  if (!bad.ok()) {
    drop_put(self, p);
    return to_error(bad);
  }
  auto rp = self->make_response_promise<object_info>();
  self->request(next_io(self), st.config.io_timeout, publish_atom::value, p.tier, p.temp_path,
                p.ref)
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

void abort_put(store_pointer self, uint64_t id) {
  auto& st = self->state;
  auto it = st.puts.find(id);
  if (it == st.puts.end()) return;
  auto p = std::move(it->second);
  st.puts.erase(it);
  drop_put(self, p);
}

/// Each tick: unfinished puts past their deadline are reclaimed, read
/// leases past their end are forgotten.
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

}  // namespace weightd::actors::store
