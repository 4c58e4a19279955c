#include "kill9/load.hpp"

#include <chrono>
#include <random>
#include <thread>

#include "api/client/client.hpp"

namespace weightd::kill9 {

namespace {

using std::chrono::milliseconds;

int64_t wall_ms() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Plain object sizes with a long tail: mostly small, a few over one chunk.
uint64_t plain_size(std::mt19937_64& rng) {
  auto roll = rng() % 100;
  if (roll < 70) return 1 + rng() % (64u << 10);
  if (roll < 95) return (64u << 10) + rng() % (960u << 10);
  return (4u << 20) + rng() % (2u << 20);
}

template <class T, class Pred>
T* pick(std::list<T>& items, std::mt19937_64& rng, Pred pred) {
  std::vector<T*> fitting;
  for (auto& item : items)
    if (pred(item)) fitting.push_back(&item);
  return fitting.empty() ? nullptr : fitting[rng() % fitting.size()];
}

template <class T>
void erase_entry(std::list<T>& items, const T* entry) {
  items.remove_if([&](const T& item) { return &item == entry; });
}

class load_client {
 public:
  load_client(client_model& model, load_context& ctx, const load_limits& limits, uint64_t cycle)
      : m_(model), ctx_(ctx), limits_(limits), c_(options(ctx.address)),
        rng_(ctx.seed * 1'000'003 + cycle * 1009 + static_cast<uint64_t>(model.index)) {}

  void run() {
    while (!ctx_.stop.load()) step();
  }

