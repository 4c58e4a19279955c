// The embedding facade: a host imports and reads a revision through futures,
// on the production (threaded, detached) actors with an LMDB journal; a second
// start on the same directories sees the same store.
#include <doctest/doctest.h>

#include "actors/embedded.hpp"
#include "events/identity.hpp"
#include "support.hpp"

using namespace weightd;
using namespace weightd::test;
namespace v1 = events::v1;

TEST_CASE("embedded: a host imports, commits, lists, leases and removes a revision through futures") {
  temp_dir dir;
  actors::node_config config;
  config.journal.dir = dir.path() / "journal";
  config.hot = {v1::TIER_HOT, dir.path() / "hot", 64 << 20, false};
  config.cold = {v1::TIER_COLD, dir.path() / "cold", 0, true};
  events::revision_key rid{"default", "default", "tiny", "main", 1};
  auto group = events::payload_group_id(rid);
  uint64_t held = 0;  // a lease taken before the restart
  {
    auto store = actors::embedded::start(config, 2);
    REQUIRE_MESSAGE(store.ok(), store.error().to_string());
    auto& s = **store;
    auto begun = s.begin_import({rid, "", 1, 5, false, {}, 0, "host", "req-1", {}}).get();
    REQUIRE_MESSAGE(begun.ok(), begun.error().to_string());
    actors::put_request payload;
    payload.key = "weights/tiny/part-0";
    payload.group_id = group;
    payload.data_type = v1::DATA_TYPE_WEIGHT;
    REQUIRE(s.put_object(payload, "hello").ok());
    actors::put_request manifest;
    manifest.key = events::manifest_key(rid);
    manifest.group_id = group;
    manifest.data_type = v1::DATA_TYPE_METADATA;
    auto m = s.put_object(manifest, "{\"files\":1}");
    REQUIRE(m.ok());
    events::manifest_ref ref{manifest.key, m->record.sha256, "",
                             events::payload_keys_sha256({payload.key}), 1, 5};
    auto committed = s.commit_import({rid, 1, ref, {payload.key}, "host", "req-2", {}}).get();
    REQUIRE_MESSAGE(committed.ok(), committed.error().to_string());
    CHECK(committed->record.availability == v1::READY);
    auto listed = s.list_revisions({}).get();
    REQUIRE(listed.ok());
    CHECK(listed->revisions.size() == 1);
    CHECK(s.stat_object("default", payload.key).get()->managed_by == "default/tiny@main#1");
    auto lease = s.acquire_lease({rid, 0, "host-reader", 600'000, "host", ""}).get();
    REQUIRE_MESSAGE(lease.ok(), lease.error().to_string());
    held = lease->lease.id;
  }
  {
    auto again = actors::embedded::start(config, 2);
    REQUIRE(again.ok());
    auto& s = **again;
    auto view = s.get_revision({rid, false}).get();
    REQUIRE(view.ok());
    CHECK(view->record.metadata_generation == 2);
    auto leases = s.list_leases({rid}).get();  // the lease outlived the restart
    REQUIRE(leases.ok());
    REQUIRE(leases->leases.size() == 1);
    CHECK(leases->leases[0].lease.holder == "host-reader");
    CHECK(s.remove_revision({rid, 2, 0, "host", ""}).get().error().code() == errc::busy);
    CHECK(s.renew_lease({held, 900'000, "host", ""}).get().ok());
    CHECK(s.revoke_lease({held, "host is done", "host", ""}).get().ok());
    CHECK(s.release_lease({held, "host", ""}).get().ok());  // already ended: still fine
    auto removed = s.remove_revision({rid, 2, 0, "host", "req-3"}).get();
    REQUIRE(removed.ok());
    CHECK(removed->removed_keys.size() == 2);
    CHECK(s.stat_object("default", "weights/tiny/part-0").get().error().code() == errc::not_found);
  }
}

TEST_CASE("embedded: a host's commands pass the same validation boundary as a gRPC client's") {
  temp_dir dir;
  actors::node_config config;
  config.journal.dir = dir.path() / "journal";
  config.hot = {v1::TIER_HOT, dir.path() / "hot", 16 << 20, false};
  config.cold = {v1::TIER_COLD, dir.path() / "cold", 0, true};
  auto store = actors::embedded::start(config, 2);
  REQUIRE_MESSAGE(store.ok(), store.error().to_string());
  auto& s = **store;
  events::revision_key rid{"default", "default", "tiny", "main", 1};
  auto spaced = s.begin_import({rid, "", 1, 5, false, {}, 0, "host", "has space", {}}).get();
  REQUIRE_FALSE(spaced.ok());
  CHECK(spaced.error().code() == errc::invalid_argument);
  CHECK(spaced.error().message().find("request_id") != std::string::npos);
  auto forever = s.acquire_lease({rid, 0, "reader", 0, "host", ""}).get();
  REQUIRE_FALSE(forever.ok());
  CHECK(forever.error().code() == errc::invalid_argument);
  CHECK(forever.error().message().find("ttl_ms") != std::string::npos);
  CHECK(s.list_revisions({}).get()->revisions.empty());  // nothing changed
}
