// SPEC §4 Reconciler (observation of real replicas, abandoned imports) and
// Scrub: one case per rule, on the deterministic scheduler with a fake clock.
// Replicas are real files in the fixture's tiers; tests damage them by hand.
#include <doctest/doctest.h>

#include <fstream>

#include "core/reconcile_plan.hpp"
#include "core/replica_observation.hpp"
#include "actors/scrubber.hpp"
#include "migration_fixture.hpp"

using namespace weightd;
using namespace weightd::test;
namespace v1 = events::v1;

namespace {

struct observation_fixture : migration_fixture {
  /// The path of a replica file.
  std::filesystem::path replica_path(v1::Tier tier, const std::string& key) {
    auto c = config();
    persistence::tier_store t{tier == v1::TIER_HOT ? c.hot : c.cold};
    return t.object_path({"default", key});
  }
  /// Flips bytes inside a replica file, keeping its size.
  void corrupt(v1::Tier tier, const std::string& key) {
    auto path = replica_path(tier, key);
    std::filesystem::permissions(path, std::filesystem::perms::owner_write,
                                 std::filesystem::perm_options::add);
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(3);
    f.write("XYZ", 3);
  }
  /// A READY HOT revision whose payloads also have COLD replicas (a
  /// promotion keeps them): something to repair from.
  std::pair<view, upload> hot_with_cold_copies(const events::revision_key& rid, int count,
                                               size_t size) {
    auto [v, u] = ready(rid, count, size);
    REQUIRE(migrate(rid, generation(rid), v1::RESIDENCY_COLD).ok());
    sched.run();
    REQUIRE(migrate(rid, generation(rid), v1::RESIDENCY_HOT).ok());
    sched.run();
    check_payloads(u, size, true, true);
    return {*get_rev(rid), u};
  }
  /// One scrub round by hand.
  void scrub_round(uint64_t rate_bytes = 1ull << 30) {
    auto c = config();
    actors::tiers files{std::make_shared<persistence::tier_store>(c.hot),
                        std::make_shared<persistence::tier_store>(c.cold)};
    actors::scrubber_config sc;
    sc.rate_bytes = rate_bytes;
    auto scrubber = actors::spawn_scrubber(sys, store, files, sc, false, false);
    caf::anon_send(scrubber, caf::tick_atom::value);
    sched.run();
    caf::anon_send_exit(scrubber, caf::exit_reason::user_shutdown);
    sched.run();
  }
  actors::store_stats stats() { return *ask<actors::store_stats>(store, actors::stats_atom::value); }
  /// The reconciler's rounds that the damage and the repair take.
  void reconcile_rounds(int n = 3) {
    for (int i = 0; i < n; ++i) pass_time(1'000);
  }
  /// The revision's newest operation (ids are small and monotonic here).
  std::optional<events::operation_record> newest_op(const events::revision_key& rid) {
    for (uint64_t id = 64; id > 0; --id)
      if (auto o = operation(id); o.ok() && o->revision == rid) return *o;
    return std::nullopt;
  }
};

}  // namespace

// ------------------------------------------------------------- observation

TEST_CASE_FIXTURE(observation_fixture, "observe: a payload whose only replica was lost at a restart makes the revision DEGRADED") {
  auto rid = id();
  auto [v, u] = ready(rid, 2, 1000);
  stop();
  std::filesystem::remove(replica_path(v1::TIER_HOT, u.keys[0]));
  start();
  reconcile_rounds();
  auto r = get_rev(rid)->record;
  CHECK(r.availability == v1::DEGRADED);
  CHECK(events_of_type("availability_observed").size() == 1);
  CHECK(r.residency == v1::RESIDENCY_HOT);  // over the readable payloads
  reconcile_rounds();
  CHECK(events_of_type("availability_observed").size() == 1);  // unchanged: no event
  CHECK(live_revisions() == folded_revisions());
}

TEST_CASE_FIXTURE(observation_fixture, "observe: when every payload lost its only replica the revision is DEGRADED and ABSENT") {
  auto rid = id();
  auto [v, u] = ready(rid, 2, 1000);
  stop();
  for (const auto& key : u.keys) std::filesystem::remove(replica_path(v1::TIER_HOT, key));
  start();
  reconcile_rounds();
  auto r = get_rev(rid)->record;
  CHECK(r.availability == v1::DEGRADED);
  CHECK(r.residency == v1::RESIDENCY_ABSENT);  // over the readable payloads: none
  CHECK(r.observed_hot_ratio == 0);
  reconcile_rounds();
  CHECK(events_of_type("residency_observed").size() == 1);  // unchanged: no more events
  CHECK(live_revisions() == folded_revisions());
}

TEST_CASE_FIXTURE(observation_fixture, "observe: REPAIRING re-promotes from COLD when a HOT replica vanished") {
  auto rid = id();
  auto [v, u] = hot_with_cold_copies(rid, 3, 1000);
  SUBCASE("at a restart") {
    stop();
    std::filesystem::remove(replica_path(v1::TIER_HOT, u.keys[1]));
    start();
  }
  SUBCASE("behind the running daemon's back: the scrub finds it") {
    std::filesystem::remove(replica_path(v1::TIER_HOT, u.keys[1]));
    scrub_round();
  }
  reconcile_rounds();
  auto r = get_rev(rid)->record;
  CHECK(r.availability == v1::READY);  // COLD kept it readable
  CHECK(r.residency == v1::RESIDENCY_HOT);
  CHECK(r.operation_id == 0);
  auto op = newest_op(rid);
  REQUIRE(op);
  CHECK(op->kind == v1::REPAIRING);
  CHECK(op->state == events::operation_state::completed);
  CHECK(op->automatic);
  CHECK(op->reason.find(u.keys[1]) != std::string::npos);
  check_payloads(u, 1000, true, true);
  CHECK(live_revisions() == folded_revisions());
}

TEST_CASE_FIXTURE(observation_fixture, "observe: a lost manifest HOT replica is repaired from COLD whatever the residency") {
  auto rid = id();
  auto [v, u] = ready(rid, 2, 1000);
  REQUIRE(migrate(rid, generation(rid), v1::RESIDENCY_COLD).ok());
  sched.run();
  // The manifest stays HOT in COLD residency; give it a COLD copy to repair from.
  REQUIRE(ask<actors::object_info>(store, caf::add_atom::value, std::string{"default"},
                                   u.manifest.manifest_key, v1::TIER_COLD)
              .ok());
  stop();
  std::filesystem::remove(replica_path(v1::TIER_HOT, u.manifest.manifest_key));
  start();
  reconcile_rounds();
  CHECK(object(u.manifest.manifest_key).hot);
  auto r = get_rev(rid)->record;
  CHECK(r.availability == v1::READY);
  CHECK(r.residency == v1::RESIDENCY_COLD);
  REQUIRE(newest_op(rid));
  CHECK(newest_op(rid)->kind == v1::REPAIRING);
  CHECK(live_revisions() == folded_revisions());
}

TEST_CASE("observe: a DEGRADED revision whose members are all readable again is READY (pure)") {
  events::revision_record r;
  r.id = {"default", "default", "m", "main", 1};
  r.availability = v1::DEGRADED;
  r.residency = v1::RESIDENCY_HOT;
  r.observed_hot_ratio = 1;
  r.manifest.manifest_key = "manifest";
  r.payload_keys = {"a"};
  actors::group_snapshot g;
  events::object_record manifest, a;
  manifest.ref = {"default", "manifest"};
  manifest.hot = true;
  a.ref = {"default", "a"};
  a.size = 10;
  a.hot = true;
  g.members = {a, manifest};
  actors::decide_context ctx;
  auto seen = actors::decide_observation(r, g, ctx);
  REQUIRE(seen.events.size() == 1);
  CHECK(seen.events[0].availability_observed().availability() == v1::READY);
  r.availability = v1::READY;
  CHECK(actors::decide_observation(r, g, ctx).events.empty());  // unchanged: nothing
  g.members = {manifest};  // the payload is gone from the store
  auto gone = actors::decide_observation(r, g, ctx);
  REQUIRE(gone.events.size() == 2);
  CHECK(gone.events[0].availability_observed().availability() == v1::DEGRADED);
  CHECK(gone.events[0].availability_observed().reason().find("'a'") != std::string::npos);
  // Then the residency over the readable payloads: none, ABSENT.
  CHECK(gone.events[1].residency_observed().residency() == v1::RESIDENCY_ABSENT);
}

// ------------------------------------------------------------------- scrub

TEST_CASE_FIXTURE(observation_fixture, "scrub: a replica whose bytes changed is dropped as CORRUPT and repaired from COLD") {
  auto rid = id();
  auto [v, u] = hot_with_cold_copies(rid, 2, 1000);
  corrupt(v1::TIER_HOT, u.keys[0]);
  scrub_round();
  CHECK_FALSE(object(u.keys[0]).hot);
  CHECK(object(u.keys[0]).cold);
  CHECK(events_of_type("replica_dropped").size() >= 1);
  CHECK(stats().scrub_corrupt == 1);
  reconcile_rounds();
  check_payloads(u, 1000, true, true);  // repaired, with the original bytes
  REQUIRE(newest_op(rid));
  CHECK(newest_op(rid)->kind == v1::REPAIRING);
  CHECK(get_rev(rid)->record.availability == v1::READY);
  CHECK(live_index() == folded_index());
  CHECK(live_revisions() == folded_revisions());
}

TEST_CASE_FIXTURE(observation_fixture, "scrub: a corrupt only replica is dropped and the revision is DEGRADED") {
  auto rid = id();
  auto [v, u] = ready(rid, 2, 1000);
  corrupt(v1::TIER_HOT, u.keys[1]);
  scrub_round();
  CHECK_FALSE(object(u.keys[1]).readable());
  reconcile_rounds();
  CHECK(get_rev(rid)->record.availability == v1::DEGRADED);
  CHECK(live_revisions() == folded_revisions());
}

TEST_CASE_FIXTURE(observation_fixture, "scrub: a clean pass drops nothing and counts every byte it re-read") {
  auto rid = id();
  auto [v, u] = ready(rid, 3, 1000);
  uint64_t all = 0;
  for (const auto& [ref, o] : live_index().objects) all += o.size * ((o.hot ? 1 : 0) + (o.cold ? 1 : 0));
  scrub_round();
  CHECK(stats().scrub_bytes == all);
  CHECK(stats().scrub_corrupt == 0);
  CHECK(events_of_type("replica_dropped").empty());
}

TEST_CASE_FIXTURE(observation_fixture, "scrub: a round takes at least one replica, then up to its budget, in key order, wrapping around") {
  for (auto key : {"a", "b", "c"}) REQUIRE(put(request(key, pattern(100, 1)), pattern(100, 1)).ok());
  auto next = [&](uint64_t budget) {
    auto b = ask<actors::scrub_batch>(store, actors::scrub_atom::value, budget);
    REQUIRE(b.ok());
    std::string keys;
    for (const auto& i : b->items) keys += i.ref.key;
    return keys;
  };
  CHECK(next(1) == "a");     // at least one, even over the budget
  CHECK(next(200) == "bc");  // from where the last round stopped
  CHECK(next(150) == "a");   // wrapped around: a new pass
}

TEST_CASE_FIXTURE(observation_fixture, "scrub: a verdict on a replica whose object changed while it was read is void") {
  REQUIRE(put(request("a", pattern(100, 1)), pattern(100, 1)).ok());
  auto batch = ask<actors::scrub_batch>(store, actors::scrub_atom::value, uint64_t{1});
  REQUIRE(batch.ok());
  REQUIRE(batch->items.size() == 1);
  REQUIRE(ask<actors::object_info>(store, caf::add_atom::value, std::string{"default"},
                                   std::string{"a"}, v1::TIER_COLD)
              .ok());  // the object changed meanwhile
  batch->items[0].corrupt = true;
  caf::anon_send(store, actors::scrub_atom::value, *batch);
  sched.run();
  CHECK(object("a").hot);
  CHECK(events_of_type("replica_dropped").empty());
}

// ------------------------------------------------------------ abandonment

TEST_CASE_FIXTURE(observation_fixture, "abandon: an IMPORTING revision idle past the abandon timeout is aborted and its objects removed") {
  auto rid = id();
  auto b = begin(rid, 2, 2000);
  REQUIRE(b.ok());
  auto u = put_revision(rid, 2, 1000);
  pass_time(4 * 60'000);
  CHECK(get_rev(rid, true)->record.availability == v1::IMPORTING);
  pass_time(60'000);
  reconcile_rounds();
  CHECK(get_rev(rid, true)->record.availability == v1::DELETED);
  for (const auto& key : u.keys) CHECK(live_index().find({"default", key}) == nullptr);
  REQUIRE(events_of_type("import_aborted").size() == 1);
  CHECK(live_revisions() == folded_revisions());
}

TEST_CASE_FIXTURE(observation_fixture, "abandon: a put into the revision's group counts as activity") {
  auto rid = id();
  REQUIRE(begin(rid, 2, 2000).ok());
  pass_time(4 * 60'000);
  auto u = put_revision(rid, 2, 1000);  // the upload is slow, not abandoned
  pass_time(2 * 60'000);
  reconcile_rounds();
  CHECK(get_rev(rid, true)->record.availability == v1::IMPORTING);
  pass_time(4 * 60'000);
  reconcile_rounds();
  CHECK(get_rev(rid, true)->record.availability == v1::DELETED);
}

TEST_CASE("reconciler: an IMPORTING revision idle past the abandon timeout is an abandon_import decision with its reason") {
  std::map<events::revision_key, actors::revision_view> views;
  actors::revision_view v;
  v.record.id = {"default", "default", "m", "main", 1};
  v.record.availability = v1::IMPORTING;
  v.record.updated_at_ms = 1'000;
  views[v.record.id] = v;
  actors::reconciler_config c;
  c.import_abandon = std::chrono::minutes(5);
  auto early = actors::plan_reconcile(views, {}, 1'000 + 299'999, {}, c);
  CHECK(early.decisions.empty());
  auto due = actors::plan_reconcile(views, {}, 1'000 + 300'000, {}, c);
  REQUIRE(due.decisions.size() == 1);
  CHECK(due.decisions[0].action == "abandon_import");
  CHECK(due.decisions[0].reason.find("300 s") != std::string::npos);
  CHECK(actors::is_tick(due.decisions[0]));
}
