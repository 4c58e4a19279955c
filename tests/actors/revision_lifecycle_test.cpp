// SPEC §4 for BeginImport, CommitImport, AbortImport, GetRevision,
// ListRevisions, UpdatePolicy and RemoveRevision: one case per rule, named
// after it, on the deterministic scheduler with real objects.
#include <doctest/doctest.h>

#include "lifecycle_fixture.hpp"
#include "events/digest.hpp"

using namespace weightd;
using namespace weightd::test;
namespace v1 = events::v1;

namespace {
events::policy policy(v1::Residency preferred, v1::MigrationMode mode = v1::MIGRATION_AUTO,
                      double ratio = 0.5) {
  return {preferred, ratio, mode};
}
}  // namespace

// ------------------------------------------------------------- the slice

TEST_CASE_FIXTURE(lifecycle_fixture, "lifecycle: happy path with generations 1 -> 2 -> 3") {
  auto rid = id();
  auto b = begin(rid, 3, 3000);
  REQUIRE(b.ok());
  CHECK(b->record.availability == v1::IMPORTING);
  CHECK(b->record.residency == v1::RESIDENCY_UNKNOWN);
  CHECK(b->record.metadata_generation == 1);
  CHECK(b->record.payload_group_id == events::payload_group_id(rid));
  auto u = put_revision(rid, 3, 1000);
  auto c = commit(rid, 1, u);
  REQUIRE_MESSAGE(c.ok(), c.error().to_string());
  CHECK(c->record.availability == v1::READY);
  CHECK(c->record.residency == v1::RESIDENCY_HOT);
  CHECK(c->record.metadata_generation == 2);
  CHECK(c->record.manifest.manifest_key == "weights/default/llama-3-8b/main/1/manifest");
  CHECK(c->record.payload_keys == u.keys);
  auto p = set_policy(rid, 2, policy(v1::RESIDENCY_HOT, v1::MIGRATION_MANUAL));
  REQUIRE(p.ok());
  CHECK(p->record.metadata_generation == 3);
  CHECK(p->record.policy.mode == v1::MIGRATION_MANUAL);
  CHECK(get_rev(rid)->record.metadata_generation == 3);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "lifecycle: a stale policy update is STALE_GENERATION and changes nothing") {
  auto rid = id();
  ready(rid);
  auto stale = set_policy(rid, 1, policy(v1::RESIDENCY_HOT, v1::MIGRATION_MANUAL));
  REQUIRE_FALSE(stale.ok());
  CHECK(stale.error().code() == errc::stale_generation);
  CHECK(stale.error().message().find("re-read the revision and retry") != std::string::npos);
  CHECK(get_rev(rid)->record.metadata_generation == 2);
  CHECK(get_rev(rid)->record.policy.mode == v1::MIGRATION_AUTO);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "lifecycle: a duplicate Begin after READY returns the record") {
  auto rid = id();
  auto [view, u] = ready(rid);
  auto again = begin(rid, 3, 3000);
  REQUIRE(again.ok());
  CHECK(again->record == view.record);
  auto other = begin(rid, 4, 3000);
  REQUIRE_FALSE(other.ok());
  CHECK(other.error().code() == errc::conflict);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "lifecycle: Begin is idempotent while IMPORTING") {
  auto rid = id();
  auto first = begin(rid, 2, 10);
  auto second = begin(rid, 2, 10);
  REQUIRE(second.ok());
  CHECK(second->record == first->record);
  CHECK(events_of_type("import_begun").size() == 1);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "lifecycle: abort then re-Begin on the tombstone continues the generation") {
  auto rid = id();
  REQUIRE(begin(rid, 2, 10).ok());
  auto aborted = abort(rid, 1);
  REQUIRE_MESSAGE(aborted.ok(), aborted.error().to_string());
  CHECK(aborted->view.record.availability == v1::DELETED);
  CHECK(aborted->view.record.residency == v1::RESIDENCY_ABSENT);
  CHECK(aborted->view.record.metadata_generation == 3);  // DELETING (2), DELETED (3)
  auto again = begin(rid, 2, 10);
  REQUIRE(again.ok());
  CHECK(again->record.availability == v1::IMPORTING);
  CHECK(again->record.metadata_generation == 4);  // stale fences stay stale
  CHECK(abort(rid, 1).error().code() == errc::stale_generation);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "lifecycle: remove returns the payload keys then the manifest") {
  auto rid = id();
  auto [view, u] = ready(rid, 3);
  auto removed = remove_rev(rid, 2);
  REQUIRE_MESSAGE(removed.ok(), removed.error().to_string());
  auto expected = u.keys;
  expected.push_back(u.manifest.manifest_key);
  CHECK(removed->removed_keys == expected);
  CHECK(removed->view.record.availability == v1::DELETED);
  CHECK(removed->view.record.residency == v1::RESIDENCY_ABSENT);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "lifecycle: remove deletes the objects") {
  auto rid = id();
  auto [view, u] = ready(rid, 2);
  REQUIRE(remove_rev(rid, 2).ok());
  sched.run();
  for (const auto& k : u.keys) CHECK(get(k).error().code() == errc::not_found);
  CHECK(get(u.manifest.manifest_key).error().code() == errc::not_found);
  CHECK(files_in("hot", "objects") == 0);
  CHECK(get_rev(rid).error().code() == errc::not_found);
  CHECK(get_rev(rid, true)->record.availability == v1::DELETED);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "lifecycle: commit with a missing payload is NOT_FOUND and the revision stays invisible") {
  auto rid = id();
  REQUIRE(begin(rid, 3, 3000).ok());
  auto u = put_revision(rid, 3, 1000);
  REQUIRE(remove(u.keys[1], true).ok());  // allowed: the revision is IMPORTING
  auto c = commit(rid, 1, u);
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().code() == errc::not_found);
  CHECK(c.error().message().find("payload '" + u.keys[1] + "' not found") == 0);
  CHECK(get_rev(rid).error().code() == errc::not_found);
  CHECK(get_rev(rid, true)->record.availability == v1::IMPORTING);
  CHECK(list()->revisions.empty());
}

