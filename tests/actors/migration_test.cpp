// SPEC §4 Migrate, GetOperation, CancelOperation and §2 Spill: one case per
// rule, on the deterministic scheduler with a fake clock. Migrations run for
// real: replicas are copied between the fixture's HOT and COLD directories.
#include <doctest/doctest.h>

#include "migration_fixture.hpp"

using namespace weightd;
using namespace weightd::test;
namespace v1 = events::v1;

// ----------------------------------------------------------------- Migrate

TEST_CASE_FIXTURE(migration_fixture, "migrate: HOT to COLD moves every payload to COLD and keeps the manifest HOT") {
  auto rid = id();
  auto [v, u] = ready(rid, 3, 1000);
  auto started = migrate(rid, v.record.metadata_generation, v1::RESIDENCY_COLD);
  REQUIRE_MESSAGE(started.ok(), started.error().to_string());
  CHECK(started->target == v1::RESIDENCY_COLD);
  CHECK(started->total_units == 3);
  CHECK(started->total_bytes == 3000);
  sched.run();
  auto done = operation(started->id);
  REQUIRE(done.ok());
  CHECK(done->state == events::operation_state::completed);
  CHECK(done->processed_units == 3);
  CHECK(done->processed_bytes == 3000);
  auto after = get_rev(rid);
  CHECK(after->record.residency == v1::RESIDENCY_COLD);
  CHECK(after->record.observed_hot_ratio == 0);
  CHECK(after->record.operation_id == 0);
  check_payloads(u, 1000, false, true);
  CHECK(object(u.manifest.manifest_key).hot);
  CHECK(live_revisions() == folded_revisions());
}

TEST_CASE_FIXTURE(migration_fixture, "migrate: HOT to COLD to MIXED to HOT keeps every byte identical") {
  auto rid = id();
  auto [v, u] = ready(rid, 4, 1000);
  for (auto target : {v1::RESIDENCY_COLD, v1::RESIDENCY_MIXED, v1::RESIDENCY_HOT}) {
    CAPTURE(v1::Residency_Name(target));
    auto started = migrate(rid, generation(rid), target, target == v1::RESIDENCY_MIXED ? 0.5 : 0);
    REQUIRE_MESSAGE(started.ok(), started.error().to_string());
    sched.run();
    CHECK(operation(started->id)->state == events::operation_state::completed);
    auto r = get_rev(rid)->record;
    CHECK(r.residency == target);
    size_t hot = 0;
    for (size_t i = 0; i < u.keys.size(); ++i) {
      const auto& o = object(u.keys[i]);
      CHECK(o.readable());
      hot += o.hot;
      if (o.hot) CHECK(replica_bytes(v1::TIER_HOT, u.keys[i]) == pattern(1000, static_cast<unsigned>(i)));
      if (o.cold) CHECK(replica_bytes(v1::TIER_COLD, u.keys[i]) == pattern(1000, static_cast<unsigned>(i)));
    }
    if (target == v1::RESIDENCY_MIXED) {
      CHECK(hot == 2);  // 4 equal units at ratio 0.5
      CHECK(r.observed_hot_ratio == doctest::Approx(0.5));
    }
  }
  CHECK(live_revisions() == folded_revisions());
}

