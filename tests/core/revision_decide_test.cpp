// decide functions on their own: rules that are hard to reach through actors.
#include <doctest/doctest.h>

#include "core/revision_decide.hpp"
#include "events/revision_fold.hpp"

using namespace weightd;
using namespace weightd::actors;
namespace v1 = events::v1;

namespace {
decide_context ctx() {
  static uint64_t ids = 0, lease_ids = 0;
  return {1000, {}, [] { return ++ids; }, [] { return ++lease_ids; }};
}
events::revision_key rid() { return {"default", "default", "m", "r", 1}; }

/// Folds `d`'s events into `index`.
void apply(events::revision_index& index, const result<decision>& d, uint64_t& seq) {
  REQUIRE(d.ok());
  for (auto e : d->events) {
    e.set_global_seq(++seq);
    REQUIRE(events::evolve_revisions(index, e).ok());
  }
}
}  // namespace

TEST_CASE("decide: Begin over a tombstone at the maximum generation is GENERATION_EXHAUSTED") {
  events::revision_record tomb;
  tomb.id = rid();
  tomb.availability = v1::DELETED;
  tomb.residency = v1::RESIDENCY_ABSENT;
  tomb.metadata_generation = std::numeric_limits<uint64_t>::max();
  auto d = decide_begin(&tomb, {rid(), "", 1, 1, false, {}, 0, "", ""}, ctx());
  REQUIRE_FALSE(d.ok());
  CHECK(d.error().code() == errc::generation_exhausted);
}

TEST_CASE("decide: an abort of a DELETING revision changes nothing, whatever its generation") {
  events::revision_index index;
  uint64_t seq = 0;
  apply(index, decide_begin(nullptr, {rid(), "", 1, 1, false, {}, 0, "", ""}, ctx()), seq);
  abort_import first{rid(), 1, {"a", "", "b", "a"}, "", ""};
  auto decided = decide_abort(index.find(rid()), first, ctx());
  REQUIRE(decided.ok());
  const auto& keys = decided->events[0].import_aborted().keys_to_remove();
  CHECK(std::vector<std::string>(keys.begin(), keys.end()) == std::vector<std::string>{"a", "b"});
  apply(index, decided, seq);
  CHECK(index.find(rid())->availability == v1::DELETING);
  auto again = decide_abort(index.find(rid()), {rid(), 77, {}, "", ""}, ctx());
  REQUIRE(again.ok());
  CHECK_FALSE(again->changes());
}

TEST_CASE("decide: a retried policy update is recognised by its digest") {
  events::revision_index index;
  uint64_t seq = 0;
  apply(index, decide_begin(nullptr, {rid(), "", 1, 1, false, {}, 0, "", ""}, ctx()), seq);
  // Fold a commit directly (its group checks are the actor's business).
  v1::Envelope e;
  e.set_global_seq(++seq);
  auto* c = e.mutable_import_committed();
  *c->mutable_id() = rid().to_proto();
  c->mutable_manifest()->set_manifest_key(events::manifest_key(rid()));
  c->set_affinity_units(2);
  REQUIRE(events::evolve_revisions(index, e).ok());
  update_policy cmd{rid(), 2, {v1::RESIDENCY_HOT, 0.3, v1::MIGRATION_MANUAL}, "", ""};
  apply(index, decide_update_policy(index.find(rid()), index, cmd, ctx()), seq);
  CHECK(index.find(rid())->metadata_generation == 3);
  auto retry = decide_update_policy(index.find(rid()), index, cmd, ctx());  // expected 2 = current - 1
  REQUIRE(retry.ok());
  CHECK_FALSE(retry->changes());
  update_policy different{rid(), 2, {v1::RESIDENCY_HOT, 0.4, v1::MIGRATION_MANUAL}, "", ""};
  CHECK(decide_update_policy(index.find(rid()), index, different, ctx()).error().code() ==
        errc::stale_generation);
}

TEST_CASE("decide: request digests depend on the operation and every argument") {
  CHECK(request_digest("A", {"x"}) != request_digest("B", {"x"}));
  CHECK(request_digest("A", {"x", "y"}) != request_digest("A", {"xy"}));
  CHECK(request_digest("A", {"x"}).size() == 64);
}

TEST_CASE("decide: a malformed commit is INVALID_ARGUMENT naming the field, even for an unknown revision") {
  commit_import cmd;
  cmd.id = rid();
  cmd.manifest.manifest_key = events::manifest_key(rid());
  cmd.manifest.manifest_sha256 = "abc";  // 3 characters, not 64
  auto d = precheck_commit(nullptr, cmd);
  REQUIRE_FALSE(d.ok());
  CHECK(d.error().code() == errc::invalid_argument);
  CHECK(d.error().message().find("manifest.manifest_sha256") != std::string::npos);
}
