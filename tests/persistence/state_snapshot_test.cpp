// Whole-state snapshots: a fold from a snapshot equals a fold of every event.
#include <doctest/doctest.h>

#include <limits>

#include <functional>

#include "events/identity.hpp"
#include "events/state_codec.hpp"
#include "lifecycle_fixture.hpp"

using namespace weightd;
using namespace weightd::test;
namespace v1 = events::v1;

namespace {
/// A journal with objects, revisions in several states and an operation.
void build_history(lifecycle_fixture& f) {
  f.ready(f.id("a"), 2, 100);
  f.put_tier = v1::TIER_HOT;  // uploaded HOT: the commit starts the migration to COLD
  f.ready(f.id("b"), 2, 100, events::policy{v1::RESIDENCY_COLD, 0.5, v1::MIGRATION_AUTO});
  f.put_tier = v1::TIER_UNSPECIFIED;
  REQUIRE(f.begin(f.id("c"), 1, 1).ok());
  REQUIRE(f.abort(f.id("c"), 1).ok());
  REQUIRE(f.put("general/thing", "bytes").ok());
  auto lease = f.acquire(f.id("a"), "reader", 60'000);  // live leases are state too
  REQUIRE(lease.ok());
  REQUIRE(f.acquire(f.id("a"), "released").ok());
  REQUIRE(f.release(lease->lease.id + 1).ok());
}

events::store_state full_fold(const persistence::journal_backend& j) {
  persistence::fold_options o;
  o.use_snapshots = false;
  auto s = persistence::fold_journal(j, o);
  REQUIRE_MESSAGE(s.ok(), s.error().to_string());
  return *s;
}
}  // namespace

TEST_CASE_FIXTURE(lifecycle_fixture, "snapshot: the state survives encode and decode unchanged") {
  build_history(*this);
  auto state = full_fold(*memory);
  CHECK(state.revisions.operations.size() == 1);
  CHECK(state.revisions.revisions.size() == 3);
  CHECK(state.revisions.revisions.at(id("a")).leases.size() == 1);
  CHECK(state.revisions.last_lease_id == 2);
  auto decoded = events::decode_state(events::encode_state(state));
  REQUIRE(decoded.ok());
  CHECK(*decoded == state);
  CHECK(events::decode_state("not a snapshot").error().code() == errc::data_loss);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "snapshot: one that lists an object, revision or operation twice does not decode") {
  // Found by fuzz_snapshot: a repeated object counted its group twice.
  build_history(*this);
  v1::StateSnapshot good;
  REQUIRE(good.ParseFromString(events::encode_state(full_fold(*memory))));
  auto twice = [&](auto&& repeat, const std::string& named) {
    auto bad = good;
    repeat(bad);
    auto decoded = events::decode_state(bad.SerializeAsString());
    REQUIRE_FALSE(decoded.ok());
    CHECK(decoded.error().code() == errc::data_loss);
    CHECK_MESSAGE(decoded.error().message().find(named) != std::string::npos,
                  decoded.error().message());
  };
  twice([](v1::StateSnapshot& s) { *s.add_objects() = s.objects(0); }, "twice");
  twice([](v1::StateSnapshot& s) { *s.add_revisions() = s.revisions(0); }, "twice");
  twice([](v1::StateSnapshot& s) { *s.add_operations() = s.operations(0); }, "twice");
}

TEST_CASE_FIXTURE(lifecycle_fixture, "snapshot: a fold from a snapshot equals a fold of every event") {
  ready(id("before-snapshot"), 2, 100);
  auto seq = persistence::write_state_snapshot(*memory);
  REQUIRE(seq.ok());
  CHECK(*seq == *memory->highest_seq());
  build_history(*this);  // more events after the snapshot
  auto from_snapshot = persistence::fold_journal(*memory);
  REQUIRE(from_snapshot.ok());
  CHECK(*from_snapshot == full_fold(*memory));
  persistence::fold_options before;
  before.until_seq = *seq;  // replay --until the snapshot's own seq
  CHECK(persistence::fold_journal(*memory, before)->applied_seq == *seq);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "snapshot: an unusable newest snapshot is skipped") {
  build_history(*this);
  auto highest = *memory->highest_seq();
  REQUIRE(memory->save_snapshot({events::kStateSnapshotStream, highest, 0, "garbage"}).ok());
  auto folded = persistence::fold_journal(*memory);
  REQUIRE(folded.ok());
  CHECK(*folded == full_fold(*memory));
}

TEST_CASE_FIXTURE(lifecycle_fixture, "snapshot: only the newest two are kept") {
  for (int i = 0; i < 3; ++i) {
    REQUIRE(put("k" + std::to_string(i), "x").ok());
    REQUIRE(persistence::write_state_snapshot(*memory).ok());
  }
  int count = 0;
  persistence::snapshot_criteria c;
  for (auto s = memory->load_snapshot(events::kStateSnapshotStream, c); s.ok() && *s;
       s = memory->load_snapshot(events::kStateSnapshotStream, c)) {
    ++count;
    c.max_seq = (*s)->seq - 1;
  }
  CHECK(count == 2);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "snapshot: the writer asks for one every N events, a restart starts from it") {
  stop();
  auto c = config();
  c.snapshot_every = 5;
  start(c);
  build_history(*this);
  sched.run();
  auto newest = memory->load_snapshot(events::kStateSnapshotStream, {});
  REQUIRE(newest.ok());
  REQUIRE(*newest);
  CHECK((*newest)->seq >= 5);
  auto revisions = live_revisions();
  auto objects = live_index();
  stop();
  start(c);
  CHECK(live_revisions() == revisions);
  CHECK(live_index() == objects);
}

// A snapshot whose record checksum is fine but whose content is wrong must
// not be served as truth: it is skipped and the events are folded instead.
namespace {
void check_skipped(lifecycle_fixture& f, const std::function<void(events::store_state&)>& damage,
                   const std::string& named) {
  build_history(f);
  auto good = full_fold(*f.memory);
  auto bad = good;
  damage(bad);
  CHECK(events::check_snapshot(good).ok());
  auto verdict = events::check_snapshot(bad);
  REQUIRE_FALSE(verdict.ok());
  CHECK(verdict.code() == errc::data_loss);
  CHECK_MESSAGE(verdict.message().find(named) != std::string::npos, verdict.message());
  REQUIRE(f.memory->save_snapshot({events::kStateSnapshotStream, bad.applied_seq, bad.last_event_ms,
                                   events::encode_state(bad)}).ok());
  auto folded = persistence::fold_journal(*f.memory);
  REQUIRE(folded.ok());
  CHECK(*folded == good);
}
}  // namespace

TEST_CASE_FIXTURE(lifecycle_fixture, "snapshot: one with availability out of range is skipped") {
  check_skipped(*this, [&](events::store_state& s) {
    s.revisions.revisions.at(id("a")).availability = static_cast<v1::Availability>(255);
  }, "availability 255");
}

TEST_CASE_FIXTURE(lifecycle_fixture, "snapshot: one with an operation kind out of range is skipped") {
  check_skipped(*this, [](events::store_state& s) {
    s.revisions.operations.begin()->second.kind = static_cast<v1::OperationKind>(255);
  }, "kind 255");
}

TEST_CASE_FIXTURE(lifecycle_fixture, "snapshot: one with an operation state out of range is skipped") {
  check_skipped(*this, [](events::store_state& s) {
    s.revisions.operations.begin()->second.state = static_cast<events::operation_state>(255);
  }, "state 255");
}

TEST_CASE_FIXTURE(lifecycle_fixture, "snapshot: one with a running automatic migration to where its revision already is is skipped") {
  check_skipped(*this, [&](events::store_state& s) {
    auto& r = s.revisions.revisions.at(id("a"));
    events::operation_record op;
    op.id = ++s.revisions.last_operation_id;
    op.revision = r.id;
    op.target = r.residency;
    op.total_units = r.affinity_units;
    op.automatic = true;
    r.operation_id = op.id;
    s.revisions.operations.emplace(op.id, op);
  }, "already");
}

TEST_CASE_FIXTURE(lifecycle_fixture, "snapshot: one with a non-canonical group id or manifest key is skipped") {
  check_skipped(*this, [&](events::store_state& s) {
    s.revisions.revisions.at(id("a")).payload_group_id = "weight:elsewhere";
  }, "non-canonical group id");
}

TEST_CASE_FIXTURE(lifecycle_fixture, "snapshot: one with a NaN hot ratio is skipped") {
  // Found by fuzz_snapshot: a NaN ratio passed the checks, and a state with
  // a NaN is not even equal to itself.
  check_skipped(*this, [&](events::store_state& s) {
    s.revisions.revisions.at(id("a")).observed_hot_ratio = std::numeric_limits<double>::quiet_NaN();
  }, "hot ratio outside [0, 1]");
}

TEST_CASE_FIXTURE(lifecycle_fixture, "snapshot: one with an operation whose target hot ratio is outside [0, 1] is skipped") {
  check_skipped(*this, [](events::store_state& s) {
    s.revisions.operations.begin()->second.target_hot_ratio = 2.5;
  }, "hot ratio outside [0, 1]");
}

TEST_CASE_FIXTURE(lifecycle_fixture, "snapshot: one whose last lease id is below a live lease is skipped") {
  check_skipped(*this, [](events::store_state& s) { s.revisions.last_lease_id = 0; }, "last lease id");
}

TEST_CASE_FIXTURE(lifecycle_fixture, "snapshot: one with a live lease on a DELETED revision is skipped, not fatal") {
  check_skipped(*this, [&](events::store_state& s) {
    auto& c = s.revisions.revisions.at(id("c"));  // aborted: DELETED
    c.leases[1] = {1, "ghost", 1'000'000'000, 1};
  }, "DELETED with a live lease");
}

TEST_CASE_FIXTURE(lifecycle_fixture, "snapshot: with the events before a damaged snapshot gone, the fold refuses naming the gap") {
  ready(id("early"), 1, 10);
  build_history(*this);
  auto bad = full_fold(*memory);
  bad.revisions.last_lease_id = 0;
  REQUIRE(memory->save_snapshot({events::kStateSnapshotStream, bad.applied_seq, bad.last_event_ms,
                                 events::encode_state(bad)}).ok());
  // The history of "early" is gone (as if compacted behind the snapshot).
  REQUIRE(memory->delete_stream_to(events::revision_stream(id("early")), persistence::kMaxSeq).ok());
  auto folded = persistence::fold_journal(*memory);
  REQUIRE_FALSE(folded.ok());
  CHECK(folded.error().code() == errc::data_loss);
  CHECK(folded.error().message().find("are missing from the journal") != std::string::npos);
}