TEST_CASE_FIXTURE(migration_fixture, "migrate: an explicit Migrate advances metadata_generation by one and a retry returns the same operation") {
  auto rid = id();
  auto [v, u] = ready(rid, 2, 100);
  auto lease = acquire(rid, "reader");  // keeps the operation running
  auto g = v.record.metadata_generation;
  auto first = migrate(rid, g, v1::RESIDENCY_COLD);
  REQUIRE(first.ok());
  CHECK(generation(rid) == g + 1);
  auto retry = migrate(rid, g, v1::RESIDENCY_COLD);
  REQUIRE(retry.ok());
  CHECK(retry->id == first->id);
  CHECK(events_of_type("operation_started").size() == 1);
  REQUIRE(release(lease->lease.id).ok());
  pass_time(1'000);
  REQUIRE(operation(first->id)->state == events::operation_state::completed);
  CHECK(migrate(rid, g, v1::RESIDENCY_HOT).error().code() == errc::stale_generation);
}

TEST_CASE_FIXTURE(migration_fixture, "migrate: a target outside HOT COLD MIXED is INVALID_ARGUMENT naming target") {
  auto rid = id();
  auto [v, u] = ready(rid);
  for (auto target : {v1::RESIDENCY_UNKNOWN, v1::RESIDENCY_ABSENT}) {
    auto r = migrate(rid, v.record.metadata_generation, target);
    CHECK(r.error().code() == errc::invalid_argument);
    CHECK(mentions(r.error(), "target"));
  }
  auto ratio = migrate(rid, v.record.metadata_generation, v1::RESIDENCY_MIXED, 1.0);
  CHECK(ratio.error().code() == errc::invalid_argument);
  CHECK(mentions(ratio.error(), "mixed_hot_ratio"));
}

TEST_CASE_FIXTURE(migration_fixture, "migrate: only READY or DEGRADED revisions migrate") {
  auto rid = id();
  REQUIRE(begin(rid, 1, 10).ok());
  CHECK(migrate(rid, 1, v1::RESIDENCY_COLD).error().code() == errc::not_ready);
  CHECK(migrate(id("nope"), 1, v1::RESIDENCY_COLD).error().code() == errc::not_found);
}

TEST_CASE_FIXTURE(migration_fixture, "migrate: PINNED is POLICY_UNSATISFIABLE") {
  auto rid = id();
  auto [v, u] = ready(rid, 3, 100, events::policy{v1::RESIDENCY_HOT, 0.5, v1::MIGRATION_PINNED});
  auto r = migrate(rid, v.record.metadata_generation, v1::RESIDENCY_COLD);
  CHECK(r.error().code() == errc::policy_unsatisfiable);
  CHECK(mentions(r.error(), "PINNED"));
}

TEST_CASE_FIXTURE(migration_fixture, "migrate: MIXED with fewer than 2 units is POLICY_UNSATISFIABLE") {
  auto rid = id();
  auto [v, u] = ready(rid, 1, 100);
  auto r = migrate(rid, v.record.metadata_generation, v1::RESIDENCY_MIXED, 0.5);
  CHECK(r.error().code() == errc::policy_unsatisfiable);
}

TEST_CASE_FIXTURE(migration_fixture, "migrate: the same target returns the active operation and another target is BUSY") {
  auto rid = id();
  auto [v, u] = ready(rid, 2, 100);
  REQUIRE(acquire(rid, "reader").ok());  // holds the HOT replicas: the operation keeps running
  auto first = migrate(rid, generation(rid), v1::RESIDENCY_COLD);
  REQUIRE(first.ok());
  sched.run();
  auto again = migrate(rid, generation(rid), v1::RESIDENCY_COLD);
  REQUIRE(again.ok());
  CHECK(again->id == first->id);
  // The fence holds first (SPEC §4): 0 is not "don't check" for Migrate.
  CHECK(migrate(rid, 0, v1::RESIDENCY_COLD).error().code() == errc::stale_generation);
  auto other = migrate(rid, generation(rid), v1::RESIDENCY_HOT);
  CHECK(other.error().code() == errc::busy);
  CHECK(mentions(other.error(), "operation " + std::to_string(first->id)));
}

TEST_CASE_FIXTURE(migration_fixture, "migrate: a live lease holds back the drop of HOT replicas until it ends") {
  auto rid = id();
  auto [v, u] = ready(rid, 3, 1000);
  auto lease = acquire(rid, "reader", 60'000);
  REQUIRE(lease.ok());
  auto started = migrate(rid, generation(rid), v1::RESIDENCY_COLD);
  REQUIRE(started.ok());
  sched.run();
  pass_time(1'000);
  auto running = operation(started->id);
  CHECK(running->state == events::operation_state::running);
  CHECK(mentions(status{errc::ok, running->message}, "lease"));
  check_payloads(u, 1000, true, true);  // copied, but not dropped
  CHECK(get_rev(rid)->record.availability == v1::READY);
  REQUIRE(release(lease->lease.id).ok());
  pass_time(1'000);
  pass_time(1'000);
  CHECK(operation(started->id)->state == events::operation_state::completed);
  check_payloads(u, 1000, false, true);
}

TEST_CASE_FIXTURE(migration_fixture, "migrate: a round takes at most round_members members but always one whole unit") {
  restart_with([](actors::node_config& c) { c.migration.round_members = 1; });
  auto rid = id();
  auto [v, u] = ready(rid, 4, 100);
  auto started = migrate(rid, generation(rid), v1::RESIDENCY_COLD);
  REQUIRE(started.ok());
  sched.run();
  CHECK(operation(started->id)->state == events::operation_state::completed);
  // Each unit needs a copy and a drop (2 > round_members): one unit a round.
  CHECK(events_of_type("operation_progressed").size() >= 4);
  check_payloads(u, 100, false, true);
}

TEST_CASE_FIXTURE(migration_fixture, "migrate: with a migration rate the next round waits until the bytes the last one copied fit the rate") {
  restart_with([](actors::node_config& c) {
    c.migration.round_members = 1;
    c.migration.rate_bytes = 100;  // a 100-byte unit a second
  });
  auto rid = id();
  auto [v, u] = ready(rid, 4, 100);
  auto started = migrate(rid, generation(rid), v1::RESIDENCY_COLD);
  REQUIRE(started.ok());
  sched.run();  // what runs without time passing: the first copy only
  CHECK(operation(started->id)->state == events::operation_state::running);
  int seconds = 0;
  for (; seconds < 20 && operation(started->id)->state == events::operation_state::running; ++seconds)
    pass_time(1'000);
  CHECK(operation(started->id)->state == events::operation_state::completed);
  CHECK(seconds >= 3);  // four copies of 100 bytes at 100 bytes/s: three waits of a second
  check_payloads(u, 100, false, true);
}

TEST_CASE_FIXTURE(migration_fixture, "migrate: progress never goes backwards and an unchanged round writes no event") {
  auto rid = id();
  auto [v, u] = ready(rid, 2, 100);
  REQUIRE(acquire(rid, "reader", 600'000).ok());
  auto started = migrate(rid, generation(rid), v1::RESIDENCY_COLD);
  REQUIRE(started.ok());
  sched.run();
  pass_time(1'000);
  auto seq = *memory->highest_seq();
  for (int i = 0; i < 5; ++i) pass_time(1'000);  // rounds that find nothing to do
  CHECK(*memory->highest_seq() == seq);
  uint64_t last = 0;
  REQUIRE(persistence::read_type(*memory, "operation_progressed", {}, [&](const v1::Envelope& e) {
            CHECK(e.operation_progressed().processed_units() >= last);
            last = e.operation_progressed().processed_units();
            return true;
          }).ok());
}

// --------------------------------------------------------- GetOperation etc.

TEST_CASE_FIXTURE(migration_fixture, "operations: ids are monotonic and terminal ones stay queryable across restarts") {
  auto rid = id();
  auto [v, u] = ready(rid, 2, 100);
  auto first = migrate(rid, generation(rid), v1::RESIDENCY_COLD);
  REQUIRE(first.ok());
  sched.run();
  restart();
  auto old = operation(first->id);
  REQUIRE(old.ok());
  CHECK(old->state == events::operation_state::completed);
  auto second = migrate(rid, generation(rid), v1::RESIDENCY_HOT);
  REQUIRE(second.ok());
  CHECK(second->id > first->id);
  CHECK(operation(9'999).error().code() == errc::not_found);
  CHECK(operation(0).error().code() == errc::invalid_argument);
}

TEST_CASE_FIXTURE(migration_fixture, "operations: cancel ends it as CANCELLED at a unit boundary with every unit whole and readable") {
  auto rid = id();
  auto [v, u] = ready(rid, 3, 1000);
  auto lease = acquire(rid, "reader", 60'000);
  auto started = migrate(rid, generation(rid), v1::RESIDENCY_COLD);
  REQUIRE(started.ok());
  sched.run();
  auto cancelled = cancel(started->id);
  REQUIRE_MESSAGE(cancelled.ok(), cancelled.error().to_string());
  CHECK(cancelled->state == events::operation_state::cancelled);
  CHECK(operation(started->id)->state == events::operation_state::cancelled);
  for (const auto& key : u.keys) CHECK(object(key).readable());
  auto r = get_rev(rid)->record;
  CHECK(r.operation_id == 0);
  CHECK(r.availability == v1::READY);
  // The record is free again: policy, migrate and remove are accepted.
  REQUIRE(release(lease->lease.id).ok());
  CHECK(migrate(rid, generation(rid), v1::RESIDENCY_HOT).ok());
  sched.run();
  CHECK(remove_rev(rid, generation(rid)).ok());
  CHECK(cancel(started->id)->state == events::operation_state::cancelled);  // as it is
}

// ------------------------------------------------------------ the executor

TEST_CASE_FIXTURE(migration_fixture, "executor: a failed COLD write keeps the revision READY and the operation RUNNING and retried until it succeeds") {
  auto rid = id();
  auto [v, u] = ready(rid, 2, 1000);
  restart_with([](actors::node_config& c) { c.cold.inject_enospc_after_bytes = 10; });
  auto started = migrate(rid, generation(rid), v1::RESIDENCY_COLD);
  REQUIRE(started.ok());
  sched.run();
  for (int i = 0; i < 3; ++i) pass_time(2'000);
  auto running = operation(started->id);
  CHECK(running->state == events::operation_state::running);
  CHECK(mentions(status{errc::ok, running->message}, "retrying"));
  CHECK(get_rev(rid)->record.availability == v1::READY);
  check_payloads(u, 1000, true, false);  // nothing lost
  restart();  // the tier is writable again; the operation resumes from its cursor
  sched.run();
  for (int i = 0; i < 3; ++i) pass_time(1'000);
  CHECK(operation(started->id)->state == events::operation_state::completed);
  check_payloads(u, 1000, false, true);
  CHECK(live_revisions() == folded_revisions());
}

TEST_CASE_FIXTURE(migration_fixture, "executor: policy COLD migrates (no wedged operation) and the revision can be removed afterwards") {
  auto rid = id();
  auto [v, u] = ready(rid, 2, 100);
  auto cold = set_policy(rid, generation(rid), {v1::RESIDENCY_COLD, 0.5, v1::MIGRATION_AUTO});
  REQUIRE(cold.ok());
  REQUIRE(cold->record.operation_id != 0);
  sched.run();
  auto r = get_rev(rid)->record;
  CHECK(r.operation_id == 0);
  CHECK(r.residency == v1::RESIDENCY_COLD);
  auto removed = remove_rev(rid, r.metadata_generation);
  REQUIRE_MESSAGE(removed.ok(), removed.error().to_string());
  CHECK(removed->view.record.availability == v1::DELETED);
}

TEST_CASE_FIXTURE(migration_fixture, "executor: a commit with preferred COLD converges to COLD after the commit") {
  auto rid = id();
  auto [v, u] = ready(rid, 3, 100, events::policy{v1::RESIDENCY_COLD, 0.5, v1::MIGRATION_AUTO});
  sched.run();
  auto r = get_rev(rid)->record;
  CHECK(r.residency == v1::RESIDENCY_COLD);
  CHECK(r.operation_id == 0);
  check_payloads(u, 100, false, true);
}

TEST_CASE_FIXTURE(migration_fixture, "executor: a restart in the middle of a migration resumes it from its cursor") {
  restart_with([](actors::node_config& c) { c.migration.round_members = 1; });
  auto rid = id();
  auto [v, u] = ready(rid, 4, 100);
  auto started = migrate(rid, generation(rid), v1::RESIDENCY_COLD);
  REQUIRE(started.ok());
  // Stop after the first round's events reach the journal.
  for (int i = 0; i < 40 && events_of_type("operation_progressed").empty(); ++i) sched.run_once();
  restart_with([](actors::node_config& c) { c.migration.round_members = 1; });
  sched.run();
  auto done = operation(started->id);
  CHECK(done->state == events::operation_state::completed);
  check_payloads(u, 100, false, true);
  CHECK(live_revisions() == folded_revisions());
}

// -------------------------------------------------------------------- spill

TEST_CASE("spill: a member HOT cannot fit lands in COLD and the import commits") {
  migration_fixture f{64 << 10};  // a 64 KiB HOT tier
  auto rid = f.id();
  auto [v, u] = f.ready(rid, 3, 30'000);  // 90 000 bytes: the third spills
  CHECK(v.record.availability == v1::READY);
  CHECK(f.stats().spills >= 1);
  size_t cold = 0;
  for (const auto& key : u.keys) cold += f.object(key).cold;
  CHECK(cold >= 1);
  CHECK(v.record.residency == v1::RESIDENCY_MIXED);
  CHECK(v.record.observed_hot_ratio < 1.0);
}

TEST_CASE_FIXTURE(migration_fixture, "spill: a revision preferring COLD has its payloads written straight to COLD") {
  auto rid = id();
  auto [v, u] = ready(rid, 2, 100, events::policy{v1::RESIDENCY_COLD, 0.5, v1::MIGRATION_AUTO});
  CHECK(v.record.residency == v1::RESIDENCY_COLD);
  CHECK(v.record.operation_id == 0);  // nothing to converge
  check_payloads(u, 100, false, true);
  CHECK(object(u.manifest.manifest_key).hot);
}
