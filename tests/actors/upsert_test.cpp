// Lineage replacement (SPEC §4 upsert), at the actor level on the fake clock:
// one case per rule, each comparing what the live system shows with the fold
// of the journal where the state matters.
#include <doctest/doctest.h>

#include "events/evolve.hpp"
#include "events/state_codec.hpp"
#include "lifecycle_fixture.hpp"

using namespace weightd;
using namespace weightd::test;
namespace v1 = events::v1;

namespace {

struct upsert_fixture : lifecycle_fixture {
  static constexpr int kCount = 2;
  static constexpr size_t kSize = 1000;

  result<actors::lineage_view> begin_up(const events::revision_key& base, uint64_t expected,
                                        uint64_t target_generation, const std::string& request_id,
                                        v1::UpsertMode mode = v1::UPSERT_PUT_FIRST,
                                        uint64_t count = kCount, uint64_t bytes = kCount * kSize) {
    actors::begin_upsert cmd;
    cmd.base = base;
    cmd.expected_generation = expected;
    cmd.target_generation = target_generation;
    cmd.mode = mode;
    cmd.request_id = request_id;
    cmd.target.expected_payload_count = count;
    cmd.target.expected_logical_bytes = bytes;
    return ask<actors::lineage_view>(registry(), cmd);
  }
  result<view> commit_up(const events::revision_key& target, const std::string& request_id,
                         uint64_t expected, const upload& u) {
    actors::commit_upsert cmd;
    cmd.commit.id = target;
    cmd.commit.expected_generation = expected;
    cmd.commit.manifest = u.manifest;
    cmd.commit.payload_keys = u.keys;
    cmd.request_id = request_id;
    return ask<view>(registry(), cmd);
  }
  result<actors::lineage_view> abort_up(const events::revision_key& base,
                                        const std::string& request_id) {
    return ask<actors::lineage_view>(registry(), actors::abort_upsert{base, "", request_id});
  }
  result<actors::lineage_view> lineage(const events::revision_key& any) {
    return ask<actors::lineage_view>(registry(), actors::get_lineage{any});
  }
  v1::ClaimPhase phase(const events::revision_key& any) {
    auto l = lineage(any);
    REQUIRE_MESSAGE(l.ok(), l.error().to_string());
    REQUIRE(l->claim.has_value());
    return l->claim->phase;
  }
  events::store_state fold() {
    auto state = persistence::fold_journal(*memory);
    REQUIRE_MESSAGE(state.ok(), state.error().to_string());
    return *state;
  }
  /// What GetLineage shows equals the journal's fold of the lineage.
  void check_live_equals_fold(const events::revision_key& any) {
    auto live = lineage(any);
    REQUIRE(live.ok());
    auto folded = fold();
    const auto* l = folded.lineages.find(events::lineage_key(any));
    uint64_t watermark = l ? l->watermark : 0;
    CHECK(live->watermark == watermark);
    CHECK(live->claim.has_value() == (l && l->claim.has_value()));
    if (live->claim && l && l->claim) CHECK(*live->claim == *l->claim);
    CHECK(live_revisions() == folded.revisions.revisions);
  }
  /// Every event folds and keeps every invariant (what `journal verify` checks).
  void check_journal_verifies() {
    persistence::fold_options o;
    o.use_snapshots = false;
    o.after_each = [](const events::store_state& s, const v1::Envelope& e) {
      return events::check_touched(s, e);
    };
    auto state = persistence::fold_journal(*memory, o);
    REQUIRE_MESSAGE(state.ok(), state.error().to_string());
    REQUIRE_MESSAGE(events::check_snapshot(*state).ok(), events::check_snapshot(*state).to_string());
  }
  std::string read_object(const std::string& key) {
    auto grant = get(key);
    REQUIRE_MESSAGE(grant.ok(), grant.error().to_string());
    std::ifstream in(grant->path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
};

events::revision_key gen(uint64_t g) { return lifecycle_fixture::id("llama", "main", g); }

}  // namespace

TEST_CASE_FIXTURE(upsert_fixture,
                  "upsert PUT_FIRST: the target imports under the claim, CommitUpsert makes it "
                  "READY and moves the watermark, the base retires and is deleted once its "
                  "leases drain") {
  auto [base, base_upload] = ready(gen(1), kCount, kSize);
  auto reader = acquire(gen(1), "inference-1", 60'000);
  REQUIRE(reader.ok());

  auto claim = begin_up(gen(1), base.record.metadata_generation, 2, "ckpt-2");
  REQUIRE_MESSAGE(claim.ok(), claim.error().to_string());
  REQUIRE(claim->claim.has_value());
  CHECK(claim->claim->phase == v1::CLAIM_IMPORTING_TARGET);
  CHECK(claim->claim->target_generation() == 2);
  auto target = get_rev(gen(2), true);
  REQUIRE(target.ok());
  CHECK(target->record.availability == v1::IMPORTING);
  CHECK_FALSE(get_rev(gen(2)).ok());  // invisible while it imports
  check_live_equals_fold(gen(1));

  auto u = put_revision(gen(2), kCount, kSize);
  auto committed = commit_up(gen(2), "ckpt-2", target->record.metadata_generation, u);
  REQUIRE_MESSAGE(committed.ok(), committed.error().to_string());
  CHECK(committed->record.availability == v1::READY);
  CHECK(lineage(gen(1))->watermark == 2);
  CHECK(phase(gen(1)) == v1::CLAIM_RETIRING_BASE);

  // The base retires: no new leases, the old one renews, no policy change or migration.
  auto base_now = get_rev(gen(1));
  REQUIRE(base_now.ok());
  CHECK(base_now->record.retired_by == "ckpt-2");
  auto late = acquire(gen(1), "inference-2");
  REQUIRE_FALSE(late.ok());
  CHECK(late.error().code() == errc::not_ready);
  CHECK(renew(reader->lease.id, 60'000).ok());
  auto policy = set_policy(gen(1), base_now->record.metadata_generation,
                           events::policy{v1::RESIDENCY_COLD, 0.5, v1::MIGRATION_MANUAL});
  REQUIRE_FALSE(policy.ok());
  CHECK(policy.error().code() == errc::busy);
  auto migrate = ask<events::operation_record>(
      registry(), actors::migrate_revision{gen(1), base_now->record.metadata_generation,
                                           v1::RESIDENCY_COLD, 0, "", ""});
  REQUIRE_FALSE(migrate.ok());
  CHECK(migrate.error().code() == errc::busy);
  // The reader keeps reading the base byte-identical.
  CHECK(read_object(base_upload.keys[0]) == pattern(kSize, 0));
  check_live_equals_fold(gen(1));

  REQUIRE(release(reader->lease.id).ok());
  sched.run();
  auto gone = get_rev(gen(1), true);
  REQUIRE(gone.ok());
  CHECK(gone->record.availability == v1::DELETED);
  CHECK(phase(gen(1)) == v1::CLAIM_COMPLETED);
  CHECK(get_rev(gen(2))->record.availability == v1::READY);
  check_live_equals_fold(gen(1));
  check_journal_verifies();

  // CommitUpsert again returns the claim's current state: the target.
  auto again = commit_up(gen(2), "ckpt-2", 0, u);
  REQUIRE(again.ok());
  CHECK(again->record.id == gen(2));
  CHECK(again->record.availability == v1::READY);
}

TEST_CASE_FIXTURE(upsert_fixture,
                  "upsert: the same request_id and arguments return the existing claim, other "
                  "arguments are CONFLICT, a competing claim is BUSY") {
  auto [base, u] = ready(gen(1), kCount, kSize);
  auto g = base.record.metadata_generation;
  REQUIRE(begin_up(gen(1), g, 2, "a").ok());
  auto same = begin_up(gen(1), g, 2, "a");
  REQUIRE(same.ok());
  CHECK(same->claim->request_id() == "a");
  auto other_args = begin_up(gen(1), g, 3, "a");
  REQUIRE_FALSE(other_args.ok());
  CHECK(other_args.error().code() == errc::conflict);
  auto competing = begin_up(gen(1), g, 3, "b");
  REQUIRE_FALSE(competing.ok());
  CHECK(competing.error().code() == errc::busy);
  CHECK(competing.error().message().find("'a'") != std::string::npos);
  CHECK(fold().lineages.find(events::lineage_key(gen(1)))->claim->request_id() == "a");
  check_live_equals_fold(gen(1));
}

TEST_CASE_FIXTURE(upsert_fixture,
                  "upsert: request_id is required, a target generation not above the base's is "
                  "INVALID_ARGUMENT naming target_generation, not above the watermark CONFLICT "
                  "naming it, a DELETED or IMPORTING base is NOT_READY, an existing target is "
                  "CONFLICT, none of them leaves a claim") {
  auto [base, u] = ready(gen(3), kCount, kSize);
  auto g = base.record.metadata_generation;
  auto before = memory->highest_seq();

  auto no_id = begin_up(gen(3), g, 4, "");
  REQUIRE_FALSE(no_id.ok());
  CHECK(no_id.error().code() == errc::invalid_argument);
  CHECK(no_id.error().message().find("request_id") != std::string::npos);

  auto low = begin_up(gen(3), g, 3, "r");
  REQUIRE_FALSE(low.ok());
  CHECK(low.error().code() == errc::invalid_argument);
  CHECK(low.error().message().find("target_generation") != std::string::npos);

  auto stale = begin_up(gen(3), g + 5, 4, "r");
  REQUIRE_FALSE(stale.ok());
  CHECK(stale.error().code() == errc::stale_generation);

  // A higher generation committed directly moves the watermark (plain CommitImport).
  ready(gen(6), kCount, kSize);
  CHECK(lineage(gen(3))->watermark == 6);
  auto under_watermark = begin_up(gen(3), g, 5, "r");
  REQUIRE_FALSE(under_watermark.ok());
  CHECK(under_watermark.error().code() == errc::conflict);
  CHECK(under_watermark.error().message().find("watermark 6") != std::string::npos);

  auto exists = begin_up(gen(3), g, 7, "r");  // fine so far; make 8 exist first
  REQUIRE(exists.ok());
  REQUIRE(abort_up(gen(3), "r").ok());
  REQUIRE(begin(gen(8), 1, 10).ok());
  auto target_exists = begin_up(gen(3), g, 8, "r2");
  REQUIRE_FALSE(target_exists.ok());
  CHECK(target_exists.error().code() == errc::conflict);
  CHECK(lineage(gen(3))->claim->phase == v1::CLAIM_ABORTED);  // still the aborted "r"

  auto importing = begin_up(gen(8), 1, 9, "r3");
  REQUIRE_FALSE(importing.ok());
  CHECK(importing.error().code() == errc::not_ready);
  REQUIRE(remove_rev(gen(6), get_rev(gen(6))->record.metadata_generation).ok());
  auto deleted = begin_up(gen(6), 0, 9, "r4");
  REQUIRE_FALSE(deleted.ok());
  CHECK(deleted.error().code() == errc::not_ready);
  CHECK(lineage(gen(3))->watermark == 6);  // a delete never lowers it
  REQUIRE(before.ok());
  check_live_equals_fold(gen(3));
  check_journal_verifies();
}

TEST_CASE_FIXTURE(upsert_fixture,
                  "upsert: a claim the journal could not persist changes nothing in memory, "
                  "the same request then succeeds") {
  auto [base, u] = ready(gen(1), kCount, kSize);
  journal->inject(persistence::fault::fail_write);
  auto failed = begin_up(gen(1), base.record.metadata_generation, 2, "d", v1::UPSERT_DELETE_FIRST);
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error().code() == errc::durability_failed);
  CHECK_FALSE(lineage(gen(1))->claim.has_value());
  check_live_equals_fold(gen(1));
  auto claim = begin_up(gen(1), base.record.metadata_generation, 2, "d", v1::UPSERT_DELETE_FIRST);
  REQUIRE_MESSAGE(claim.ok(), claim.error().to_string());
  CHECK(claim->claim->phase == v1::CLAIM_IMPORTING_TARGET);
  check_live_equals_fold(gen(1));
  check_journal_verifies();
}

TEST_CASE_FIXTURE(upsert_fixture,
                  "upsert DELETE_FIRST: BUSY before any side effect while the base has a lease "
                  "or an operation, else the base is deleted first, then the target imports") {
  auto [base, u] = ready(gen(1), kCount, kSize);
  auto lease = acquire(gen(1), "reader");
  REQUIRE(lease.ok());
  auto seq = *memory->highest_seq();
  auto busy = begin_up(gen(1), base.record.metadata_generation, 2, "d", v1::UPSERT_DELETE_FIRST);
  REQUIRE_FALSE(busy.ok());
  CHECK(busy.error().code() == errc::busy);
  CHECK(*memory->highest_seq() == seq);  // nothing was written
  REQUIRE(release(lease->lease.id).ok());

  auto claim = begin_up(gen(1), base.record.metadata_generation, 2, "d", v1::UPSERT_DELETE_FIRST);
  REQUIRE_MESSAGE(claim.ok(), claim.error().to_string());
  CHECK(claim->claim->phase == v1::CLAIM_IMPORTING_TARGET);
  CHECK(get_rev(gen(1), true)->record.availability == v1::DELETED);
  auto target = get_rev(gen(2), true);
  REQUIRE(target.ok());
  CHECK(target->record.availability == v1::IMPORTING);
  auto up = put_revision(gen(2), kCount, kSize);
  auto committed = commit_up(gen(2), "d", target->record.metadata_generation, up);
  REQUIRE_MESSAGE(committed.ok(), committed.error().to_string());
  CHECK(phase(gen(1)) == v1::CLAIM_COMPLETED);
  CHECK(lineage(gen(1))->watermark == 2);
  check_live_equals_fold(gen(1));
  check_journal_verifies();
}

TEST_CASE_FIXTURE(upsert_fixture,
                  "upsert: a CommitUpsert refused with CONFLICT changes nothing, the right commit "
                  "then succeeds") {
  auto [base, u] = ready(gen(1), kCount, kSize);
  REQUIRE(begin_up(gen(1), base.record.metadata_generation, 2, "f").ok());
  auto up = put_revision(gen(2), kCount, kSize);
  auto right = up.manifest.manifest_sha256;
  up.manifest.manifest_sha256 = std::string(64, 'a');  // not the manifest's digest
  auto target_before = get_rev(gen(2), true)->record;
  auto failed = commit_up(gen(2), "f", target_before.metadata_generation, up);
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error().code() == errc::conflict);
  CHECK(phase(gen(1)) == v1::CLAIM_IMPORTING_TARGET);
  auto b = get_rev(gen(1));
  REQUIRE(b.ok());
  CHECK(b->record.availability == v1::READY);
  CHECK(b->record.retired_by.empty());
  CHECK(b->record.metadata_generation == base.record.metadata_generation);
  auto target_after = get_rev(gen(2), true)->record;
  CHECK(target_after.availability == v1::IMPORTING);
  CHECK(target_after.metadata_generation == target_before.metadata_generation);
  CHECK(lineage(gen(1))->watermark == 1);
  CHECK(acquire(gen(1), "reader").ok());
  up.manifest.manifest_sha256 = right;
  auto committed = commit_up(gen(2), "f", target_after.metadata_generation, up);
  REQUIRE_MESSAGE(committed.ok(), committed.error().to_string());
  CHECK(phase(gen(1)) == v1::CLAIM_RETIRING_BASE);
  check_live_equals_fold(gen(1));
  check_journal_verifies();
}

TEST_CASE_FIXTURE(upsert_fixture,
                  "upsert: a missing member leaves the claim for a retry, AbortUpsert ends it and "
                  "aborts its target, after the commit AbortUpsert is CONFLICT") {
  auto [base, u] = ready(gen(1), kCount, kSize);
  REQUIRE(begin_up(gen(1), base.record.metadata_generation, 2, "x").ok());
  auto up = put_revision(gen(2), kCount, kSize);
  REQUIRE(remove(up.keys[0]).ok());  // a member the upload has yet to (re)send
  auto early = commit_up(gen(2), "x", get_rev(gen(2), true)->record.metadata_generation, up);
  REQUIRE_FALSE(early.ok());
  CHECK(early.error().code() == errc::not_found);
  CHECK(phase(gen(1)) == v1::CLAIM_IMPORTING_TARGET);
  auto aborted = abort_up(gen(1), "x");
  REQUIRE_MESSAGE(aborted.ok(), aborted.error().to_string());
  CHECK(aborted->claim->phase == v1::CLAIM_ABORTED);
  CHECK(get_rev(gen(2), true)->record.availability == v1::DELETED);
  CHECK(abort_up(gen(1), "x").ok());  // idempotent
  // A claim exists and it is not "nope"'s: CONFLICT, not NOT_FOUND.
  CHECK(abort_up(gen(1), "nope").error().code() == errc::conflict);

  REQUIRE(begin_up(gen(1), base.record.metadata_generation, 3, "y").ok());
  auto up3 = put_revision(gen(3), kCount, kSize);
  REQUIRE(commit_up(gen(3), "y", get_rev(gen(3), true)->record.metadata_generation, up3).ok());
  auto too_late = abort_up(gen(1), "y");
  REQUIRE_FALSE(too_late.ok());
  CHECK(too_late.error().code() == errc::conflict);
  check_live_equals_fold(gen(1));
  check_journal_verifies();
}

TEST_CASE_FIXTURE(upsert_fixture,
                  "upsert: lineages and retiring bases survive a snapshot and a restart") {
  auto [base, u] = ready(gen(1), kCount, kSize);
  auto reader = acquire(gen(1), "r", 600'000);
  REQUIRE(begin_up(gen(1), base.record.metadata_generation, 2, "s").ok());
  auto up = put_revision(gen(2), kCount, kSize);
  REQUIRE(commit_up(gen(2), "s", get_rev(gen(2), true)->record.metadata_generation, up).ok());
  auto state = fold();
  auto decoded = events::decode_state(events::encode_state(state));
  REQUIRE(decoded.ok());
  CHECK(*decoded == state);
  CHECK(events::check_snapshot(*decoded).ok());

  restart();
  CHECK(phase(gen(1)) == v1::CLAIM_RETIRING_BASE);
  CHECK(get_rev(gen(1))->record.retired_by == "s");
  CHECK_FALSE(acquire(gen(1), "late").ok());
  REQUIRE(release(reader->lease.id).ok());
  sched.run();
  CHECK(phase(gen(1)) == v1::CLAIM_COMPLETED);
  check_live_equals_fold(gen(1));
  check_journal_verifies();
}

namespace {

/// One upsert from claim to completion, as a client would drive it: every
/// call retried until it answers (a crash makes the first tries fail).
void drive_to_the_end(upsert_fixture& f, v1::UpsertMode mode, uint64_t base_generation,
                      uint64_t lease_id) {
  auto b = f.begin_up(gen(1), base_generation, 2, "crash", mode);
  if (!b.ok()) return;  // the journal refuses writes until the restart
  auto target = f.get_rev(gen(2), true);
  if (!target.ok() || target->record.availability != v1::IMPORTING) return;
  auto up = f.try_put_revision(gen(2), upsert_fixture::kCount, upsert_fixture::kSize);
  if (!up.ok()) return;
  (void)f.commit_up(gen(2), "crash", target->record.metadata_generation, *up);
  if (lease_id) (void)f.release(lease_id);
  f.sched.run();
}

}  // namespace

TEST_CASE("upsert crash: a crash after any commit of an upsert, in both modes: after the "
          "restart the claim resumes or is abortable, the watermark never goes back, the "
          "journal verifies") {
  for (auto mode : {v1::UPSERT_PUT_FIRST, v1::UPSERT_DELETE_FIRST}) {
    for (uint64_t nth = 1; nth <= 20; ++nth) {
      CAPTURE(mode);
      CAPTURE(nth);
      upsert_fixture f;
      auto [base, u] = f.ready(gen(1), upsert_fixture::kCount, upsert_fixture::kSize);
      uint64_t lease_id = 0;
      if (mode == v1::UPSERT_PUT_FIRST) lease_id = f.acquire(gen(1), "reader", 600'000)->lease.id;
      // The nth append commits and then fails its fsync: the journal holds it,
      // refuses everything after, and the daemon restarts — a kill -9 there.
      f.journal->inject(persistence::fault::fail_fsync, nth);
      drive_to_the_end(f, mode, base.record.metadata_generation, lease_id);
      auto watermark_before = f.fold().lineages.lineages.count(events::lineage_key(gen(1)))
                                  ? f.fold().lineages.find(events::lineage_key(gen(1)))->watermark
                                  : 0;
      f.journal->reset();
      f.restart();
      f.check_journal_verifies();
      f.check_live_equals_fold(gen(1));
      auto l = f.lineage(gen(1));
      REQUIRE(l.ok());
      CHECK(l->watermark >= watermark_before);
      if (!l->claim) continue;  // the crash came before the claim
      // Never two live claims: another one waits for this one.
      auto c = *l->claim;
      if (!c.finished()) {
        auto competing = f.begin_up(gen(1), 0, 3, "another", mode);
        REQUIRE_FALSE(competing.ok());
        CHECK(competing.error().code() == errc::busy);
      }
      // Resume: the same requests again, then the lease ends.
      if (!c.finished() && !c.committed() && c.phase == v1::CLAIM_IMPORTING_TARGET) {
        auto target = f.get_rev(gen(2), true);
        if (target.ok() && target->record.availability == v1::IMPORTING) {
          auto up = f.try_put_revision(gen(2), upsert_fixture::kCount, upsert_fixture::kSize, true);
          REQUIRE_MESSAGE(up.ok(), up.error().to_string());
          auto committed = f.commit_up(gen(2), "crash", target->record.metadata_generation, *up);
          CHECK_MESSAGE(committed.ok(), committed.error().to_string());
        }
      }
      if (lease_id) (void)f.release(lease_id);
      f.pass_time(2'000);  // the retry interval, the reconciler's rounds
      auto end = f.lineage(gen(1));
      REQUIRE(end.ok());
      REQUIRE(end->claim.has_value());
      CHECK_MESSAGE(end->claim->finished(), events::phase_name(end->claim->phase));
      if (end->claim->phase == v1::CLAIM_COMPLETED) {
        CHECK(end->watermark == 2);
        CHECK(f.get_rev(gen(1), true)->record.availability == v1::DELETED);
        CHECK(f.get_rev(gen(2))->record.availability == v1::READY);
      }
      f.check_live_equals_fold(gen(1));
      f.check_journal_verifies();
    }
  }
}

TEST_CASE_FIXTURE(upsert_fixture,
                  "upsert: a claim on a lineage nobody imported into is NOT_FOUND and spawns no "
                  "actor (bad input does not grow the daemon)") {
  using impl = caf::stateful_actor<actors::registry_state, actors::registry_actor::base>;
  auto& st = dynamic_cast<impl&>(*caf::actor_cast<caf::abstract_actor*>(registry())).state;
  for (int i = 0; i < 10; ++i) {
    auto base = lifecycle_fixture::id("nobody-" + std::to_string(i), "main", 1);
    auto claimed = begin_up(base, 1, 2, "r");
    REQUIRE_FALSE(claimed.ok());
    CHECK(claimed.error().code() == errc::not_found);
    CHECK(abort_up(base, "r").error().code() == errc::not_found);
    CHECK(lineage(base).error().code() == errc::not_found);
  }
  CHECK(st.lineage_actors.empty());
}
