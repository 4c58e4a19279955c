// node::stop's gate (actors/stop_gate.hpp): a stop in the middle of a
// commit, a migration and a removal lets each reach its next durable point
// and starts no further step; the next start in the same process opens the
// same journal and carries on from exactly what was committed.
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <thread>

#include "actors/embedded.hpp"
#include "events/identity.hpp"
#include "persistence/faulty_journal.hpp"
#include "persistence/lmdb_journal.hpp"
#include "support.hpp"

using namespace weightd;
using namespace weightd::test;
namespace v1 = events::v1;

namespace {

actors::node_config stop_config(const temp_dir& dir) {
  actors::node_config config;
  config.journal.dir = dir.path() / "journal";
  config.hot = {v1::TIER_HOT, dir.path() / "hot", 256 << 20, false};
  config.cold = {v1::TIER_COLD, dir.path() / "cold", 0, true};
  config.reconciler.interval = std::chrono::milliseconds(50);
  return config;
}

events::revision_key revision_named(const std::string& resource) {
  return {"default", "default", resource, "main", 1};
}

/// Begins `rid` and puts its `files` payloads and manifest; returns the
/// commit that would make it READY.
actors::commit_import upload(actors::embedded& s, const events::revision_key& rid, size_t files,
                             size_t bytes_each) {
  auto begun = s.begin_import({rid, "", files, files * bytes_each, false, {}, 0, "host", "", {}}).get();
  REQUIRE_MESSAGE(begun.ok(), begun.error().to_string());
  auto group = events::payload_group_id(rid);
  std::vector<std::string> keys;
  for (size_t i = 0; i < files; ++i) {
    actors::put_request p;
    p.key = "weights/" + rid.resource + "/part-" + std::to_string(i);
    p.group_id = group;
    p.data_type = v1::DATA_TYPE_WEIGHT;
    REQUIRE(s.put_object(p, std::string(bytes_each, 'w')).ok());
    keys.push_back(p.key);
  }
  actors::put_request manifest;
  manifest.key = events::manifest_key(rid);
  manifest.group_id = group;
  manifest.data_type = v1::DATA_TYPE_METADATA;
  auto m = s.put_object(manifest, "{}");
  REQUIRE(m.ok());
  events::manifest_ref ref{manifest.key, m->record.sha256, "", events::payload_keys_sha256(keys),
                           files, files * bytes_each};
  return {rid, 1, ref, keys, "host", "", {}};
}

void commit(actors::embedded& s, const actors::commit_import& cmd) {
  auto committed = s.commit_import(cmd).get();
  REQUIRE_MESSAGE(committed.ok(), committed.error().to_string());
}

/// Waits (bounded) until `ready` holds for the revision's record.
template <class Pred>
events::revision_record wait_for(actors::embedded& s, const events::revision_key& rid, Pred ready) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (true) {
    auto view = s.get_revision({rid, true}).get();
    REQUIRE_MESSAGE(view.ok(), view.error().to_string());
    if (ready(view->record) || std::chrono::steady_clock::now() > deadline) return view->record;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

TEST_CASE("node stop: a stop amid a commit, a migration and a removal waits for their journal "
          "commit, starts no further step, and the next start in the same process carries on") {
  temp_dir dir;
  auto config = stop_config(dir);
  auto pending = revision_named("pending");  // its commit is in flight at the stop
  auto moving = revision_named("moving");    // its migration has just been accepted
  auto going = revision_named("going");      // its removal has just begun
  actors::commit_import pending_commit;
  {
    auto lmdb = persistence::lmdb_journal::open(config.journal);
    REQUIRE(lmdb.ok());
    auto disk = std::make_shared<persistence::faulty_journal>(std::move(*lmdb));
    auto store = actors::embedded::start(config, 2, disk);
    REQUIRE_MESSAGE(store.ok(), store.error().to_string());
    auto& s = **store;
    pending_commit = upload(s, pending, 4, 1024);
    commit(s, upload(s, moving, 4, 64 << 10));
    commit(s, upload(s, going, 130, 64));  // three batches of removal

    // The disk stalls: the three commands have decided and wait for their
    // journal commit when the stop begins.
    disk->hold_appends();
    auto committing = s.commit_import(pending_commit);
    auto removing = s.remove_revision({going, 2, 0, "host", ""});
    auto migrating = std::async(std::launch::async, [&] {
      caf::scoped_actor asker{s.system()};
      result<events::operation_record> out = status{errc::internal, "no answer"};
      asker
          ->request(s.handles().registry(), std::chrono::seconds(30),
                    actors::migrate_revision{moving, 2, v1::RESIDENCY_COLD, 0, "host", ""})
          .receive([&](events::operation_record& op) { out = op; },
                   [&](caf::error& err) { out = actors::to_status(err); });
      return out;
    });
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (s.handles().gate().inside() < 3 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    REQUIRE(s.handles().gate().inside() >= 3);  // (a reconciler tick may hold it too)

    auto stopping = std::async(std::launch::async, [&] { s.handles().stop(); });
    CHECK(stopping.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);
    disk->release_appends();  // the disk is back: they commit, then stop() returns
    REQUIRE(stopping.wait_for(actors::node::kStopWait * 2) == std::future_status::ready);
    CHECK(s.handles().gate().inside() == 0);

    auto committed = committing.get();
    CHECK_MESSAGE(committed.ok(), committed.error().to_string());
    auto migration = migrating.get();
    REQUIRE_MESSAGE(migration.ok(), migration.error().to_string());
    CHECK(migration->processed_units == 0);  // accepted; no round started once stopping
    auto removal = removing.get();
    REQUIRE_FALSE(removal.ok());  // it stopped before its first batch of deletions
    CHECK(removal.error().code() == errc::busy);
    CHECK(removal.error().message().find("stays DELETING") != std::string::npos);
    CHECK_FALSE(s.handles().backend());  // the node let go of the journal
  }
  // The same journal, the same process: it opens, and writes go on after
  // what the stopped node committed (no sequence number taken twice).
  auto again = actors::embedded::start(config, 2);
  REQUIRE_MESSAGE(again.ok(), again.error().to_string());
  auto& s = **again;
  CHECK(s.get_revision({pending, false}).get()->record.availability == v1::READY);
  // The migration resumes and ends; the removal resumes and ends.
  auto m = wait_for(s, moving, [](const auto& r) { return r.operation_id == 0; });
  CHECK(m.residency == v1::RESIDENCY_COLD);
  auto g = wait_for(s, going, [](const auto& r) { return r.availability == v1::DELETED; });
  CHECK(g.availability == v1::DELETED);
  auto lease = s.acquire_lease({pending, 0, "reader", 60'000, "host", ""}).get();
  CHECK_MESSAGE(lease.ok(), lease.error().to_string());
}

TEST_CASE("node stop: once the gate is closed, commands are refused (BUSY) and reads are answered") {
  temp_dir dir;
  auto store = actors::embedded::start(stop_config(dir), 2);
  REQUIRE_MESSAGE(store.ok(), store.error().to_string());
  auto& s = **store;
  auto rid = revision_named("tiny");
  commit(s, upload(s, rid, 1, 16));
  s.handles().gate().close();
  auto refused = s.acquire_lease({rid, 0, "reader", 60'000, "host", ""}).get();
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code() == errc::busy);  // UNAVAILABLE over gRPC: retry later
  CHECK(refused.error().message().find("stopping") != std::string::npos);
  auto removed = s.remove_revision({rid, 2, 0, "host", ""}).get();
  REQUIRE_FALSE(removed.ok());
  CHECK(removed.error().code() == errc::busy);
  auto read = s.get_revision({rid, false}).get();
  REQUIRE(read.ok());
  CHECK(read->record.availability == v1::READY);
}
