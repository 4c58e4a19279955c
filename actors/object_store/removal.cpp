// Removal: of one object, a batch, a prefix, and of a revision's members.
#include "actors/object_store/rooms.hpp"

namespace weightd::actors::store {

/// Removes `records` (already checked removable) as one journal batch.
void remove_records(store_pointer self, std::vector<object_record> records,
                    v1::RemovalReason reason, const std::string& principal,
                    std::function<void(status)> done) {
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

caf::result<object_info> remove_object(store_pointer self, std::string& tenant, std::string& key,
                                       bool force, std::string& principal) {
  auto& st = self->state;
  auto found = lookup(st, tenant, key);
  if (!found) return to_error(found.error());
  const auto* r = *found;
  auto now = now_ms(self);
  if (auto s = removable(st, *r, force, now); !s.ok()) return to_error(s);
  auto info = info_of(st, *r, now);
  auto rp = self->make_response_promise<object_info>();
  remove_records(self, {*r}, v1::REMOVAL_USER, principal, [=](status s) mutable {
    if (s.ok())
      rp.deliver(info);
    else
      rp.deliver(to_error(s));
  });
  return rp;
}

caf::result<batch_removal> remove_batch(store_pointer self, std::string& tenant,
                                        std::vector<std::string>& keys, bool force,
                                        std::string& principal) {
  auto& st = self->state;
  if (auto s = check_identity_part("tenant", tenant, "default"); !s.ok()) return to_error(s);
  // Malformed input refuses the whole batch: nothing is removed.
  if (keys.size() > kMaxBatchKeys)
    return to_error({errc::invalid_argument, "keys has " + std::to_string(keys.size()) +
                                                 " entries; at most " +
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
    if (!(r = st.index.find({tenant, key})))
      outcome.result = not_found({tenant, key});
    else if (auto s2 = removable(st, *r, force, now); !s2.ok())
      outcome.result = s2;
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
}

caf::result<removal_summary> remove_all(store_pointer self, std::string& tenant,
                                        std::string& prefix, bool all, std::string& principal) {
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
}

caf::result<batch_removal> remove_members(store_pointer self, std::string& tenant,
                                          std::vector<std::string>& keys,
                                          v1::RemovalReason reason) {
  auto& st = self->state;
  auto out = std::make_shared<batch_removal>();
  std::vector<size_t> pending;
  std::vector<object_record> records;
  for (const auto& key : keys) {
    remove_outcome outcome{key, {}};
    const auto* r = st.index.find({tenant, key});
    if (r && st.busy.count(r->ref))
      outcome.result = {errc::busy,
                        "another operation on " + describe(r->ref) + " is in progress; retry"};
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
}

}  // namespace weightd::actors::store
