#include "kill9/recovery_checks.hpp"

#include <chrono>
#include <stdexcept>
#include <thread>

#include "events/digest.hpp"

namespace weightd::kill9 {

namespace {

using namespace std::chrono_literals;

/// A listing the checks cannot do without: they stop with this as the violation.
struct listing_failed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

bool same_policy(const ev1::Policy& a, const ev1::Policy& b) {
  return a.preferred_residency() == b.preferred_residency() &&
         a.migration_mode() == b.migration_mode() && a.mixed_hot_ratio() == b.mixed_hot_ratio();
}

std::string policy_text(const ev1::Policy& p) {
  return std::string{ev1::Residency_Name(p.preferred_residency())} + "/" +
         ev1::MigrationMode_Name(p.migration_mode());
}

bool is_deleting(ev1::Availability a) { return a == ev1::DELETING || a == ev1::DELETED; }

/// Where a tier keeps the replica file of (tenant, key): see persistence/tier_store.hpp.
fs::path replica_file(const fs::path& tier_dir, const std::string& tenant, const std::string& key) {
  auto h = events::sha256_hex(events::length_prefixed(tenant) + events::length_prefixed(key));
  return tier_dir / "objects" / h.substr(0, 2) / h;
}

/// Every regular file under the tier's objects/ and tmp/.
void list_tier_files(const fs::path& tier_dir, std::set<fs::path>& out) {
  for (const char* sub : {"objects", "tmp"}) {
    std::error_code ec;
    fs::recursive_directory_iterator it(tier_dir / sub, ec), end;
    for (; !ec && it != end; it.increment(ec))
      if (it->is_regular_file(ec)) out.insert(it->path());
  }
}

class recovery_checker {
 public:
  recovery_checker(api::client& c, std::vector<client_model>& clients,
                   std::set<std::string>& tombstones, const check_inputs& in)
      : c_(c), clients_(clients), tombstones_(tombstones), in_(in), rng_(in.seed) {
    report_.highest_lease_id = in.highest_lease_id;
  }

  check_report run() {
    try {
      // Leases first: one live at the crash is only promised for the
      // recovery grace (10 s from when weightd serves).
      check_leases();
      probe_new_lease_id();
      check_revisions(list_revisions());
      check_objects(list_objects());
      read_back();
      // "restart + a reconcile round": whatever the restart left for the
      // reconciler to clean up is gone after one.
      if (auto round = c_.reconcile({}); !round.ok())
        violation("a Reconcile round after the restart failed: " + round.error().to_string());
      check_tier_files();
      if (auto st = c_.server_status(); st.ok()) report_.status = *st;
    } catch (const listing_failed& e) {
      violation(e.what());
    }
    return std::move(report_);
  }

 private:
  void violation(const std::string& what) { report_.violations.push_back(what); }
  void landed(const char* kind, bool yes) { ++(yes ? report_.landed : report_.not_landed)[kind]; }

  // ---------------------------------------------------------------- leases

  /// Every lease of every revision a client may hold one on, against ListLeases.
  void check_leases() {
    for (auto& cm : clients_) {
      std::map<std::string, std::vector<lease_model*>> by_revision;
      for (auto& l : cm.leases) by_revision[l.revision].push_back(&l);
      for (auto& r : cm.revisions)
        if (r.stage == revision_stage::ready || r.stage == revision_stage::remove_in_flight)
          by_revision[r.text];  // also list those without one: a released lease must not be back
      std::set<const lease_model*> gone;
      for (auto& [text, leases] : by_revision) {
        auto* r = cm.find_revision(text);
        auto listed = r ? list_leases(*r) : std::map<uint64_t, v1::Lease>{};
        for (auto* l : leases)
          if (!settle_lease(*l, listed)) gone.insert(l);
        for (const auto& [id, lease] : listed)
          violation("lease " + std::to_string(id) + " held by '" + lease.holder() + "' on " + text +
                    " is listed, but the harness never got it acknowledged or in flight, or "
                    "released it with an acknowledgement");
      }
      cm.leases.remove_if([&](const lease_model& l) { return gone.count(&l) != 0; });
    }
  }

  std::map<uint64_t, v1::Lease> list_leases(const revision_model& r) {
    v1::ListLeasesRequest req;
    *req.mutable_id() = r.id.to_proto();
    auto listed = c_.list_leases(req);
    std::map<uint64_t, v1::Lease> out;
    if (!listed.ok()) {
      if (listed.error().code() != errc::not_found)  // a removal that landed
        throw listing_failed("ListLeases of " + r.text + " failed: " + listed.error().to_string());
      return out;
    }
    for (const auto& l : listed->leases()) {
      out[l.lease_id()] = l;
      report_.highest_lease_id = std::max(report_.highest_lease_id, l.lease_id());
    }
    return out;
  }