// ------------------------------------------------------------- BeginImport

TEST_CASE_FIXTURE(lifecycle_fixture, "begin: bad input names the field and changes nothing") {
  CHECK(begin(id(), 0, 10).error().message() == "expected_payload_count must be at least 1");
  CHECK(begin(id(), 1, 0).error().message() == "expected_logical_bytes must be at least 1");
  CHECK(begin(id("", "main"), 1, 1).error().message() == "id.resource is empty");
  CHECK(begin(id("m", "main", 0), 1, 1).error().message() ==
        "id.weight_generation must be at least 1");
  actors::begin_import cmd{id(), "weight:0000", 1, 1, false, {}, 0, "", "", {}};
  auto bad_group = ask<actors::revision_view>(registry(), cmd);
  CHECK(bad_group.error().code() == errc::invalid_argument);
  CHECK(bad_group.error().message().find("payload_group_id is not the canonical") == 0);
  auto bad_ratio = begin(id(), 1, 1, policy(v1::RESIDENCY_MIXED, v1::MIGRATION_AUTO, 1.5), 2);
  CHECK(bad_ratio.error().message() == "policy.mixed_hot_ratio must be within (0, 1)");
  CHECK(memory->highest_seq().value() == 1);  // only the startup event
}

TEST_CASE_FIXTURE(lifecycle_fixture, "begin: MIXED with fewer than 2 affinity units is POLICY_UNSATISFIABLE") {
  auto r = begin(id(), 4, 40, policy(v1::RESIDENCY_MIXED), 1);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == errc::policy_unsatisfiable);
  CHECK(begin(id(), 4, 40, policy(v1::RESIDENCY_MIXED), 2).ok());
}

TEST_CASE_FIXTURE(lifecycle_fixture, "begin: the default policy is HOT, AUTO, ratio 0.5") {
  auto b = begin(id(), 1, 1);
  CHECK(b->record.policy == policy(v1::RESIDENCY_HOT, v1::MIGRATION_AUTO, 0.5));
}

// ------------------------------------------------------------ CommitImport

