// evolve(): the fold of object and system events, and its refusals.
#include <doctest/doctest.h>

#include "events/evolve.hpp"
#include "events/upcast.hpp"

using namespace weightd;
using namespace weightd::events;

namespace {

v1::Envelope at(uint64_t seq, int64_t ms = 1000) {
  v1::Envelope e;
  e.set_global_seq(seq);
  e.set_timestamp_ms(ms);
  return e;
}

v1::Envelope put(uint64_t seq, const std::string& key, uint64_t size, v1::Tier tier) {
  auto e = at(seq, 1000 + static_cast<int64_t>(seq));
  auto* p = e.mutable_object_put();
  p->set_tenant("default");
  p->set_key(key);
  p->set_size(size);
  p->set_tier(tier);
  p->set_data_type(v1::DATA_TYPE_WEIGHT);
  p->set_group_id("weight:abc");
  return e;
}

}  // namespace

TEST_CASE("evolve: a put registers the object with its first replica and creation time") {
  store_state s;
  REQUIRE(evolve(s, put(1, "a", 100, v1::TIER_HOT)).ok());
  const auto& o = s.objects.objects.at({"default", "a"});
  CHECK(o.hot);
  CHECK_FALSE(o.cold);
  CHECK(o.size == 100);
  CHECK(o.group_id == "weight:abc");
  CHECK(o.created_at_ms == 1001);
  CHECK(s.objects.hot_bytes == 100);
  CHECK(s.applied_seq == 1);
}

TEST_CASE("evolve: replicas come and go and tier bytes follow") {
  store_state s;
  REQUIRE(evolve(s, put(1, "a", 100, v1::TIER_HOT)).ok());
  auto added = at(2);
  added.mutable_replica_added()->set_tenant("default");
  added.mutable_replica_added()->set_key("a");
  added.mutable_replica_added()->set_tier(v1::TIER_COLD);
  REQUIRE(evolve(s, added).ok());
  CHECK(s.objects.cold_bytes == 100);
  auto dropped = at(3);
  dropped.mutable_replica_dropped()->set_tenant("default");
  dropped.mutable_replica_dropped()->set_key("a");
  dropped.mutable_replica_dropped()->set_tier(v1::TIER_HOT);
  REQUIRE(evolve(s, dropped).ok());
  CHECK(s.objects.hot_bytes == 0);
  CHECK(s.objects.objects.at({"default", "a"}).readable());
  auto removed = at(4);
  removed.mutable_object_removed()->set_tenant("default");
  removed.mutable_object_removed()->set_key("a");
  REQUIRE(evolve(s, removed).ok());
  CHECK(s.objects.objects.empty());
  CHECK(s.objects.cold_bytes == 0);
}

TEST_CASE("evolve: tenants have separate key spaces") {
  store_state s;
  REQUIRE(evolve(s, put(1, "a", 1, v1::TIER_HOT)).ok());
  auto other = put(2, "a", 2, v1::TIER_COLD);
  other.mutable_object_put()->set_tenant("acme");
  REQUIRE(evolve(s, other).ok());
  CHECK(s.objects.objects.size() == 2);
}

TEST_CASE("evolve: an event that cannot apply is refused with its seq and changes nothing") {
  store_state s;
  REQUIRE(evolve(s, put(1, "a", 100, v1::TIER_HOT)).ok());
  auto before = s;
  auto twice = evolve(s, put(2, "a", 100, v1::TIER_HOT));
  CHECK_FALSE(twice.ok());
  CHECK(twice.message().find("event seq 2 (object_put)") != std::string::npos);
  CHECK(s == before);

  auto unknown = at(2);
  unknown.mutable_replica_added()->set_key("nope");
  unknown.mutable_replica_added()->set_tier(v1::TIER_COLD);
  CHECK_FALSE(evolve(s, unknown).ok());
  CHECK(s == before);

  auto replayed = put(1, "b", 1, v1::TIER_HOT);  // seq not after the last applied
  CHECK(evolve(s, replayed).message().find("not after the last applied seq 1") !=
        std::string::npos);
  CHECK(s == before);
}

TEST_CASE("evolve: the writer's incarnation is recorded") {
  store_state s;
  auto started = at(1);
  started.mutable_writer_started()->set_writer_id(7);
  REQUIRE(evolve(s, started).ok());
  CHECK(s.writer_id == 7);
  CHECK(s.writers_started == 1);
  CHECK(s.last_event_ms == 1000);
}

TEST_CASE("upcast: envelopes from a newer schema are refused, older ones brought current") {
  auto e = at(5);
  e.set_schema_version(0);
  REQUIRE(upcast(e).ok());
  CHECK(e.schema_version() == kSchemaVersion);
  e.set_schema_version(kSchemaVersion + 1);
  auto st = upcast(e);
  CHECK_FALSE(st.ok());
  CHECK(st.message().find("upgrade") != std::string::npos);
}

// SPEC §11 fencing by epoch.
namespace {
v1::Envelope leadership(uint64_t seq, uint64_t epoch, const std::string& member) {
  auto e = at(seq);
  e.set_epoch(epoch);
  e.set_stream("system");
  auto* p = e.mutable_leadership_taken();
  p->set_epoch(epoch);
  p->set_member(member);
  p->set_last_seq_of_previous_epoch(seq - 1);
  return e;
}
}  // namespace

TEST_CASE("evolve: leadership_taken raises the epoch and names the leader, later events carry it") {
  store_state s;
  REQUIRE(evolve(s, put(1, "a", 100, v1::TIER_HOT)).ok());
  CHECK(s.epoch == 0);
  REQUIRE(evolve(s, leadership(2, 3, "standby-1")).ok());
  CHECK(s.epoch == 3);
  CHECK(s.leader == "standby-1");
  auto next = put(3, "b", 10, v1::TIER_HOT);
  next.set_epoch(3);
  CHECK(evolve(s, next).ok());
}

TEST_CASE("evolve: an event of a lower epoch, a new epoch without leadership_taken, or a leadership that does not grow is DATA_LOSS") {
  store_state s;
  REQUIRE(evolve(s, leadership(1, 2, "a")).ok());
  auto former = put(2, "x", 10, v1::TIER_HOT);
  former.set_epoch(1);  // a former leader's event after the new one's
  auto refused = evolve(s, former);
  CHECK(refused.code() == errc::data_loss);
  CHECK(refused.message().find("former leader") != std::string::npos);
  auto unannounced = put(2, "x", 10, v1::TIER_HOT);
  unannounced.set_epoch(5);
  CHECK(evolve(s, unannounced).code() == errc::data_loss);
  CHECK(evolve(s, leadership(2, 2, "b")).code() == errc::data_loss);  // not above 2
  auto mismatched = leadership(2, 4, "b");
  mismatched.set_epoch(3);  // the envelope's epoch is not the one it takes
  CHECK(evolve(s, mismatched).code() == errc::data_loss);
  CHECK(s.applied_seq == 1);  // nothing of it applied
  CHECK(s.epoch == 2);
}