  /// Matches one model lease with the listing (and takes it out of it);
  /// false when the lease is gone and leaves the model.
  bool settle_lease(lease_model& l, std::map<uint64_t, v1::Lease>& listed) {
    switch (l.stage) {
      case lease_stage::acquire_in_flight: {
        auto found = std::find_if(listed.begin(), listed.end(),
                                  [&](const auto& e) { return e.second.holder() == l.holder; });
        landed("acquire_lease", found != listed.end());
        if (found == listed.end()) return false;
        l.id = found->first;
        l.expiry_ms = found->second.expiry_ms();
        l.stage = lease_stage::live;
        listed.erase(found);
        return renew(l);
      }
      case lease_stage::release_in_flight: {
        auto found = listed.find(l.id);
        landed("release_lease", found == listed.end());
        if (found == listed.end()) return false;
        l.stage = lease_stage::live;
        listed.erase(found);
        return renew(l);
      }
      case lease_stage::live: {
        auto found = listed.find(l.id);
        if (found == listed.end()) {
          if (l.expiry_ms > in_.kill_ms + 50)
            violation("lease " + std::to_string(l.id) + " held by '" + l.holder + "' on " +
                      l.revision + ", acknowledged until " + std::to_string(l.expiry_ms) + " (" +
                      std::to_string(l.expiry_ms - in_.kill_ms) +
                      " ms after the kill), is not listed after the restart");
          return false;  // else it had expired before the kill: gone is right
        }
        listed.erase(found);
        return renew(l);
      }
    }
    return false;
  }