TEST_CASE_FIXTURE(lifecycle_fixture, "commit: a non-canonical manifest key is INVALID_ARGUMENT") {
  auto rid = id();
  REQUIRE(begin(rid, 2, 2000).ok());
  auto u = put_revision(rid, 2, 1000);
  u.manifest.manifest_key = "weights/elsewhere/manifest";
  auto c = commit(rid, 1, u);
  CHECK(c.error().code() == errc::invalid_argument);
  CHECK(c.error().message().find("manifest.manifest_key is not canonical") == 0);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "commit: an empty group and a missing manifest are NOT_FOUND") {
  auto rid = id();
  REQUIRE(begin(rid, 2, 2000).ok());
  lifecycle_fixture::upload u;
  u.keys = {"weights/a", "weights/b"};
  u.manifest = {events::manifest_key(rid), std::string(64, 'a'), "",
                events::payload_keys_sha256(u.keys), 2, 2000};
  auto empty = commit(rid, 1, u);
  CHECK(empty.error().code() == errc::not_found);
  CHECK(empty.error().message().find("has no objects") != std::string::npos);
  auto real = put_revision(rid, 2, 1000);
  REQUIRE(remove(real.manifest.manifest_key, true).ok());
  auto no_manifest = commit(rid, 1, real);
  CHECK(no_manifest.error().code() == errc::not_found);
  CHECK(no_manifest.error().message().find("manifest '") == 0);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "commit: group mismatches are CONFLICT and say which") {
  auto rid = id();
  REQUIRE(begin(rid, 2, 2000, std::nullopt, 2).ok());
  auto u = put_revision(rid, 2, 1000);
  auto expect_conflict = [&](lifecycle_fixture::upload up, const std::string& says) {
    auto c = commit(rid, 1, up);
    REQUIRE_FALSE(c.ok());
    CHECK(c.error().code() == errc::conflict);
    CHECK_MESSAGE(c.error().message().find(says) != std::string::npos, c.error().message());
  };
  auto digest = u;
  digest.manifest.payload_keys_sha256 = std::string(64, '0');
  expect_conflict(digest, "payload_keys_sha256 does not match");
  auto sha = u;
  sha.manifest.manifest_sha256 = std::string(64, 'b');
  expect_conflict(sha, "the manifest object's sha256 is");
  auto bytes = u;
  bytes.manifest.logical_bytes = 1999;
  expect_conflict(bytes, "differs from BeginImport's expected_logical_bytes");
  // a stray member
  auto stray = request("weights/stray", "x");
  stray.group_id = events::payload_group_id(rid);
  stray.data_type = v1::DATA_TYPE_WEIGHT;
  REQUIRE(put(stray, "x").ok());
  expect_conflict(u, "stray member 'weights/stray'");
  REQUIRE(remove("weights/stray", true).ok());
  // a payload outside the group
  auto outside = u;
  REQUIRE(put("weights/elsewhere", pattern(1000)).ok());
  outside.keys[1] = "weights/elsewhere";
  outside.manifest.payload_keys_sha256 = events::payload_keys_sha256(outside.keys);
  expect_conflict(outside, "payload 'weights/elsewhere' is outside group");
  CHECK(commit(rid, 1, u).ok());  // the real one still commits
}

TEST_CASE_FIXTURE(lifecycle_fixture, "commit: wrong data types and affinity counts are CONFLICT") {
  auto rid = id();
  REQUIRE(begin(rid, 2, 2000, std::nullopt, 3).ok());  // claims 3 affinity units
  auto u = put_revision(rid, 2, 1000);                 // has 2
  auto c = commit(rid, 1, u);
  CHECK(c.error().code() == errc::conflict);
  CHECK(c.error().message() ==
        "the payloads carry 2 distinct affinity ids but BeginImport said affinity_count 3");

  auto rid2 = id("other");
  REQUIRE(begin(rid2, 1, 5).ok());
  auto general = request("weights/general", "12345");
  general.group_id = events::payload_group_id(rid2);  // GENERAL, not WEIGHT
  REQUIRE(put(general, "12345").ok());
  std::string body = "{}";
  auto manifest = request(events::manifest_key(rid2), body);
  manifest.group_id = events::payload_group_id(rid2);
  manifest.data_type = v1::DATA_TYPE_METADATA;
  REQUIRE(put(manifest, body).ok());
  lifecycle_fixture::upload u2;
  u2.keys = {"weights/general"};
  u2.manifest = {events::manifest_key(rid2), events::sha256_hex(body), "",
                 events::payload_keys_sha256(u2.keys), 1, 5};
  auto c2 = commit(rid2, 1, u2);
  CHECK(c2.error().code() == errc::conflict);
  CHECK(c2.error().message() == "payload 'weights/general' must have data_type WEIGHT");
}

