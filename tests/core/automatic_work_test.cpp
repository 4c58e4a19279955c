// SPEC §4 «Automatic work never blocks a user», RemoveRevision's BUSY, the
// Migrate fence and operation ids that never wrap — on the decide functions
// and the fold, without actors.
#include <doctest/doctest.h>

#include <limits>

#include "core/lease_decide.hpp"
#include "core/revision_decide.hpp"
#include "events/revision_fold.hpp"

using namespace weightd;
using namespace weightd::actors;
namespace v1 = events::v1;

namespace {

constexpr int64_t kNow = 1'000'000;
constexpr uint64_t kLogical = 100 << 20;

/// Ids from a counter the test controls: `last` is the last one handed out.
struct test_context {
  uint64_t last_operation = 0, last_lease = 0;
  int64_t headroom = INT64_MAX;
  decide_context operator()() {
    auto next = [](uint64_t& last) {
      return [&last] { return last == std::numeric_limits<uint64_t>::max() ? 0 : ++last; };
    };
    return {kNow, {}, next(last_operation), next(last_lease), headroom};
  }
};

events::revision_key rid() { return {"default", "default", "m", "main", 1}; }

struct fold {
  events::revision_index index;
  uint64_t seq = 0;
  test_context ctx;

  /// Folds a decision that must succeed.
  void apply(const result<decision>& d) {
    REQUIRE_MESSAGE(d.ok(), d.error().to_string());
    for (auto e : d->events) {
      e.set_global_seq(++seq);
      REQUIRE(events::evolve_revisions(index, e).ok());
    }
  }
  const events::revision_record& record() { return *index.find(rid()); }

  /// default/m@main#1 READY at `residency`, AUTO preferring HOT, 2 units.
  explicit fold(v1::Residency residency = v1::RESIDENCY_HOT) {
    apply(decide_begin(nullptr, {rid(), "", 2, kLogical, false, {}, 0, "", ""}, ctx()));
    v1::Envelope e;
    e.set_global_seq(++seq);
    e.set_timestamp_ms(kNow);
    auto* c = e.mutable_import_committed();
    *c->mutable_id() = rid().to_proto();
    c->mutable_manifest()->set_manifest_key(events::manifest_key(rid()));
    c->mutable_manifest()->set_logical_bytes(kLogical);
    c->set_affinity_units(2);
    c->set_residency(residency);
    c->set_observed_hot_ratio(residency == v1::RESIDENCY_HOT ? 1 : 0);
    REQUIRE(events::evolve_revisions(index, e).ok());
  }