  /// A listed lease must be renewable: the restart extended it by the grace.
  bool renew(lease_model& l) {
    v1::RenewLeaseRequest req;
    req.set_lease_id(l.id);
    req.set_ttl_ms(30'000);
    auto lease = c_.renew_lease(req);
    ++report_.leases;
    if (!lease.ok()) {
      violation("lease " + std::to_string(l.id) + " on " + l.revision +
                " is listed after the restart but cannot be renewed: " + lease.error().to_string());
      return false;
    }
    l.expiry_ms = std::max(l.expiry_ms, lease->expiry_ms());
    return true;
  }

  /// A lease granted now must have an id above every one seen before.
  void probe_new_lease_id() {
    for (auto& cm : clients_)
      for (auto& r : cm.revisions) {
        if (r.stage != revision_stage::ready || !r.settled()) continue;
        v1::AcquireLeaseRequest req;
        *req.mutable_id() = r.id.to_proto();
        req.set_holder(in_.probe_holder);
        req.set_ttl_ms(30'000);
        auto lease = c_.acquire_lease(req);
        if (!lease.ok()) continue;  // e.g. NOT_READY during a migration: try another
        if (lease->lease_id() <= report_.highest_lease_id)
          violation("the first lease granted after the restart has id " +
                    std::to_string(lease->lease_id()) + ", not above " +
                    std::to_string(report_.highest_lease_id) + " seen before (ids reused)");
        report_.highest_lease_id = std::max(report_.highest_lease_id, lease->lease_id());
        // The owning client holds it from now on, like one of its own.
        cm.leases.push_back({lease->lease_id(), in_.probe_holder, r.text, lease_stage::live,
                             lease->expiry_ms()});
        return;
      }
  }

  // ------------------------------------------------------------- revisions

  std::map<std::string, v1::RevisionView> list_revisions() {
    std::map<std::string, v1::RevisionView> out;
    v1::ListRevisionsRequest q;
    q.set_tenant(kTenant);
    q.set_ns(kNamespace);
    for (auto s : {ev1::IMPORTING, ev1::READY, ev1::DEGRADED, ev1::DELETING, ev1::DELETED})
      q.add_states(s);
    q.set_limit(1000);
    for (;;) {
      auto page = c_.list_revisions(q);
      if (!page.ok()) throw listing_failed("ListRevisions failed: " + page.error().to_string());
      for (const auto& v : page->revisions())
        out[events::canonical_text(events::revision_key::from_proto(v.id()))] = v;
      if (page->next_page_token().empty()) return out;
      q.set_page_token(page->next_page_token());
    }
  }

  void check_revisions(const std::map<std::string, v1::RevisionView>& listed) {
    std::set<std::string> known;
    for (auto& cm : clients_) {
      std::set<const revision_model*> gone;
      for (auto& r : cm.revisions) {
        known.insert(r.text);
        auto it = listed.find(r.text);
        if (!settle_revision(r, it == listed.end() ? nullptr : &it->second)) gone.insert(&r);
      }
      cm.revisions.remove_if([&](const revision_model& r) { return gone.count(&r) != 0; });
    }
    for (const auto& text : tombstones_) {
      auto it = listed.find(text);
      if (it == listed.end() || it->second.availability() != ev1::DELETED)
        violation("revision " + text + " was seen DELETED (a tombstone) and is now " +
                  (it == listed.end() ? std::string{"not listed at all"}
                                      : ev1::Availability_Name(it->second.availability())));
    }
    for (const auto& [text, view] : listed) {
      report_.deleting += view.availability() == ev1::DELETING;
      if (!known.count(text) && !tombstones_.count(text))
        violation("revision " + text + " is listed (" + ev1::Availability_Name(view.availability()) +
                  ") but the harness never got a BeginImport of it acknowledged or in flight");
    }
    report_.revisions += listed.size();
  }

  /// Reports a revision in a state its history does not allow; it stays in
  /// the model as it was (true: keep it).
  bool unexpected(const revision_model& r, const v1::RevisionView* v) {
    violation("revision " + r.text + " is " +
              (v ? std::string{ev1::Availability_Name(v->availability())} +
                       " (metadata_generation " + std::to_string(v->metadata_generation()) + ")"
                 : std::string{"not listed"}) +
              " after the restart; the harness had " + stage_name(r.stage));
    return true;
  }

  /// Checks one revision against the listing and records the outcome of a
  /// call in flight; false when it leaves the model (gone or a tombstone).
  bool settle_revision(revision_model& r, const v1::RevisionView* v) {
    auto state = v ? v->availability() : ev1::AVAILABILITY_UNSPECIFIED;
    switch (r.stage) {
      case revision_stage::begin_in_flight:
        landed("begin_import", v != nullptr);
        if (!v) return false;
        if (state != ev1::IMPORTING) return unexpected(r, v);
        r.stage = revision_stage::importing;
        r.policy = v->policy();
        r.interrupted = true;
        break;
      case revision_stage::importing:
        if (state != ev1::IMPORTING) return unexpected(r, v);
        r.interrupted = true;
        break;
      case revision_stage::commit_in_flight:
        landed("commit_import", state == ev1::READY);
        if (state == ev1::READY) r.stage = revision_stage::ready;
        else if (state == ev1::IMPORTING) r.stage = revision_stage::importing, r.interrupted = true;
        else return unexpected(r, v);
        break;
      case revision_stage::ready:
        if (state != ev1::READY) return unexpected(r, v);
        break;
      case revision_stage::remove_in_flight:
        landed("remove_revision", is_deleting(state));
        if (is_deleting(state)) r.stage = revision_stage::deleting;
        else if (state == ev1::READY) r.stage = revision_stage::ready;
        else return unexpected(r, v);
        break;
      case revision_stage::abort_in_flight:
        landed("abort_import", is_deleting(state));
        if (is_deleting(state)) r.stage = revision_stage::deleting;
        else if (state == ev1::IMPORTING) r.stage = revision_stage::importing, r.interrupted = true;
        else return unexpected(r, v);
        break;
      case revision_stage::deleting:
        if (!is_deleting(state)) return unexpected(r, v);
        break;
    }
    if (v->metadata_generation() < r.generation)
      violation(r.text + " has metadata_generation " + std::to_string(v->metadata_generation()) +
                " after the restart; " + std::to_string(r.generation) + " was acknowledged");
    r.generation = std::max(r.generation, v->metadata_generation());
    if (r.stage == revision_stage::ready) check_ready(r, *v);
    if (state == ev1::DELETED) {  // a tombstone from now on: its members must be gone
      tombstones_.insert(r.text);
      return false;
    }
    return true;
  }

  void check_ready(revision_model& r, const v1::RevisionView& v) {
    if (v.manifest().manifest_key() != r.manifest.key ||
        v.manifest().manifest_sha256() != r.manifest.bytes.sha256)
      violation(r.text + " has manifest " + v.manifest().manifest_key() + " sha256 " +
                v.manifest().manifest_sha256() + "; the commit acknowledged " + r.manifest.key +
                " sha256 " + r.manifest.bytes.sha256);
    if (r.policy_in_flight) {
      bool changed = same_policy(v.policy(), *r.policy_in_flight);
      landed("update_policy", changed);
      if (changed) r.policy = v.policy();
      r.policy_in_flight.reset();
    }
    if (r.requested_policy || r.policy.preferred_residency() != ev1::RESIDENCY_UNKNOWN)
      if (!same_policy(v.policy(), r.policy))
        violation(r.text + " has policy " + policy_text(v.policy()) + " after the restart; " +
                  policy_text(r.policy) + " was acknowledged");
  }

  // --------------------------------------------------------------- objects

  std::map<std::string, v1::ObjectInfo> list_objects() {
    std::map<std::string, v1::ObjectInfo> out;
    v1::ListObjectsRequest q;
    q.set_tenant(kTenant);
    q.set_limit(1000);
    for (;;) {
      auto page = c_.list_objects(q);
      if (!page.ok()) throw listing_failed("List of the objects failed: " + page.error().to_string());
      for (const auto& o : page->objects()) out[o.key()] = o;
      if (page->next_start_after().empty()) return out;
      q.set_start_after(page->next_start_after());
    }
  }

  /// The object is there whole: its size and sha256 are the acknowledged
  /// ones, and some replica is readable.
  bool same_object(const v1::ObjectInfo& info, const blob& b, const std::string& what) {
    if (info.size() == b.size && info.sha256() == b.sha256 && info.readable()) return true;
    violation(what + " " + info.key() + " has size " + std::to_string(info.size()) + " sha256 '" +
              info.sha256() + "' readable " + (info.readable() ? "yes" : "no") +
              " after the restart; acknowledged: size " + std::to_string(b.size) + " sha256 " +
              b.sha256);
    return false;
  }

  void check_objects(const std::map<std::string, v1::ObjectInfo>& listed) {
    std::set<std::string> accounted;
    for (auto& cm : clients_) {
      cm.objects.remove_if([&](plain_object& o) {
        auto it = listed.find(o.key);
        const v1::ObjectInfo* info = it == listed.end() ? nullptr : &it->second;
        if (info) accounted.insert(o.key);
        return !settle_object(o, info);
      });
      for (auto& r : cm.revisions) {
        for (auto& p : r.payloads) settle_member(r, p, "put_payload", listed, accounted);
        settle_member(r, r.manifest, "put_manifest", listed, accounted);
      }
    }
    for (const auto& [key, info] : listed) {
      bool ours = key.rfind(kPlainPrefix, 0) == 0 ||
                  key.rfind(std::string{"weights/"} + kNamespace + "/", 0) == 0;
      if (ours && !accounted.count(key))
        violation("object " + key + " exists after the restart, but no Put of it was "
                  "acknowledged or in flight, or its removal (or its revision's) was acknowledged");
    }
    report_.objects += listed.size();
  }

  /// False when the object leaves the model (it is gone, rightly).
  bool settle_object(plain_object& o, const v1::ObjectInfo* info) {
    switch (o.stage) {
      case object_stage::present:
        if (!info) {
          violation("object " + o.key + " (" + std::to_string(o.bytes.size) + " bytes, " +
                    ev1::Tier_Name(o.tier) + ") was acknowledged by Put and is gone after the restart");
          return false;
        }
        same_object(*info, o.bytes, "object");
        return true;
      case object_stage::put_in_flight:
        landed("put_object", info != nullptr);
        if (!info) return false;
        if (same_object(*info, o.bytes, "object (put in flight at the kill)")) {
          o.stage = object_stage::present;
          landed_objects_.push_back({o.key, &o.bytes});
        }
        return true;
      case object_stage::remove_in_flight:
        landed("remove_object", info == nullptr);
        if (!info) return false;
        if (same_object(*info, o.bytes, "object (remove in flight at the kill)"))
          o.stage = object_stage::present;
        return true;
      case object_stage::removed:
        if (info)
          violation("object " + o.key + " was removed (acknowledged) and exists again after the restart");
        return false;
    }
    return false;
  }

  void settle_member(revision_model& r, member& m, const char* kind,
                     const std::map<std::string, v1::ObjectInfo>& listed,
                     std::set<std::string>& accounted) {
    auto it = listed.find(m.key);
    const v1::ObjectInfo* info = it == listed.end() ? nullptr : &it->second;
    if (info) accounted.insert(m.key);
    if (r.stage == revision_stage::deleting) return;  // DELETING: any part of the group is left
    std::string what = "member of " + r.text;
    switch (m.state) {
      case put_state::acknowledged:
        if (!info) violation(what + " " + m.key + " was acknowledged by Put and is gone after the restart");
        else same_object(*info, m.bytes, what);
        break;
      case put_state::in_flight:
        landed(kind, info != nullptr);
        if (info && same_object(*info, m.bytes, what + " (put in flight at the kill)")) {
          m.state = put_state::acknowledged;
          landed_objects_.push_back({m.key, &m.bytes});
        } else {
          m.state = put_state::not_sent;
        }
        break;
      case put_state::not_sent:
        if (info) violation(what + " " + m.key + " exists though its Put was never sent or was refused");
        break;
    }
  }

  /// Reads back in full every object whose put was in flight at the kill
  /// and landed, and a sample of the acknowledged ones.
  void read_back() {
    std::vector<std::pair<std::string, const blob*>> sample = landed_objects_;
    std::vector<std::pair<std::string, const blob*>> acknowledged;
    for (const auto& cm : clients_) {
      for (const auto& o : cm.objects)
        if (o.stage == object_stage::present) acknowledged.push_back({o.key, &o.bytes});
      for (const auto& r : cm.revisions)
        if (r.stage == revision_stage::ready || r.stage == revision_stage::importing) {
          for (const auto& p : r.payloads)
            if (p.state == put_state::acknowledged) acknowledged.push_back({p.key, &p.bytes});
          if (r.manifest.state == put_state::acknowledged)
            acknowledged.push_back({r.manifest.key, &r.manifest.bytes});
        }
    }
    std::shuffle(acknowledged.begin(), acknowledged.end(), rng_);
    for (size_t i = 0; i < acknowledged.size() && i < in_.read_back; ++i)
      sample.push_back(acknowledged[i]);
    for (const auto& [key, b] : sample) {
      std::string got;
      auto info = c_.get(kTenant, key, [&](const std::string& chunk) {
        got += chunk;
        return status{};
      });
      ++report_.read_back;
      if (!info.ok())
        violation("Get of acknowledged " + key + " after the restart failed: " + info.error().to_string());
      else if (got != bytes_of(*b))
        violation("Get of " + key + " after the restart returned " + std::to_string(got.size()) +
                  " bytes that differ from the " + std::to_string(b->size) + " acknowledged");
    }
  }

  // ------------------------------------------------------------ tier files

  /// The files every replica weightd lists should have, by path.
  std::map<fs::path, std::string> expected_files() {
    std::map<fs::path, std::string> out;
    for (const auto& [key, info] : list_objects())
      for (int tier : info.replicas()) {
        bool hot = tier == ev1::TIER_HOT;
        out[replica_file(hot ? in_.dirs.hot : in_.dirs.cold(), info.tenant(), key)] =
            std::string{hot ? "HOT" : "COLD"} + " replica of " + key;
      }
    return out;
  }

  /// No orphan file (nor replica without its file) in either tier. A
  /// migration or deletion the reconciler runs right now may be between
  /// its file and its event, so only what stays wrong for 5 s counts.
  void check_tier_files() {
    std::set<fs::path> orphans, missing;
    for (int round = 0; round < 10; ++round) {
      if (round) std::this_thread::sleep_for(500ms);
      auto expected = expected_files();
      std::set<fs::path> files;
      list_tier_files(in_.dirs.hot, files);
      list_tier_files(in_.dirs.cold(), files);
      report_.tier_files = files.size();
      std::set<fs::path> orphans_now, missing_now;
      for (const auto& f : files)
        if (!expected.count(f) && (round == 0 || orphans.count(f))) orphans_now.insert(f);
      for (const auto& [f, what] : expected)
        if (!files.count(f) && (round == 0 || missing.count(f))) missing_now.insert(f);
      orphans.swap(orphans_now);
      missing.swap(missing_now);
      if (orphans.empty() && missing.empty()) return;
    }
    for (const auto& f : orphans) {
      std::error_code ec;
      auto bytes = fs::file_size(f, ec);
      violation("orphan file " + f.string() + " (" + std::to_string(ec ? 0 : bytes) +
                " bytes): no replica weightd lists owns it, 5 s after a restart and a reconcile round");
    }
    for (const auto& f : missing)
      violation("file " + f.string() + " of a replica weightd lists is missing");
  }

  api::client& c_;
  std::vector<client_model>& clients_;
  std::set<std::string>& tombstones_;
  const check_inputs& in_;
  std::mt19937_64 rng_;
  check_report report_;
  std::vector<std::pair<std::string, const blob*>> landed_objects_;
};

}  // namespace

check_report check_after_restart(api::client& client, std::vector<client_model>& clients,
                                 std::set<std::string>& tombstones, const check_inputs& in) {
  return recovery_checker{client, clients, tombstones, in}.run();
}

}  // namespace weightd::kill9