TEST_CASE_FIXTURE(lifecycle_fixture, "commit: an unreadable member is NOT_READY") {
  auto rid = id();
  REQUIRE(begin(rid, 2, 2000).ok());
  auto u = put_revision(rid, 2, 1000);
  auto path = get(u.keys[0])->path;
  stop();
  std::filesystem::remove(path);  // the HOT file is lost: the replica is dropped at startup
  start();
  auto c = commit(rid, 1, u);
  CHECK(c.error().code() == errc::not_ready);
  CHECK(c.error().message().find("has no readable replica") != std::string::npos);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "commit: a retry of the same commit returns the record, another generation is stale") {
  auto rid = id();
  REQUIRE(begin(rid, 2, 2000).ok());
  auto u = put_revision(rid, 2, 1000);
  auto first = commit(rid, 1, u);
  REQUIRE(first.ok());
  auto retry = commit(rid, 1, u);  // expected = current - 1
  REQUIRE(retry.ok());
  CHECK(retry->record == first->record);
  CHECK(commit(rid, 2, u).ok());  // expected = current
  CHECK(commit(rid, 5, u).error().code() == errc::stale_generation);
  CHECK(events_of_type("import_committed").size() == 1);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "commit: a preferred residency other than HOT starts a migration in the same event") {
  auto rid = id();
  put_tier = v1::TIER_HOT;  // uploaded to HOT although the revision prefers COLD
  auto [view, u] = ready(rid, 2, 1000, policy(v1::RESIDENCY_COLD));
  CHECK(view.record.availability == v1::READY);
  CHECK(view.record.residency == v1::RESIDENCY_HOT);
  REQUIRE(view.operation);
  CHECK(view.operation->kind == v1::MIGRATING);
  CHECK(view.operation->target == v1::RESIDENCY_COLD);
  CHECK(view.operation->total_units == 2);
  CHECK(view.operation->total_bytes == 2000);
  CHECK(view.operation->state == events::operation_state::running);
  CHECK(view.record.operation_id == view.operation->id);
  CHECK(events_of_type("import_committed").size() == 1);
}

// ------------------------------------------------------------- AbortImport

TEST_CASE_FIXTURE(lifecycle_fixture, "abort: removes the group, then the listed keys it may touch, manifest last") {
  auto rid = id();
  REQUIRE(begin(rid, 2, 2000).ok());
  auto u = put_revision(rid, 2, 1000);
  REQUIRE(put("scratch/upload-log", "ungrouped").ok());
  auto foreign = request("weights/foreign", "x");
  foreign.group_id = "weight:someone-else";
  REQUIRE(put(foreign, "x").ok());
  auto r = abort(rid, 1, {"scratch/upload-log", "", "weights/foreign", "never/existed",
                          "scratch/upload-log"});
  REQUIRE_MESSAGE(r.ok(), r.error().to_string());
  CHECK(r->removed_keys.back() == u.manifest.manifest_key);
  // 2 payloads, the log, the absent key (already absent counts), the manifest
  CHECK(r->removed_keys == std::vector<std::string>{u.keys[0], u.keys[1], "scratch/upload-log",
                                                    "never/existed", u.manifest.manifest_key});
  REQUIRE(r->refused_keys.size() == 1);
  CHECK(r->refused_keys[0].key == "weights/foreign");
  CHECK(r->refused_keys[0].reason.find("another group") != std::string::npos);
  sched.run();
  CHECK(get("weights/foreign").ok());
  CHECK_FALSE(get("scratch/upload-log").ok());
  CHECK(r->view.record.availability == v1::DELETED);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "abort: only from IMPORTING, DELETED just comes back") {
  auto rid = id();
  ready(rid);
  CHECK(abort(rid, 2).error().code() == errc::conflict);
  REQUIRE(remove_rev(rid, 2).ok());
  auto again = abort(rid, 999);  // any generation: it is already gone
  REQUIRE(again.ok());
  CHECK(again->view.record.availability == v1::DELETED);
  CHECK(abort(id("never"), 1).error().code() == errc::not_found);
}

// --------------------------------------------------- GetRevision, listing

TEST_CASE_FIXTURE(lifecycle_fixture, "get: hidden states are NOT_FOUND unless include_hidden") {
  auto rid = id();
  REQUIRE(begin(rid, 1, 1).ok());
  auto hidden = get_rev(rid);
  CHECK(hidden.error().code() == errc::not_found);
  CHECK(hidden.error().message().find("IMPORTING; pass include_hidden") != std::string::npos);
  CHECK(get_rev(rid, true)->record.availability == v1::IMPORTING);
  CHECK(get_rev(id("unknown")).error().code() == errc::not_found);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "list: READY revisions ordered by resource, revision, generation, paged") {
  ready(id("b", "main", 1), 1);
  ready(id("a", "v2", 1), 1);
  ready(id("a", "main", 2), 1);
  ready(id("a", "main", 1), 1);
  REQUIRE(begin(id("a", "wip", 1), 1, 1).ok());  // IMPORTING: not listed by default
  auto all = list();
  REQUIRE(all.ok());
  std::vector<std::string> names;
  for (const auto& v : all->revisions) names.push_back(events::canonical_text(v.record.id));
  CHECK(names == std::vector<std::string>{"default/a@main#1", "default/a@main#2",
                                          "default/a@v2#1", "default/b@main#1"});
  actors::list_revisions q;
  q.limit = 3;
  auto page1 = list(q);
  CHECK(page1->revisions.size() == 3);
  REQUIRE_FALSE(page1->next_page_token.empty());
  q.page_token = page1->next_page_token;
  auto page2 = list(q);
  REQUIRE(page2->revisions.size() == 1);
  CHECK(page2->revisions[0].record.id.resource == "b");
  CHECK(page2->next_page_token.empty());
  actors::list_revisions only_a;
  only_a.resource = "a";
  only_a.states = {v1::IMPORTING};
  CHECK(list(only_a)->revisions.size() == 1);
  actors::list_revisions too_big;
  too_big.limit = 1001;
  CHECK(list(too_big).error().code() == errc::invalid_argument);
  actors::list_revisions bad_token;
  bad_token.page_token = "zz";
  CHECK(list(bad_token).error().code() == errc::invalid_argument);
}