  /// The reconciler demotes it (an automatic operation).
  void automatic_demotion() {
    apply(decide_auto_migrate(&record(), {rid(), v1::RESIDENCY_COLD, 0, "pressure"}, ctx()));
    REQUIRE(record().operation_id != 0);
    REQUIRE(index.operations.at(record().operation_id).automatic);
  }
  /// A user migrates it to COLD.
  void user_migration() {
    apply(decide_migrate(&record(), index,
                         {rid(), record().metadata_generation, v1::RESIDENCY_COLD, 0, "alice", ""},
                         ctx()));
    REQUIRE(record().operation_id != 0);
  }
  void lease(const std::string& holder) {
    apply(decide_acquire(&record(), {rid(), 0, holder, 60'000, "", ""}, ctx()));
  }
};

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("automatic work: a user's RemoveRevision cancels an automatic operation instead of BUSY") {
  fold f;
  f.automatic_demotion();
  auto op = f.record().operation_id;
  auto d = decide_remove(&f.record(), f.index, {rid(), f.record().metadata_generation, 0, "alice", ""},
                         f.ctx());
  REQUIRE(d.ok());
  REQUIRE(d->events.size() >= 2);
  REQUIRE(d->events[0].has_operation_cancelled());
  CHECK(has(d->events[0].operation_cancelled().message(), "cancelled by RemoveRevision of 'alice'"));
  f.apply(d);
  CHECK(f.index.operations.at(op).state == events::operation_state::cancelled);
  CHECK(f.record().availability == v1::DELETING);
}

TEST_CASE("automatic work: a user's UpdatePolicy and Migrate cancel an automatic operation too") {
  SUBCASE("UpdatePolicy") {
    fold f;
    f.automatic_demotion();
    auto d = decide_update_policy(&f.record(), f.index,
                                  {rid(), f.record().metadata_generation,
                                   {v1::RESIDENCY_HOT, 0.5, v1::MIGRATION_MANUAL}, "bob", ""},
                                  f.ctx());
    REQUIRE(d.ok());
    CHECK(d->events[0].has_operation_cancelled());
    CHECK(has(d->events[0].operation_cancelled().message(), "UpdatePolicy"));
    f.apply(d);
    CHECK(f.record().policy.mode == v1::MIGRATION_MANUAL);
    CHECK(f.record().operation_id == 0);
  }
  SUBCASE("Migrate, even to the automatic operation's own target: the user's starts") {
    fold f;
    f.automatic_demotion();
    auto automatic = f.record().operation_id;
    f.user_migration();
    CHECK(f.index.operations.at(automatic).state == events::operation_state::cancelled);
    CHECK_FALSE(f.index.operations.at(f.record().operation_id).automatic);
  }
}

TEST_CASE("automatic work: an operation a user started still blocks with BUSY, changing nothing") {
  fold f;
  f.user_migration();
  auto generation = f.record().metadata_generation;
  auto d = decide_remove(&f.record(), f.index, {rid(), generation, 0, "", ""}, f.ctx());
  REQUIRE_FALSE(d.ok());
  CHECK(d.error().code() == errc::busy);
  CHECK(has(d.error().message(), "(MIGRATING to RESIDENCY_COLD) is running"));
}

TEST_CASE("RemoveRevision: BUSY names every blocker, the operation and the lease holders with the nearest expiry") {
  fold f;
  f.lease("inference-7");
  f.user_migration();
  auto d = decide_remove(&f.record(), f.index, {rid(), f.record().metadata_generation, 0, "", ""},
                         f.ctx());
  REQUIRE_FALSE(d.ok());
  CHECK(d.error().code() == errc::busy);
  CHECK(has(d.error().message(), "is running"));
  CHECK(has(d.error().message(), "'inference-7'"));
  CHECK(has(d.error().message(), "nearest expires"));
}

TEST_CASE("RemoveRevision: a lease still blocks after an automatic operation would give way, nothing is cancelled") {
  fold f;
  f.automatic_demotion();
  f.lease("inference-7");  // a reader came while the demotion runs
  auto d = decide_remove(&f.record(), f.index, {rid(), f.record().metadata_generation, 0, "", ""},
                         f.ctx());
  REQUIRE_FALSE(d.ok());
  CHECK(d.error().code() == errc::busy);
  CHECK(has(d.error().message(), "'inference-7'"));
  CHECK(f.record().operation_id != 0);  // a refused command changed nothing
}

TEST_CASE("Migrate: an expected_metadata_generation that is not current is STALE_GENERATION, whatever runs") {
  SUBCASE("nothing running") {
    fold f;
    auto d = decide_migrate(&f.record(), f.index, {rid(), 99, v1::RESIDENCY_COLD, 0, "", ""}, f.ctx());
    REQUIRE_FALSE(d.ok());
    CHECK(d.error().code() == errc::stale_generation);
  }
  SUBCASE("a migration to the same target running") {
    fold f;
    f.user_migration();
    auto d = decide_migrate(&f.record(), f.index, {rid(), 99, v1::RESIDENCY_COLD, 0, "", ""}, f.ctx());
    REQUIRE_FALSE(d.ok());
    CHECK(d.error().code() == errc::stale_generation);
  }
}

TEST_CASE("operation ids never wrap: after the last id, starting an operation is GENERATION_EXHAUSTED and changes nothing") {
  fold f;
  f.ctx.last_operation = std::numeric_limits<uint64_t>::max();
  auto migrate = decide_migrate(&f.record(), f.index,
                                {rid(), f.record().metadata_generation, v1::RESIDENCY_COLD, 0, "", ""},
                                f.ctx());
  REQUIRE_FALSE(migrate.ok());
  CHECK(migrate.error().code() == errc::generation_exhausted);
  auto policy = decide_update_policy(&f.record(), f.index,
                                     {rid(), f.record().metadata_generation,
                                      {v1::RESIDENCY_COLD, 0.5, v1::MIGRATION_AUTO}, "", ""},
                                     f.ctx());
  REQUIRE_FALSE(policy.ok());
  CHECK(policy.error().code() == errc::generation_exhausted);
  // Automatic work simply does not start.
  auto automatic = decide_auto_migrate(&f.record(), {rid(), v1::RESIDENCY_COLD, 0, "pressure"}, f.ctx());
  CHECK_FALSE(automatic.changes());
}

TEST_CASE("access promotion starts only when its extra hot bytes fit under the relief line") {
  SUBCASE("no room: the lease is granted, nothing is promoted") {
    fold f{v1::RESIDENCY_COLD};
    f.ctx.headroom = kLogical - 1;
    f.lease("reader");
    CHECK(f.record().leases.size() == 1);
    CHECK(f.record().operation_id == 0);
  }
  SUBCASE("room: the lease starts an automatic promotion") {
    fold f{v1::RESIDENCY_COLD};
    f.ctx.headroom = kLogical;
    f.lease("reader");
    REQUIRE(f.record().operation_id != 0);
    CHECK(f.index.operations.at(f.record().operation_id).automatic);
  }
}