 private:
  static api::client_options options(const std::string& address) {
    api::client_options o;
    o.address = address;
    o.deadline = milliseconds(20'000);
    o.attempts = 1;  // a retry could land on the next incarnation: the harness decides
    return o;
  }

  // ------------------------------------------------------------ bookkeeping

  /// Tallies a call under `kind` and says how its reply counts.
  reply record(const char* kind, const status& st) {
    auto r = classify(st);
    switch (r) {
      case reply::acknowledged: ++m_.tally.acknowledged[kind]; break;
      case reply::rejected: ++m_.tally.rejected[kind]; break;
      case reply::unknown:
        ++(ctx_.stop.load() ? m_.tally.in_flight_at_kill : m_.tally.unknown_while_alive)[kind];
        break;
    }
    return r;
  }

  void violation(const std::string& what) {
    m_.violations.push_back("client " + std::to_string(m_.index) + ": " + what);
  }

  bool chance(double p) { return std::uniform_real_distribution<double>{0, 1}(rng_) < p; }

  size_t live_revisions() const {
    size_t n = 0;
    for (const auto& r : m_.revisions) n += r.live();
    return n;
  }
  size_t objects_held() const {
    size_t n = 0;
    for (const auto& o : m_.objects) n += o.stage != object_stage::removed;
    return n;
  }

  // ---------------------------------------------------------------- choice

  enum action {
    begin, put_object, remove_object, get_object, acquire, renew, release, remove_revision,
    update_policy, migrate, kActions
  };

  void step() {
    // An import under way goes on first (it holds reserved capacity); one the
    // crash interrupted is resumed or given up with equal odds.
    if (auto* r = pick(m_.revisions, rng_, [](const revision_model& r) {
          return r.stage == revision_stage::importing && r.settled();
        })) {
      if (chance(r->interrupted ? 0.5 : 0.05)) abort_import(*r);
      else continue_import(*r);
      return;
    }
    auto ready = [](const revision_model& r) { return r.stage == revision_stage::ready && r.settled(); };
    auto present = [](const plain_object& o) { return o.stage == object_stage::present; };
    auto live_lease = [](const lease_model& l) { return l.stage == lease_stage::live; };
    bool any_ready = pick(m_.revisions, rng_, ready) != nullptr;
    bool any_present = pick(m_.objects, rng_, present) != nullptr;
    bool any_lease = pick(m_.leases, rng_, live_lease) != nullptr;
    std::vector<double> weights(kActions, 0.0);
    weights[begin] = live_revisions() < limits_.live_revisions ? 3 : 0;
    weights[put_object] = objects_held() < limits_.objects ? 3 : 0;
    weights[remove_object] = any_present ? 2 : 0;
    weights[get_object] = any_present ? 1 : 0;
    weights[acquire] = any_ready && m_.leases.size() < limits_.leases ? 2 : 0;
    weights[renew] = any_lease ? 2 : 0;
    weights[release] = any_lease ? 1.5 : 0;
    weights[remove_revision] = any_ready ? 1.5 : 0;
    weights[update_policy] = any_ready ? 1 : 0;
    weights[migrate] = any_ready ? 1 : 0;
    double sum = 0;
    for (double w : weights) sum += w;
    if (sum == 0) {  // everything in flight (unknown replies): nothing left to do this cycle
      std::this_thread::sleep_for(milliseconds(20));
      return;
    }
    switch (std::discrete_distribution<int>(weights.begin(), weights.end())(rng_)) {
      case begin: return begin_import();
      case put_object: return put_plain();
      case remove_object: return remove_plain(*pick(m_.objects, rng_, present));
      case get_object: return get_plain(*pick(m_.objects, rng_, present));
      case acquire: return acquire_lease(*pick(m_.revisions, rng_, ready));
      case renew: return renew_lease(*pick(m_.leases, rng_, live_lease));
      case release: return release_lease(*pick(m_.leases, rng_, live_lease));
      case remove_revision: return remove_ready(*pick(m_.revisions, rng_, ready));
      case update_policy: return change_policy(*pick(m_.revisions, rng_, ready));
      case migrate: return start_migration(*pick(m_.revisions, rng_, ready));
    }
  }

  // --------------------------------------------------------------- imports

  ev1::Residency random_residency(const revision_model& r) {
    auto roll = rng_() % (r.payloads.size() >= 2 ? 3 : 2);  // MIXED needs two units
    return roll == 0 ? ev1::RESIDENCY_HOT : roll == 1 ? ev1::RESIDENCY_COLD : ev1::RESIDENCY_MIXED;
  }

  void begin_import() {
    m_.revisions.push_back(plan_revision(m_, rng_()));
    auto& r = m_.revisions.back();
    v1::BeginImportRequest req;
    *req.mutable_id() = r.id.to_proto();
    req.set_expected_payload_count(r.payloads.size());
    req.set_expected_logical_bytes(r.logical_bytes());
    req.set_affinity_count(r.payloads.size());
    if (chance(0.6)) {  // else the daemon's default policy (HOT, AUTO)
      r.requested_policy = true;
      auto* p = req.mutable_policy();
      p->set_preferred_residency(random_residency(r));
      p->set_mixed_hot_ratio(0.5);
      p->set_migration_mode(chance(0.7) ? ev1::MIGRATION_AUTO : ev1::MIGRATION_MANUAL);
    }
    auto view = c_.begin_import(req);
    switch (record("begin_import", view.error())) {
      case reply::acknowledged:
        r.stage = revision_stage::importing;
        r.generation = view->metadata_generation();
        r.policy = view->policy();
        if (view->availability() != ev1::IMPORTING)
          violation("BeginImport of " + r.text + " acknowledged in state " +
                    ev1::Availability_Name(view->availability()));
        break;
      case reply::rejected: erase_entry(m_.revisions, &r); break;
      case reply::unknown: break;  // begin_in_flight
    }
  }

  /// One step of an import: the next payload, else the manifest, else the commit.
  void continue_import(revision_model& r) {
    for (auto& p : r.payloads)
      if (p.state == put_state::not_sent) return put_member(r, p, "put_payload");
    if (r.manifest.state == put_state::not_sent) return put_member(r, r.manifest, "put_manifest");
    commit_import(r);
  }

  void put_member(revision_model& r, member& m, const char* kind) {
    v1::PutHeader h;
    h.set_tenant(kTenant);
    h.set_key(m.key);
    h.set_group_id(events::payload_group_id(r.id));
    h.set_data_type(m.affinity.empty() ? ev1::DATA_TYPE_METADATA : ev1::DATA_TYPE_WEIGHT);
    h.set_affinity_id(m.affinity);
    h.set_checksum(m.bytes.sha256);  // verified by weightd, and makes it keep the sha256
    h.set_checksum_algorithm(ev1::CHECKSUM_SHA256);
    // No tier: weightd places a member where its revision prefers (spilling
    // to COLD when HOT is full, SPEC §2 Spill).
    m.state = put_state::in_flight;
    auto put = c_.put_bytes(h, bytes_of(m.bytes));
    switch (record(kind, put.error())) {
      case reply::acknowledged:
        m.state = put_state::acknowledged;
        check_put_reply(*put, m.key, m.bytes);
        break;
      case reply::rejected:  // e.g. NO_AVAILABLE_SPACE: this import cannot finish
        m.state = put_state::not_sent;
        if (!ctx_.stop.load()) abort_import(r);
        break;
      case reply::unknown: break;
    }
  }

  void check_put_reply(const v1::ObjectInfo& info, const std::string& key, const blob& b) {
    if (info.size() != b.size || info.sha256() != b.sha256)
      violation("Put of " + key + " acknowledged with size " + std::to_string(info.size()) +
                " sha256 " + info.sha256() + ", sent " + std::to_string(b.size) + " bytes sha256 " +
                b.sha256);
  }

  void commit_import(revision_model& r) {
    v1::CommitImportRequest req;
    *req.mutable_id() = r.id.to_proto();
    req.set_expected_metadata_generation(r.generation);
    std::vector<std::string> keys;
    for (const auto& p : r.payloads) keys.push_back(p.key);
    auto* ref = req.mutable_manifest();
    ref->set_manifest_key(r.manifest.key);
    ref->set_manifest_sha256(r.manifest.bytes.sha256);
    ref->set_payload_keys_sha256(events::payload_keys_sha256(keys));
    ref->set_payload_count(keys.size());
    ref->set_logical_bytes(r.logical_bytes());
    for (const auto& k : keys) req.add_payload_keys(k);
    r.stage = revision_stage::commit_in_flight;
    auto view = c_.commit_import(req);
    switch (record("commit_import", view.error())) {
      case reply::acknowledged:
        r.stage = revision_stage::ready;
        r.generation = view->metadata_generation();
        if (view->availability() != ev1::READY)
          violation("CommitImport of " + r.text + " acknowledged in state " +
                    ev1::Availability_Name(view->availability()));
        break;
      case reply::rejected:
        // Every member was acknowledged and the group is exactly what
        // BeginImport announced: weightd has no reason to refuse it.
        violation("CommitImport of the complete group of " + r.text + " refused: " +
                  view.error().to_string());
        r.stage = revision_stage::importing;
        if (!ctx_.stop.load()) abort_import(r);
        break;
      case reply::unknown: break;
    }
  }

  void abort_import(revision_model& r) {
    v1::AbortImportRequest req;
    *req.mutable_id() = r.id.to_proto();
    req.set_expected_metadata_generation(r.generation);
    r.stage = revision_stage::abort_in_flight;
    auto aborted = c_.abort_import(req);
    switch (record("abort_import", aborted.error())) {
      case reply::acknowledged: r.stage = revision_stage::deleting; break;
      case reply::rejected: r.stage = revision_stage::importing; break;
      case reply::unknown: break;
    }
  }

  // ----------------------------------------------------- ready revisions

  /// The revision's current metadata_generation (the reconciler's
  /// migrations move it too), or nullopt when weightd does not answer.
  std::optional<uint64_t> current_generation(revision_model& r) {
    v1::GetRevisionRequest req;
    *req.mutable_id() = r.id.to_proto();
    auto view = c_.get_revision(req);
    if (record("get_revision", view.error()) != reply::acknowledged) {
      if (view.error().code() == errc::not_found)
        violation("acknowledged revision " + r.text + " is NOT_FOUND while weightd runs");
      return std::nullopt;
    }
    if (view->metadata_generation() < r.generation)
      violation(r.text + " shows metadata_generation " + std::to_string(view->metadata_generation()) +
                " after " + std::to_string(r.generation) + " was acknowledged");
    r.generation = std::max(r.generation, view->metadata_generation());
    return view->metadata_generation();
  }

  void remove_ready(revision_model& r) {
    auto generation = current_generation(r);
    if (!generation || ctx_.stop.load()) return;
    v1::RemoveRevisionRequest req;
    *req.mutable_id() = r.id.to_proto();
    req.set_expected_metadata_generation(*generation);
    r.stage = revision_stage::remove_in_flight;
    auto removed = c_.remove_revision(req);
    switch (record("remove_revision", removed.error())) {
      case reply::acknowledged:
        r.stage = revision_stage::deleting;
        forget_leases_of_removed(r);
        break;
      case reply::rejected: r.stage = revision_stage::ready; break;  // BUSY, STALE_GENERATION
      case reply::unknown: break;
    }
  }

  /// A remove succeeds only without a live lease: one the harness holds
  /// (acknowledged, not yet expired) means weightd let it through anyway.
  void forget_leases_of_removed(const revision_model& r) {
    auto now = wall_ms();
    for (const auto& l : m_.leases)
      if (l.revision == r.text && l.stage == lease_stage::live && l.expiry_ms > now + 50)
        violation("RemoveRevision of " + r.text + " acknowledged while lease " +
                  std::to_string(l.id) + " was live until " + std::to_string(l.expiry_ms));
    m_.leases.remove_if([&](const lease_model& l) { return l.revision == r.text; });
  }

  ev1::Policy random_policy(const revision_model& r) {
    ev1::Policy p;
    p.set_preferred_residency(random_residency(r));
    p.set_mixed_hot_ratio(0.5);
    auto roll = rng_() % 10;
    p.set_migration_mode(roll < 6   ? ev1::MIGRATION_AUTO
                         : roll < 9 ? ev1::MIGRATION_MANUAL
                                    : ev1::MIGRATION_PINNED);
    return p;
  }

  void change_policy(revision_model& r) {
    auto generation = current_generation(r);
    if (!generation || ctx_.stop.load()) return;
    v1::UpdatePolicyRequest req;
    *req.mutable_id() = r.id.to_proto();
    req.set_expected_metadata_generation(*generation);
    *req.mutable_policy() = random_policy(r);
    r.policy_in_flight = req.policy();
    auto view = c_.update_policy(req);
    switch (record("update_policy", view.error())) {
      case reply::acknowledged:
        r.policy = view->policy();
        r.generation = std::max(r.generation, view->metadata_generation());
        r.policy_in_flight.reset();
        break;
      case reply::rejected: r.policy_in_flight.reset(); break;  // BUSY during an operation
      case reply::unknown: break;
    }
  }

  void start_migration(revision_model& r) {
    auto generation = current_generation(r);
    if (!generation || ctx_.stop.load()) return;
    v1::MigrateRequest req;
    *req.mutable_id() = r.id.to_proto();
    req.set_expected_metadata_generation(*generation);
    req.set_target(random_residency(r));
    // Nothing the checks look at depends on it beyond the generation, which
    // only grows: no state to record.
    (void)record("migrate", c_.migrate(req).error());
  }

  // ---------------------------------------------------------------- leases

  uint64_t random_ttl_ms() {
    static const uint64_t ttls[] = {400, 3'000, 20'000, 60'000};
    return ttls[rng_() % 4];
  }

  void acquire_lease(revision_model& r) {
    m_.leases.push_back({});
    auto& l = m_.leases.back();
    l.holder = "c" + std::to_string(m_.index) + "-h" + std::to_string(m_.next_name++);
    l.revision = r.text;
    l.stage = lease_stage::acquire_in_flight;
    v1::AcquireLeaseRequest req;
    *req.mutable_id() = r.id.to_proto();
    req.set_holder(l.holder);
    req.set_ttl_ms(random_ttl_ms());
    auto lease = c_.acquire_lease(req);
    switch (record("acquire_lease", lease.error())) {
      case reply::acknowledged:
        l.id = lease->lease_id();
        l.expiry_ms = lease->expiry_ms();
        l.stage = lease_stage::live;
        check_new_lease_id(l.id);
        break;
      case reply::rejected: erase_entry(m_.leases, &l); break;  // NOT_READY while migrating...
      case reply::unknown: break;
    }
  }

  void check_new_lease_id(uint64_t id) {
    if (id <= ctx_.lease_id_floor)
      violation("lease id " + std::to_string(id) + " granted after lease id " +
                std::to_string(ctx_.lease_id_floor) + " was seen before the restart (ids reused)");
    auto seen = ctx_.highest_lease_id.load();
    while (id > seen && !ctx_.highest_lease_id.compare_exchange_weak(seen, id)) {
    }
  }

  void renew_lease(lease_model& l) {
    v1::RenewLeaseRequest req;
    req.set_lease_id(l.id);
    req.set_ttl_ms(random_ttl_ms());
    auto lease = c_.renew_lease(req);
    auto answered_ms = wall_ms();
    switch (record("renew_lease", lease.error())) {
      case reply::acknowledged:
        l.expiry_ms = std::max(l.expiry_ms, lease->expiry_ms());
        break;
      case reply::rejected: {
        auto code = lease.error().code();
        if (code != errc::lease_expired && code != errc::not_found) break;
        // weightd decided before it answered: an expiry after that was early.
        if (l.expiry_ms > answered_ms + 50)
          violation("lease " + std::to_string(l.id) + " on " + l.revision + " acknowledged until " +
                    std::to_string(l.expiry_ms) + " refused " +
                    std::to_string(l.expiry_ms - answered_ms) +
                    " ms early: " + lease.error().to_string());
        erase_entry(m_.leases, &l);
        break;
      }
      case reply::unknown: break;  // the expiry is at least the acknowledged one
    }
  }

  void release_lease(lease_model& l) {
    v1::ReleaseLeaseRequest req;
    req.set_lease_id(l.id);
    l.stage = lease_stage::release_in_flight;
    auto released = c_.release_lease(req);
    switch (record("release_lease", released.error())) {
      case reply::acknowledged: erase_entry(m_.leases, &l); break;
      case reply::rejected: l.stage = lease_stage::live; break;
      case reply::unknown: break;
    }
  }

  // --------------------------------------------------------- plain objects

  void put_plain() {
    m_.objects.push_back({});
    auto& o = m_.objects.back();
    o.key = std::string{kPlainPrefix} + "c" + std::to_string(m_.index) + "/" +
            std::to_string(m_.next_name++);
    o.bytes = generated_blob(plain_size(rng_), rng_());
    o.tier = chance(0.5) ? ev1::TIER_HOT : ev1::TIER_COLD;
    o.stage = object_stage::put_in_flight;
    v1::PutHeader h;
    h.set_tenant(kTenant);
    h.set_key(o.key);
    h.set_data_type(ev1::DATA_TYPE_GENERAL);
    h.set_tier(o.tier);
    h.set_hard_pin(o.tier == ev1::TIER_HOT);  // eviction would delete it: see plain_object
    h.set_checksum(o.bytes.sha256);
    h.set_checksum_algorithm(ev1::CHECKSUM_SHA256);
    auto put = c_.put_bytes(h, bytes_of(o.bytes));
    switch (record("put_object", put.error())) {
      case reply::acknowledged:
        o.stage = object_stage::present;
        check_put_reply(*put, o.key, o.bytes);
        break;
      case reply::rejected: erase_entry(m_.objects, &o); break;  // NO_AVAILABLE_SPACE
      case reply::unknown: break;
    }
  }

  void remove_plain(plain_object& o) {
    v1::RemoveRequest req;
    req.set_tenant(kTenant);
    req.set_key(o.key);
    req.set_force(chance(0.5));  // unforced meets the read lease of a recent Get
    o.stage = object_stage::remove_in_flight;
    auto removed = c_.remove_object(req);
    switch (record("remove_object", removed.error())) {
      case reply::acknowledged: o.stage = object_stage::removed; break;
      case reply::rejected: o.stage = object_stage::present; break;  // OBJECT_HAS_LEASE
      case reply::unknown: break;
    }
  }

  void get_plain(plain_object& o) {
    std::string got;
    auto info = c_.get(kTenant, o.key, [&](const std::string& chunk) {
      got += chunk;
      return status{};
    });
    switch (record("get_object", info.error())) {
      case reply::acknowledged:
        if (got != bytes_of(o.bytes))
          violation("Get of " + o.key + " returned " + std::to_string(got.size()) +
                    " bytes that differ from the " + std::to_string(o.bytes.size) + " put");
        break;
      case reply::rejected:
        violation("Get of acknowledged object " + o.key + " refused while weightd runs: " +
                  info.error().to_string());
        break;
      case reply::unknown: break;
    }
  }

  client_model& m_;
  load_context& ctx_;
  const load_limits& limits_;
  api::client c_;
  std::mt19937_64 rng_;
};

}  // namespace

void run_load_client(client_model& model, load_context& ctx, const load_limits& limits,
                     uint64_t cycle) {
  load_client{model, ctx, limits, cycle}.run();
}

}  // namespace weightd::kill9
