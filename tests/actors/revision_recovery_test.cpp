// The lifecycle under concurrency, restarts and replay: serial histories,
// restarts that reproduce the state exactly, replay equal to live.
#include <doctest/doctest.h>

#include "events/evolve.hpp"
#include "lifecycle_fixture.hpp"
#include "events/digest.hpp"

using namespace weightd;
using namespace weightd::test;
namespace v1 = events::v1;

TEST_CASE_FIXTURE(lifecycle_fixture, "serial: 64 clients racing on one revision see a serial history") {
  auto rid = id();
  ready(rid);  // generation 2
  // Each client fences on the generation its command will find if every
  // earlier one was applied first: only a serial history lets them all pass.
  std::vector<std::unique_ptr<caf::scoped_actor>> clients;
  std::vector<std::function<void()>> receive;
  std::vector<std::pair<uint64_t, double>> replies;  // (generation, ratio)
  for (int i = 0; i < 64; ++i) {
    clients.push_back(std::make_unique<caf::scoped_actor>(sys, true));
    double ratio = 0.1 + 0.01 * i;
    actors::update_policy cmd{rid, 2u + static_cast<uint64_t>(i),
                              {v1::RESIDENCY_HOT, ratio, v1::MIGRATION_MANUAL}, "", ""};
    auto rh = (*clients.back())->request(registry(), caf::infinite, cmd);
    receive.push_back([&, rh]() mutable {
      rh.receive(
          [&](actors::revision_view& v) {
            replies.emplace_back(v.record.metadata_generation, v.record.policy.mixed_hot_ratio);
          },
          [&](caf::error& err) { FAIL(actors::to_status(err).to_string()); });
    });
  }
  sched.run();
  for (auto& r : receive) r();
  REQUIRE(replies.size() == 64);
  std::set<uint64_t> generations;
  for (const auto& [gen, ratio] : replies) generations.insert(gen);
  CHECK(generations.size() == 64);  // every reply's generation is unique
  CHECK(*generations.begin() == 3);
  CHECK(*generations.rbegin() == 66);
  // The journal order is the order of the generations.
  std::sort(replies.begin(), replies.end());
  std::vector<double> journal_ratios;
  REQUIRE(memory->read_stream(events::revision_stream(rid), {}, [&](const v1::Envelope& e) {
                  if (e.has_policy_updated())
                    journal_ratios.push_back(e.policy_updated().policy().mixed_hot_ratio());
                  return true;
                }).ok());
  REQUIRE(journal_ratios.size() == 64);
  for (size_t i = 0; i < 64; ++i) CHECK(journal_ratios[i] == replies[i].second);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "serial: racing commands with the same fence: exactly one wins") {
  auto rid = id();
  ready(rid);
  std::vector<std::unique_ptr<caf::scoped_actor>> clients;
  int ok = 0, stale = 0;
  std::vector<std::function<void()>> receive;
  for (int i = 0; i < 16; ++i) {
    clients.push_back(std::make_unique<caf::scoped_actor>(sys, true));
    actors::update_policy cmd{rid, 2, {v1::RESIDENCY_HOT, 0.2 + 0.01 * i, v1::MIGRATION_MANUAL}, "", ""};
    auto rh = (*clients.back())->request(registry(), caf::infinite, cmd);
    receive.push_back([&, rh]() mutable {
      rh.receive([&](actors::revision_view&) { ++ok; },
                 [&](caf::error& err) {
                   if (actors::to_status(err).code() == errc::stale_generation) ++stale;
                 });
    });
  }
  sched.run();
  for (auto& r : receive) r();
  CHECK(ok == 1);
  CHECK(stale == 15);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "recovery: a restart after every lifecycle step reproduces the state exactly") {
  auto rid = id();
  auto other = id("other");
  std::vector<std::function<void()>> steps = {
      [&] { REQUIRE(begin(rid, 2, 2000).ok()); },
      [&] { put_revision(rid, 2, 1000); },
      [&] {
        auto u = put_revision(other, 1, 10);
        (void)u;
      },
      [&] {
        auto b = begin(other, 1, 10);
        REQUIRE(b.ok());
      },
      [&] {
        lifecycle_fixture::upload u;
        u.keys = {"weights/llama-3-8b/main/1/part-0", "weights/llama-3-8b/main/1/part-1"};
        u.manifest = {events::manifest_key(rid), "", "", events::payload_keys_sha256(u.keys), 2, 2000};
        std::string body = "{\"files\":[\"" + u.keys[0] + "\",\"" + u.keys[1] + "\",]}";
        u.manifest.manifest_sha256 = events::sha256_hex(body);
        auto c = commit(rid, 1, u);
        REQUIRE_MESSAGE(c.ok(), c.error().to_string());
      },
      [&] { REQUIRE(set_policy(rid, 2, {v1::RESIDENCY_COLD, 0.5, v1::MIGRATION_AUTO}).ok()); },
      [&] { REQUIRE(abort(other, 1).ok()); },
      [&] { REQUIRE(begin(other, 1, 10).ok()); },
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    CAPTURE(i);
    steps[i]();
    auto revisions = live_revisions();
    auto objects = live_index();
    restart();
    CHECK(live_revisions() == revisions);
    CHECK(live_index() == objects);
    CHECK(folded_revisions() == revisions);
  }
  // The tombstone's generation survived the restarts: a stale fence stays stale.
  CHECK(get_rev(other, true)->record.metadata_generation == 4);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "recovery: replay --until any point equals what the live system showed then") {
  struct point {
    uint64_t seq;
    std::map<events::revision_key, events::revision_record> revisions;
    events::object_index objects;
  };
  std::vector<point> history;
  auto remember = [&] { history.push_back({*memory->highest_seq(), live_revisions(), live_index()}); };
  auto rid = id();
  remember();
  REQUIRE(begin(rid, 3, 3000).ok());
  remember();
  auto u = put_revision(rid, 3, 1000);
  remember();
  REQUIRE(commit(rid, 1, u).ok());
  remember();
  REQUIRE(set_policy(rid, 2, {v1::RESIDENCY_HOT, 0.5, v1::MIGRATION_MANUAL}).ok());
  remember();
  REQUIRE(remove_rev(rid, 3).ok());
  remember();
  REQUIRE(begin(rid, 1, 1).ok());
  remember();
  for (const auto& p : history) {
    CAPTURE(p.seq);
    persistence::fold_options o;
    o.until_seq = p.seq;
    auto replayed = persistence::fold_journal(*memory, o);
    REQUIRE(replayed.ok());
    CHECK(replayed->revisions.revisions == p.revisions);
    CHECK(replayed->objects == p.objects);
  }
}