// ------------------------------------------------------------ UpdatePolicy

TEST_CASE_FIXTURE(lifecycle_fixture, "policy: only on READY/DEGRADED, the same value is a no-op") {
  auto rid = id();
  REQUIRE(begin(rid, 3, 3000).ok());
  CHECK(set_policy(rid, 1, policy(v1::RESIDENCY_COLD)).error().code() == errc::not_ready);
  auto u = put_revision(rid, 3, 1000);
  REQUIRE(commit(rid, 1, u).ok());
  auto same = set_policy(rid, 2, policy(v1::RESIDENCY_HOT));
  REQUIRE(same.ok());
  CHECK(same->record.metadata_generation == 2);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "policy: switching to AUTO with another residency starts a migration, during it BUSY") {
  auto rid = id();
  ready(rid);
  REQUIRE(acquire(rid, "reader").ok());  // keeps the migration from finishing: its HOT drops wait
  auto moved = set_policy(rid, 2, policy(v1::RESIDENCY_COLD));
  REQUIRE(moved.ok());
  REQUIRE(moved->operation);
  CHECK(moved->operation->target == v1::RESIDENCY_COLD);
  auto busy = set_policy(rid, 3, policy(v1::RESIDENCY_HOT));
  CHECK(busy.error().code() == errc::busy);
  CHECK(busy.error().message().find("operation " + std::to_string(moved->operation->id)) == 0);
  auto remove_busy = remove_rev(rid, 3);
  CHECK(remove_busy.error().code() == errc::busy);
}

TEST_CASE_FIXTURE(lifecycle_fixture, "policy: MIXED needs two affinity units among the payloads") {
  auto rid = id();
  ready(rid, 1);
  CHECK(set_policy(rid, 2, policy(v1::RESIDENCY_MIXED)).error().code() ==
        errc::policy_unsatisfiable);
  auto rid2 = id("two");
  ready(rid2, 2);
  CHECK(set_policy(rid2, 2, policy(v1::RESIDENCY_MIXED, v1::MIGRATION_MANUAL)).ok());
}

// ---------------------------------------------------------- RemoveRevision

TEST_CASE_FIXTURE(lifecycle_fixture, "remove: IMPORTING is NOT_READY (use abort), stale is STALE_GENERATION") {
  auto rid = id();
  REQUIRE(begin(rid, 3, 3000).ok());
  auto r = remove_rev(rid, 1);
  CHECK(r.error().code() == errc::not_ready);
  CHECK(r.error().message().find("use AbortImport") != std::string::npos);
  auto u = put_revision(rid, 3, 1000);
  REQUIRE(commit(rid, 1, u).ok());
  CHECK(remove_rev(rid, 1).error().code() == errc::stale_generation);
  CHECK(remove_rev(rid, 2).ok());
}

// --------------------------------------------------------------- the guard

TEST_CASE_FIXTURE(lifecycle_fixture, "guard: members of a READY revision cannot be removed generically") {
  auto rid = id();
  auto [view, u] = ready(rid);
  auto refused = remove(u.keys[0], true);
  CHECK(refused.code() == errc::managed_object);
  CHECK(refused.message().find("default/llama-3-8b@main#1") != std::string::npos);
  auto evicted = ask<actors::eviction_summary>(store, actors::evict_atom::value, 0.0);
  CHECK(evicted->evicted_objects == 0);
  CHECK(evicted->skipped_managed == 4);
  REQUIRE(remove_rev(rid, 2).ok());
  CHECK(remove(u.keys[0]).code() == errc::not_found);  // gone with its revision
}
