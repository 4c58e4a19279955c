// SPEC §4 Reconciler, "Pressure and relief": the round's decisions as a pure
// function (one case per rule), then the AUTO reconciler running for real on
// the deterministic scheduler with a small HOT tier.
#include <doctest/doctest.h>

#include "core/reconcile_plan.hpp"
#include "lifecycle_fixture.hpp"

using namespace weightd;
using namespace weightd::test;
namespace v1 = events::v1;

namespace {

constexpr int64_t kNow = 10'000'000;

/// A READY AUTO revision preferring HOT, `units` units of `unit_bytes`.
actors::revision_view view_of(const std::string& resource, v1::Residency residency,
                              int64_t accessed_ms, uint64_t units = 2,
                              uint64_t unit_bytes = 1000) {
  actors::revision_view v;
  auto& r = v.record;
  r.id = {"default", "default", resource, "main", 1};
  r.availability = v1::READY;
  r.residency = residency;
  r.policy = {v1::RESIDENCY_HOT, 0.5, v1::MIGRATION_AUTO};
  r.metadata_generation = 2;
  r.manifest.manifest_key = "m";
  r.manifest.logical_bytes = units * unit_bytes;
  r.affinity_units = units;
  r.observed_hot_ratio = residency == v1::RESIDENCY_HOT ? 1.0 : residency == v1::RESIDENCY_MIXED ? 0.5 : 0;
  r.created_at_ms = 1;
  r.last_accessed_at_ms = accessed_ms;
  return v;
}

using views = std::map<events::revision_key, actors::revision_view>;

views of(std::initializer_list<actors::revision_view> vs) {
  views out;
  for (const auto& v : vs) out[v.record.id] = v;
  return out;
}

actors::hot_tier_usage usage(uint64_t used, uint64_t capacity = 10'000, bool failed = false) {
  return {used, 0, capacity, failed};
}

std::vector<std::string> actions(const actors::reconcile_report& r) {
  std::vector<std::string> out;
  for (const auto& d : r.decisions)
    out.push_back(d.id.resource + ":" + d.action + ":" + v1::Residency_Name(d.target));
  return out;
}

}  // namespace

