// SPEC §4 Leases and RemoveRevision vs leases, §2 the managed-group guard:
// one case per rule, on the deterministic scheduler with a fake clock
// (pass_time moves the wall clock and CAF's timers together).
#include <doctest/doctest.h>

#include <limits>

#include "lifecycle_fixture.hpp"

using namespace weightd;
using namespace weightd::test;
namespace v1 = events::v1;

// --------------------------------------------------------------- acquire

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: acquire on READY grants a lease with expiry now + ttl") {
  auto rid = id();
  ready(rid);
  auto lease = acquire(rid, "reader-1", 5'000);
  REQUIRE_MESSAGE(lease.ok(), lease.error().to_string());
  CHECK(lease->id == rid);
  CHECK(lease->lease.id >= 1);
  CHECK(lease->lease.holder == "reader-1");
  CHECK(lease->lease.expiry_ms == clock_ms + 5'000);
  auto v = get_rev(rid);
  CHECK(v->active_lease_count == 1);
  CHECK(v->nearest_lease_expiry_ms == clock_ms + 5'000);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: the same holder gets its live lease back unchanged") {
  auto rid = id();
  ready(rid);
  auto first = acquire(rid, "reader-1", 5'000);
  pass_time(1'000);
  auto again = acquire(rid, "reader-1", 60'000);
  REQUIRE(again.ok());
  CHECK(again->lease == first->lease);
  CHECK(get_rev(rid)->active_lease_count == 1);
  CHECK(events_of_type("lease_granted").size() == 1);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: ids are monotonic across holders and revisions") {
  auto a = id("a"), b = id("b");
  ready(a);
  ready(b);
  uint64_t last = 0;
  for (auto holder : {"h1", "h2", "h3"})
    for (const auto& rid : {a, b}) {
      auto lease = acquire(rid, holder);
      REQUIRE(lease.ok());
      CHECK(lease->lease.id > last);
      last = lease->lease.id;
    }
}

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: leases leave metadata_generation alone and update last_accessed_at_ms") {
  auto rid = id();
  auto [view, u] = ready(rid);
  pass_time(2'000);
  auto lease = acquire(rid, "reader");
  REQUIRE(lease.ok());
  REQUIRE(renew(lease->lease.id, 60'000).ok());
  REQUIRE(release(lease->lease.id).ok());
  auto after = get_rev(rid);
  CHECK(after->record.metadata_generation == view.record.metadata_generation);
  CHECK(after->record.last_accessed_at_ms == clock_ms);
  CHECK(after->record.updated_at_ms == view.record.updated_at_ms);
  // A writer's fence is not staled by readers.
  CHECK(set_policy(rid, view.record.metadata_generation,
                   {v1::RESIDENCY_HOT, 0.5, v1::MIGRATION_MANUAL})
            .ok());
}

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: a lease on IMPORTING is NOT_READY") {
  auto rid = id();
  REQUIRE(begin(rid, 1, 10).ok());
  auto refused = acquire(rid, "reader");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code() == errc::not_ready);
  CHECK(mentions(refused.error(), "IMPORTING"));
}

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: a lease on DELETING is NOT_READY, on DELETED NOT_FOUND") {
  auto rid = id();
  ready(rid, 2);
  // The removal appends: removal_started, the payload batch, the manifest,
  // revision_deleted. The last one fails, so the revision stays DELETING.
  journal->inject(persistence::fault::fail_write, 4);
  REQUIRE_FALSE(remove_rev(rid, 2).ok());
  REQUIRE(get_rev(rid, true)->record.availability == v1::DELETING);
  auto refused = acquire(rid, "reader");
  CHECK(refused.error().code() == errc::not_ready);
  CHECK(mentions(refused.error(), "DELETING"));
  pass_time(1'000);  // the reconciler finishes the deletion
  REQUIRE(get_rev(rid, true)->record.availability == v1::DELETED);
  CHECK(acquire(rid, "reader").error().code() == errc::not_found);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: a stale expected_metadata_generation is STALE_GENERATION, 0 means current") {
  auto rid = id();
  ready(rid);
  CHECK(acquire(rid, "reader", 1'000, 1).error().code() == errc::stale_generation);
  CHECK(acquire(rid, "reader", 1'000, 2).ok());
  CHECK(acquire(rid, "other", 1'000, 0).ok());
}

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: malformed requests are INVALID_ARGUMENT naming the field and change nothing") {
  auto rid = id();
  ready(rid);
  auto seq = *memory->highest_seq();
  CHECK(mentions(acquire(rid, "", 1'000).error(), "holder"));
  CHECK(mentions(acquire(rid, std::string("bad\x01", 4), 1'000).error(), "holder"));
  CHECK(mentions(acquire(rid, "reader", 0).error(), "ttl_ms"));
  CHECK(mentions(acquire(rid, "reader", 86'400'001).error(), "ttl_ms"));
  CHECK(acquire(rid, "reader", 0).error().code() == errc::invalid_argument);
  auto lease = acquire(rid, "reader", 1'000);
  seq = *memory->highest_seq();
  CHECK(mentions(renew(lease->lease.id, 0).error(), "ttl_ms"));
  // A bad ttl is INVALID_ARGUMENT also with a lease id never handed out.
  CHECK(renew(987654, 0).error().code() == errc::invalid_argument);
  CHECK(renew(987654, 86'400'001).error().code() == errc::invalid_argument);
  CHECK(mentions(renew(0, 1'000).error(), "lease_id"));
  CHECK(mentions(release(0).error(), "lease_id"));
  CHECK(*memory->highest_seq() == seq);
}

// ----------------------------------------------------- renew and release

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: renew sets expiry to max(current, now + ttl)") {
  auto rid = id();
  ready(rid);
  auto lease = acquire(rid, "reader", 10'000);
  auto longer = renew(lease->lease.id, 30'000);
  REQUIRE(longer.ok());
  CHECK(longer->lease.expiry_ms == clock_ms + 30'000);
  auto shorter = renew(lease->lease.id, 1'000);  // never shortens
  REQUIRE(shorter.ok());
  CHECK(shorter->lease.expiry_ms == clock_ms + 30'000);
  CHECK(events_of_type("lease_renewed").size() == 1);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: an expired lease cannot be renewed (LEASE_EXPIRED), before or after its expiry event") {
  auto rid = id();
  ready(rid);
  auto lease = acquire(rid, "reader", 1'000);
  clock_ms += 1'500;  // lapsed, the reconciler has not run yet
  auto late = renew(lease->lease.id, 10'000);
  REQUIRE_FALSE(late.ok());
  CHECK(late.error().code() == errc::lease_expired);
  CHECK(mentions(late.error(), "acquire a new"));
  pass_time(1'000);  // now the expiry is an event
  CHECK(events_of_type("lease_expired").size() == 1);
  CHECK(renew(lease->lease.id, 10'000).error().code() == errc::lease_expired);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: renew of an unknown lease is NOT_FOUND") {
  ready(id());
  CHECK(renew(424242, 1'000).error().code() == errc::not_found);
  CHECK(revoke(424242).error().code() == errc::not_found);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: release is idempotent, also for unknown ids") {
  auto rid = id();
  ready(rid);
  auto lease = acquire(rid, "reader");
  REQUIRE(release(lease->lease.id).ok());
  REQUIRE(release(lease->lease.id).ok());
  CHECK(release(424242).ok());
  CHECK(events_of_type("lease_released").size() == 1);
  CHECK(get_rev(rid)->active_lease_count == 0);
  CHECK(leases(rid)->leases.empty());
}

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: ListLeases lists each live lease's holder, id and expiry, revoke ends one") {
  auto rid = id();
  ready(rid);
  auto a = acquire(rid, "trainer", 5'000);
  auto b = acquire(rid, "server", 9'000);
  auto listed = leases(rid);
  REQUIRE(listed.ok());
  REQUIRE(listed->leases.size() == 2);
  CHECK(listed->leases[0].lease == a->lease);
  CHECK(listed->leases[1].lease == b->lease);
  auto revoked = revoke(a->lease.id);
  REQUIRE(revoked.ok());
  CHECK(revoked->lease.holder == "trainer");
  CHECK(leases(rid)->leases.size() == 1);
  CHECK(renew(a->lease.id, 1'000).error().code() == errc::lease_expired);
  CHECK(events_of_type("lease_revoked").size() == 1);
  CHECK(leases(id("unknown")).error().code() == errc::not_found);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: the reconciler expires lapsed leases as events") {
  auto rid = id();
  ready(rid);
  REQUIRE(acquire(rid, "short", 1'500).ok());
  REQUIRE(acquire(rid, "long", 60'000).ok());
  pass_time(1'000);
  CHECK(events_of_type("lease_expired").empty());
  pass_time(1'000);
  CHECK(events_of_type("lease_expired").size() == 1);
  auto v = get_rev(rid);
  CHECK(v->active_lease_count == 1);
  CHECK(v->nearest_lease_expiry_ms == 1'000'000 + 60'000);
  CHECK(live_revisions() == folded_revisions());
}

// ------------------------------------------------- RemoveRevision vs leases

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: remove while a lease is live is BUSY naming the holder and the nearest expiry") {
  auto rid = id();
  ready(rid);
  REQUIRE(acquire(rid, "inference-7", 20'000).ok());
  auto busy = remove_rev(rid, 2);
  REQUIRE_FALSE(busy.ok());
  CHECK(busy.error().code() == errc::busy);
  CHECK(mentions(busy.error(), "'inference-7'"));
  CHECK(mentions(busy.error(), "nearest expires at"));
  CHECK(mentions(busy.error(), "in 20.0 s"));
  CHECK(get_rev(rid)->record.availability == v1::READY);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: after the lease expires (fake clock) remove succeeds") {
  auto rid = id();
  auto [view, u] = ready(rid);
  REQUIRE(acquire(rid, "reader", 5'000).ok());
  REQUIRE_FALSE(remove_rev(rid, 2).ok());
  clock_ms += 5'001;  // lapsed; its expiry event goes with the removal
  auto removed = remove_rev(rid, 2);
  REQUIRE_MESSAGE(removed.ok(), removed.error().to_string());
  CHECK(removed->view.record.availability == v1::DELETED);
  CHECK(events_of_type("lease_expired").size() == 1);
  for (const auto& k : u.keys) CHECK_FALSE(get(k).ok());
  CHECK(live_revisions() == folded_revisions());
}

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: a drain-delete waits for the release, then deletes") {
  auto rid = id();
  auto [view, u] = ready(rid);
  auto lease = acquire(rid, "reader", 60'000);
  auto draining = remove_draining(rid, 2, 30'000);
  REQUIRE_MESSAGE(draining.ok(), draining.error().to_string());
  CHECK(draining->view.record.availability == v1::READY);
  CHECK(draining->view.record.drain_deadline_ms == clock_ms + 30'000);
  // No new leases at once; the holder may still renew.
  auto refused = acquire(rid, "newcomer");
  CHECK(refused.error().code() == errc::not_ready);
  CHECK(mentions(refused.error(), "draining"));
  CHECK(renew(lease->lease.id, 60'000).ok());
  pass_time(1'000);
  CHECK(get_rev(rid)->record.availability == v1::READY);  // still draining
  REQUIRE(release(lease->lease.id).ok());
  sched.run();
  auto gone = get_rev(rid, true);
  CHECK(gone->record.availability == v1::DELETED);
  CHECK(events_of_type("lease_revoked").empty());
  for (const auto& k : u.keys) CHECK_FALSE(get(k).ok());
  CHECK(live_revisions() == folded_revisions());
}

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: a drain-delete revokes the remaining leases at its deadline") {
  auto rid = id();
  ready(rid);
  REQUIRE(acquire(rid, "stubborn", 3'600'000).ok());
  REQUIRE(remove_draining(rid, 2, 5'000).ok());
  pass_time(4'000);
  CHECK(get_rev(rid)->record.availability == v1::READY);
  pass_time(1'000);
  CHECK(get_rev(rid, true)->record.availability == v1::DELETED);
  CHECK(events_of_type("lease_revoked").size() == 1);
  CHECK(live_revisions() == folded_revisions());
}

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: a drain with no live lease deletes at once") {
  auto rid = id();
  ready(rid);
  auto removed = remove_draining(rid, 2, 5'000);
  REQUIRE(removed.ok());
  CHECK(removed->view.record.availability == v1::DELETED);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: a second remove during a drain returns the record") {
  auto rid = id();
  ready(rid);
  REQUIRE(acquire(rid, "reader", 60'000).ok());
  auto first = remove_draining(rid, 2, 30'000);
  auto second = remove_rev(rid, first->view.record.metadata_generation);
  REQUIRE(second.ok());
  CHECK(second->view.record == first->view.record);
  CHECK(set_policy(rid, first->view.record.metadata_generation,
                   {v1::RESIDENCY_HOT, 0.5, v1::MIGRATION_MANUAL})
            .error()
            .code() == errc::not_ready);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: an AcquireLease and a RemoveRevision racing never both succeed") {
  for (int round = 0; round < 8; ++round) {
    auto rid = id("race", "r" + std::to_string(round));
    ready(rid);
    auto ask_lease = [&] {
      return self->request(registry(), caf::infinite,
                           actors::acquire_lease{rid, 0, "reader", 60'000, "", ""});
    };
    auto ask_removal = [&] {
      return self->request(registry(), caf::infinite, actors::remove_revision{rid, 2, 0, "", ""});
    };
    // Alternate which message the registry takes first.
    std::optional<decltype(ask_lease())> lease;
    std::optional<decltype(ask_removal())> removal;
    if (round % 2) {
      lease.emplace(ask_lease());
      removal.emplace(ask_removal());
    } else {
      removal.emplace(ask_removal());
      lease.emplace(ask_lease());
    }
    sched.run();
    int ok = 0;
    lease->receive([&](actors::lease_view&) { ++ok; }, [&](caf::error&) {});
    removal->receive([&](actors::removal_result&) { ++ok; }, [&](caf::error&) {});
    CHECK(ok == 1);
  }
}

// ----------------------------------------------------------- restarts

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: after a restart live leases are still live, extended to now + the recovery grace") {
  auto rid = id();
  ready(rid);
  auto short_one = acquire(rid, "short", 2'000);
  auto long_one = acquire(rid, "long", 600'000);
  clock_ms += 1'500;
  restart();
  auto listed = leases(rid);
  REQUIRE(listed.ok());
  REQUIRE(listed->leases.size() == 2);
  CHECK(listed->leases[0].lease.id == short_one->lease.id);
  CHECK(listed->leases[0].lease.expiry_ms == clock_ms + 10'000);   // extended by the grace
  CHECK(listed->leases[1].lease.expiry_ms == long_one->lease.expiry_ms);  // already longer
  CHECK(renew(short_one->lease.id, 30'000).ok());  // its holder can renew
  CHECK(remove_rev(rid, 2).error().code() == errc::busy);
  CHECK(live_revisions() == folded_revisions());
}

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: the recovery grace counts from the end of a slow tier check, so a lease 1 s from expiry stays renewable") {
  auto rid = id();
  ready(rid);
  auto lease = acquire(rid, "reader", 10'000);
  clock_ms += 9'000;  // the crash: 1 s before expiry
  stop();
  auto c = config();
  auto reads = std::make_shared<int>(0);
  c.objects.now_ms = [this, reads] {
    if (++*reads == 2) clock_ms += 12'000;  // the tier check took 12 s, longer than the grace
    return clock_ms;
  };
  start(c);
  auto listed = leases(rid);
  REQUIRE(listed.ok());
  REQUIRE(listed->leases.size() == 1);
  CHECK(listed->leases[0].lease.expiry_ms == clock_ms + 10'000);  // the whole grace from serving
  CHECK(renew(lease->lease.id, 30'000).ok());
  CHECK(live_revisions() == folded_revisions());
}

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: a lease that lapsed before the crash expires at restart") {
  auto rid = id();
  ready(rid);
  auto lease = acquire(rid, "reader", 1'000);
  clock_ms += 5'000;
  ready(id("later"));  // events written after the lease lapsed
  restart();
  CHECK(leases(rid)->leases.empty());
  CHECK(renew(lease->lease.id, 1'000).error().code() == errc::lease_expired);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: an exhausted lease id allocator is GENERATION_EXHAUSTED, it never wraps to an id in use") {
  auto rid = id();
  ready(rid);
  using impl = caf::stateful_actor<actors::registry_state, actors::registry_actor::base>;
  auto& st = dynamic_cast<impl&>(*caf::actor_cast<caf::abstract_actor*>(registry())).state;
  st.deps.lease_ids->store(std::numeric_limits<uint64_t>::max() - 1);
  auto last = acquire(rid, "a");
  REQUIRE(last.ok());
  CHECK(last->lease.id == std::numeric_limits<uint64_t>::max());
  auto seq = *memory->highest_seq();
  auto none = acquire(rid, "b");
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().code() == errc::generation_exhausted);
  CHECK(*memory->highest_seq() == seq);  // nothing written
  CHECK(live_revisions() == folded_revisions());
}

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: lease ids are not reused after a restart") {
  auto rid = id();
  ready(rid);
  auto first = acquire(rid, "a");
  REQUIRE(release(first->lease.id).ok());
  auto second = acquire(rid, "b");
  REQUIRE(release(second->lease.id).ok());
  restart();
  auto third = acquire(rid, "c");
  REQUIRE(third.ok());
  CHECK(third->lease.id > second->lease.id);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "leases: the fold of the journal reproduces the live lease state, also after a restart") {
  auto rid = id();
  ready(rid);
  auto a = acquire(rid, "a", 1'000);
  REQUIRE(acquire(rid, "b", 50'000).ok());
  REQUIRE(renew(a->lease.id, 3'000).ok());
  pass_time(4'000);  // a expires
  CHECK(live_revisions() == folded_revisions());
  restart();
  CHECK(live_revisions() == folded_revisions());
}

// --------------------------------------------------------------- the guard

struct small_hot_fixture : lifecycle_fixture {
  small_hot_fixture() : lifecycle_fixture(64 << 10) {}
};

TEST_CASE_FIXTURE(small_hot_fixture, "guard: eviction under memory pressure never dismantles a READY revision") {
  auto rid = id();
  auto [view, u] = ready(rid, 4, 4'000);  // 16 000 bytes + the manifest
  std::vector<std::string> general;
  for (int i = 0; i < 10; ++i) {
    general.push_back("cache/" + std::to_string(i));
    REQUIRE(put(general.back(), pattern(4'000, i)).ok());
    clock_ms += 10;
  }
  auto skips_before = stats().guard_skips["evict"];
  // A put that needs more than is free makes the store evict.
  REQUIRE(put("big", pattern(30'000)).ok());
  size_t general_left = 0;
  for (const auto& k : general) general_left += get(k).ok() ? 1 : 0;
  CHECK(general_left < general.size());
  for (const auto& k : u.keys) CHECK(get(k).ok());
  CHECK(get(view.record.manifest.manifest_key).ok());
  CHECK(stats().guard_skips["evict"] > skips_before);

  // A forced full eviction: only GENERAL objects go; every member is counted as a skip.
  clock_ms += 60'000;
  auto evicted = ask<actors::eviction_summary>(store, actors::evict_atom::value, 0.0);
  REQUIRE(evicted.ok());
  CHECK(evicted->skipped_managed == 5);
  for (const auto& k : general) CHECK_FALSE(get(k).ok());
  CHECK_FALSE(get("big").ok());
  for (const auto& k : u.keys) CHECK(get(k).ok());
  CHECK(get_rev(rid)->record.availability == v1::READY);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "guard: generic remove of a member is MANAGED_OBJECT, allowed while IMPORTING") {
  auto rid = id();
  REQUIRE(begin(rid, 2, 2'000).ok());
  auto u = put_revision(rid, 2, 1'000);
  CHECK(remove(u.keys[0], false).ok());  // the owner is importing
  auto other = id("other");
  auto [view, done] = ready(other, 2);
  auto refused = remove(done.keys[0], true);
  CHECK(refused.code() == errc::managed_object);
  CHECK(mentions(refused, events::canonical_text(other)));
  auto batch = ask<actors::batch_removal>(store, actors::remove_atom::value, std::string{"default"},
                                          std::vector<std::string>{done.keys[1]}, true, std::string{});
  REQUIRE(batch.ok());
  CHECK(batch->results[0].result.code() == errc::managed_object);
}