TEST_CASE_FIXTURE(lifecycle_fixture, "recovery: a deletion interrupted by a journal failure finishes after restart") {
  auto rid = id();
  REQUIRE(begin(rid, 2, 2000).ok());
  auto u = put_revision(rid, 2, 1000);
  // The abort appends: import_aborted, the payload batch, the manifest, revision_deleted.
  journal->inject(persistence::fault::fail_write, 4);
  auto r = abort(rid, 1);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == errc::durability_failed);
  CHECK(get_rev(rid, true)->record.availability == v1::DELETING);
  restart();
  sched.run();
  auto after = get_rev(rid, true);
  REQUIRE(after.ok());
  CHECK(after->record.availability == v1::DELETED);
  CHECK(after->record.residency == v1::RESIDENCY_ABSENT);
  for (const auto& k : u.keys) CHECK_FALSE(get(k).ok());
  CHECK(live_revisions() == folded_revisions());
}

TEST_CASE_FIXTURE(lifecycle_fixture, "recovery: invariants hold after every event of the journal") {
  auto rid = id();
  ready(rid, 2, 100, events::policy{v1::RESIDENCY_COLD, 0.5, v1::MIGRATION_AUTO});
  REQUIRE(begin(id("x"), 1, 1).ok());
  REQUIRE(abort(id("x"), 1).ok());
  persistence::fold_options o;
  uint64_t checked = 0;
  o.after_each = [&](const events::store_state& s, const v1::Envelope& e) -> status {
    if (!events::is_revision_event(e)) return {};
    ++checked;
    return events::check_touched(s, e);
  };
  auto folded = persistence::fold_journal(*memory, o);
  REQUIRE_MESSAGE(folded.ok(), folded.error().to_string());
  CHECK(checked >= 5);
}