TEST_CASE("reconciler: under pressure it demotes the least recently used AUTO revision one step") {
  auto vs = of({view_of("new", v1::RESIDENCY_HOT, 3'000), view_of("old", v1::RESIDENCY_HOT, 1'000),
                view_of("mid", v1::RESIDENCY_HOT, 2'000)});
  auto r = actors::plan_reconcile(vs, {}, kNow, usage(9'500), {});
  CHECK(r.pressure);
  // 9 500 - 8 500 = 1 000 bytes to free; HOT -> MIXED at ratio 0.5 frees 1 000.
  CHECK(actions(r) == std::vector<std::string>{"old:demote:RESIDENCY_MIXED"});
  CHECK(r.decisions[0].reason.find("pressure") != std::string::npos);
  CHECK(r.decisions[0].reason.find("95.0%") != std::string::npos);
}

TEST_CASE("reconciler: what a running demotion will free counts, so a long demotion does not demote one more revision each round") {
  auto busy = view_of("busy", v1::RESIDENCY_HOT, 1'000);
  events::operation_record op;
  op.id = 1;
  op.target = v1::RESIDENCY_MIXED;
  op.target_hot_ratio = 0.5;
  busy.operation = std::make_shared<const events::operation_record>(op);
  busy.record.operation_id = 1;
  auto vs = of({busy, view_of("next", v1::RESIDENCY_HOT, 2'000)});
  // 9 500 - 8 500 = 1 000 to free; busy's HOT -> MIXED frees 1 000 when it ends.
  auto r = actors::plan_reconcile(vs, {}, kNow, usage(9'500), {});
  CHECK(r.pressure);
  CHECK(actions(r).empty());
  // More pressure than it frees: one more demotion.
  CHECK(actions(actors::plan_reconcile(vs, {}, kNow, usage(9'900), {})) ==
        std::vector<std::string>{"next:demote:RESIDENCY_MIXED"});
}

TEST_CASE("reconciler: demotion goes one step HOT to MIXED to COLD and a one-unit revision HOT to COLD") {
  auto vs = of({view_of("mixed", v1::RESIDENCY_MIXED, 1'000),
                view_of("single", v1::RESIDENCY_HOT, 2'000, 1, 2000)});
  auto r = actors::plan_reconcile(vs, {}, kNow, usage(10'000), {});
  CHECK(actions(r) == std::vector<std::string>{"mixed:demote:RESIDENCY_COLD",
                                               "single:demote:RESIDENCY_COLD"});
}

TEST_CASE("reconciler: ties in access time demote the revision with the most hot bytes first") {
  auto vs = of({view_of("small", v1::RESIDENCY_HOT, 1'000, 2, 100),
                view_of("large", v1::RESIDENCY_HOT, 1'000, 2, 5'000)});
  auto r = actors::plan_reconcile(vs, {}, kNow, usage(9'500), {});
  REQUIRE_FALSE(r.decisions.empty());
  CHECK(r.decisions[0].id.resource == "large");
}

TEST_CASE("reconciler: a leased, busy, non-AUTO, draining or cooling-down revision is not demoted") {
  auto leased = view_of("leased", v1::RESIDENCY_HOT, 1);
  leased.active_lease_count = 1;
  leased.nearest_lease_expiry_ms = kNow + 1'000;
  auto busy = view_of("busy", v1::RESIDENCY_HOT, 1);
  busy.record.operation_id = 7;
  auto manual = view_of("manual", v1::RESIDENCY_HOT, 1);
  manual.record.policy.mode = v1::MIGRATION_MANUAL;
  auto draining = view_of("draining", v1::RESIDENCY_HOT, 1);
  draining.record.drain_deadline_ms = kNow + 5'000;
  auto cooling = view_of("cooling", v1::RESIDENCY_HOT, 1);
  cooling.last_operation_end_ms = kNow - 29'000;
  auto degraded = view_of("degraded", v1::RESIDENCY_HOT, 1);
  degraded.record.availability = v1::DEGRADED;
  auto r = actors::plan_reconcile(of({leased, busy, manual, draining, cooling, degraded}), {}, kNow,
                                  usage(10'000), {});
  CHECK(r.pressure);
  for (const auto& d : r.decisions) CHECK(d.action != "demote");  // a drain may finish, though
  cooling.last_operation_end_ms = kNow - 30'000;  // the cooldown has passed
  auto later = actors::plan_reconcile(of({cooling}), {}, kNow, usage(10'000), {});
  CHECK(actions(later) == std::vector<std::string>{"cooling:demote:RESIDENCY_MIXED"});
}

TEST_CASE("reconciler: a spill alone is pressure") {
  auto vs = of({view_of("a", v1::RESIDENCY_HOT, 1)});
  auto r = actors::plan_reconcile(vs, {}, kNow, usage(1'000, 10'000, true), {});
  CHECK(r.pressure);
  CHECK(actions(r) == std::vector<std::string>{"a:demote:RESIDENCY_MIXED"});
}

TEST_CASE("reconciler: on relief it promotes the most recently used revision only if it fits under the relief line") {
  auto vs = of({view_of("recent", v1::RESIDENCY_COLD, 5'000, 2, 2'000),
                view_of("older", v1::RESIDENCY_MIXED, 4'000, 2, 2'000),
                view_of("oldest", v1::RESIDENCY_COLD, 3'000, 2, 2'000)});
  // Relief line 8 000: 3 000 used + 4 000 (recent) fits, then older's 2 000 does not.
  auto r = actors::plan_reconcile(vs, {}, kNow, usage(3'000), {});
  CHECK(r.relief);
  CHECK(actions(r) == std::vector<std::string>{"recent:promote:RESIDENCY_HOT"});
  CHECK(r.decisions[0].reason.find("relief") != std::string::npos);
}

TEST_CASE("reconciler: between the relief line and the high watermark it neither promotes nor demotes") {
  auto vs = of({view_of("cold", v1::RESIDENCY_COLD, 5'000), view_of("hot", v1::RESIDENCY_HOT, 1)});
  auto r = actors::plan_reconcile(vs, {}, kNow, usage(8'500), {});
  CHECK_FALSE(r.pressure);
  CHECK_FALSE(r.relief);
  CHECK(actions(r).empty());
}

TEST_CASE("reconciler: a revision is never promoted past its preferred residency") {
  auto mixed = view_of("mixed", v1::RESIDENCY_MIXED, 5'000);
  mixed.record.policy.preferred = v1::RESIDENCY_MIXED;
  auto cold = view_of("cold", v1::RESIDENCY_COLD, 5'000);
  cold.record.policy.preferred = v1::RESIDENCY_COLD;
  auto r = actors::plan_reconcile(of({mixed, cold}), {}, kNow, usage(0), {});
  CHECK(actions(r).empty());
}

TEST_CASE("reconciler: a revision warmer than it prefers converges") {
  auto v = view_of("a", v1::RESIDENCY_HOT, 1);
  v.record.policy.preferred = v1::RESIDENCY_COLD;
  auto r = actors::plan_reconcile(of({v}), {}, kNow, usage(8'500), {});
  CHECK(actions(r) == std::vector<std::string>{"a:converge:RESIDENCY_COLD"});
}

TEST_CASE("reconciler: a round takes at most max_actions decisions and the next one continues after the cursor") {
  views vs;
  for (int i = 0; i < 10; ++i) {
    auto v = view_of("r" + std::to_string(i), v1::RESIDENCY_HOT, 1);
    v.active_lease_count = 1;
    v.nearest_lease_expiry_ms = kNow - 1;  // lapsed: the round expires it
    vs[v.record.id] = v;
  }
  actors::reconciler_config c;
  c.max_actions = 4;
  auto first = actors::plan_reconcile(vs, {}, kNow, usage(0, 0), c);
  REQUIRE(first.decisions.size() == 4);
  CHECK(first.decisions[0].action == "expire_leases");
  auto second = actors::plan_reconcile(vs, first.decisions.back().id, kNow, usage(0, 0), c);
  CHECK(second.decisions[0].id.resource == "r4");
}

// ---------------------------------------------------------------- for real

namespace {

struct auto_fixture : lifecycle_fixture {
  auto_fixture() : lifecycle_fixture(10'000) {}  // HOT: 10 000 bytes; relief line 8 000
  result<actors::reconcile_report> reconcile(bool dry_run) {
    return ask<actors::reconcile_report>(registry(), actors::reconcile_request{dry_run});
  }
  uint64_t hot_used() { return stats().hot.used_bytes; }
};

}  // namespace

TEST_CASE_FIXTURE(auto_fixture, "reconciler: dry_run reports the next round's decisions with reasons and takes none") {
  ready(id("a"), 2, 2'000);
  ready(id("b"), 2, 2'000);
  pass_time(1'000);
  ready(id("c"), 2, 2'000);  // its second unit spills: pressure
  auto seq = *memory->highest_seq();
  auto dry = reconcile(true);
  REQUIRE(dry.ok());
  CHECK(dry->pressure);
  REQUIRE_FALSE(dry->decisions.empty());
  CHECK(dry->decisions[0].action == "demote");
  CHECK(dry->decisions[0].id == id("a"));  // the oldest access
  CHECK_FALSE(dry->decisions[0].reason.empty());
  CHECK(*memory->highest_seq() == seq);  // nothing taken
  CHECK(get_rev(id("a"))->record.residency == v1::RESIDENCY_HOT);
  auto taken = reconcile(false);
  REQUIRE(taken.ok());
  sched.run();
  CHECK(get_rev(id("a"))->record.residency == v1::RESIDENCY_MIXED);
  CHECK(events_of_type("operation_started").size() == 1);
}

TEST_CASE_FIXTURE(auto_fixture, "reconciler: a leased model that cannot fit under the relief line waits COLD, without an operation, and is promoted once room appears") {
  ready(id("a"), 2, 2'000);
  pass_time(1'000);
  ready(id("b"), 2, 2'000);
  pass_time(1'000);
  auto [c, u] = ready(id("c"), 2, 2'000);
  for (const auto& r : {id("a"), id("b"), id("c")}) CHECK(get_rev(r)->record.availability == v1::READY);
  auto lease = acquire(id("c"), "server", 3'600'000);
  REQUIRE(lease.ok());
  for (int i = 0; i < 120; ++i) pass_time(1'000);  // rounds, migrations, cooldowns
  // SPEC §4: an access promotion starts only when its extra hot bytes fit
  // under the relief line; nothing automatic runs on c meanwhile.
  CHECK(get_rev(id("c"))->record.residency != v1::RESIDENCY_HOT);
  CHECK(get_rev(id("c"))->record.operation_id == 0);
  CHECK(hot_used() <= 9'000);
  REQUIRE(remove_rev(id("b"), get_rev(id("b"))->record.metadata_generation).ok());
  for (int i = 0; i < 60; ++i) pass_time(1'000);
  CHECK(get_rev(id("c"))->record.residency == v1::RESIDENCY_HOT);  // relief: the recent reader first
  CHECK(hot_used() <= 9'000);
  for (const auto& r : {id("a"), id("c")}) {
    auto v = get_rev(r);
    CHECK(v->record.availability == v1::READY);
    CHECK(v->record.residency != v1::RESIDENCY_ABSENT);
  }
  CHECK(live_revisions() == folded_revisions());
}

TEST_CASE_FIXTURE(auto_fixture, "leases: AcquireLease on a COLD AUTO revision is granted at once and starts the promotion") {
  auto [v, u] = ready(id("a"), 2, 1'000);
  auto cold = ask<events::operation_record>(
      registry(), actors::migrate_revision{id("a"), v.record.metadata_generation, v1::RESIDENCY_COLD, 0, "", ""});
  REQUIRE(cold.ok());
  sched.run();
  REQUIRE(get_rev(id("a"))->record.residency == v1::RESIDENCY_COLD);
  auto generation = get_rev(id("a"))->record.metadata_generation;
  pass_time(31'000);  // past the cooldown: relief would promote it too; the lease comes first
  auto lease = acquire(id("a"), "reader");
  REQUIRE(lease.ok());
  CHECK(lease->lease.id > 0);
  auto promoted = get_rev(id("a"));
  CHECK(promoted->record.residency == v1::RESIDENCY_HOT);
  CHECK(promoted->record.operation_id == 0);
  // The promotion the grant started (and its finish) did not stale a writer's fence.
  CHECK(promoted->record.metadata_generation == generation);
}
