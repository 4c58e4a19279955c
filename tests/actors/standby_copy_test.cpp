// What the object store does for a standby's copies (SPEC §11 Bytes): a
// copy's Get is not a read that holds anything up, and a COLD file a
// promoted standby placed for a HOT replica is adopted at its startup.
#include <doctest/doctest.h>

#include <fstream>

#include "store_fixture.hpp"

using namespace weightd;
using namespace weightd::test;
namespace v1 = weightd::events::v1;

namespace {

/// Where the COLD tier keeps `key`'s replica.
std::filesystem::path cold_path(const store_fixture& f, const std::string& key) {
  persistence::tier_store cold{{v1::TIER_COLD, f.dir.path() / "cold", 0, true}};
  return cold.object_path({"default", key});
}

}  // namespace

TEST_CASE_FIXTURE(store_fixture, "standby copy: a copy's Get takes no read lease, so a plain remove goes through at once") {
  REQUIRE(put("k", pattern(700)).ok());
  auto copy = ask<actors::read_grant>(store, caf::get_atom::value, actors::copy_atom::value,
                                      std::string{"default"}, std::string{"k"});
  REQUIRE(copy.ok());
  CHECK(read_file(copy->path) == pattern(700));
  CHECK(remove("k").ok());  // a user's Get here would have held it (object_has_lease)
}

TEST_CASE_FIXTURE(store_fixture, "standby copy: a HOT replica whose file is gone while a COLD file holds its bytes is adopted as COLD at startup") {
  REQUIRE(put("copied", pattern(900)).ok());
  REQUIRE(put("damaged", pattern(800)).ok());
  auto copied_hot = get("copied")->path;
  auto damaged_hot = get("damaged")->path;
  stop();
  std::filesystem::create_directories(cold_path(*this, "copied").parent_path());
  std::filesystem::create_directories(cold_path(*this, "damaged").parent_path());
  std::filesystem::rename(copied_hot, cold_path(*this, "copied"));
  std::filesystem::remove(damaged_hot);
  std::ofstream(cold_path(*this, "damaged")) << pattern(799) << '!';  // right size, other bytes
  start();

  CHECK(node->recovery().adopted_replicas == 1);
  CHECK(node->recovery().lost_replicas == 2);  // both HOT files are gone
  auto copied = get("copied");
  REQUIRE(copied.ok());
  CHECK(copied->tier == v1::TIER_COLD);
  CHECK(read_file(copied->path) == pattern(900));
  CHECK(get("damaged").error().code() == errc::not_ready);   // nothing to read it from
  CHECK_FALSE(std::filesystem::exists(cold_path(*this, "damaged")));  // an orphan: removed
  CHECK(events_of_type("replica_added") == std::vector<std::string>{"object|default/copied"});
  CHECK(live_index() == folded_index());
}
