// The object store (SPEC §2), rule by rule: real bytes in real tier files,
// metadata as events, eviction, the guard, leases, recovery.
#include <doctest/doctest.h>

#include "events/digest.hpp"
#include "persistence/tier_store.hpp"
#include "store_fixture.hpp"

using namespace weightd;
using namespace weightd::test;
using actors::put_atom;
namespace v1 = events::v1;

TEST_CASE_FIXTURE(store_fixture, "store: a put is readable byte for byte from the HOT tier") {
  auto bytes = pattern(100'000);
  auto info = put("models/a.bin", bytes);
  REQUIRE_MESSAGE(info.ok(), info.error().to_string());
  CHECK(info->record.size == bytes.size());
  CHECK(info->record.checksum == persistence::xxh3_hex(bytes));
  CHECK(info->record.hot);
  CHECK_FALSE(info->record.cold);
  CHECK(info->record.created_at_ms == clock_ms);
  auto grant = get("models/a.bin");
  REQUIRE(grant.ok());
  CHECK(grant->tier == v1::TIER_HOT);
  CHECK(grant->path.find((dir.path() / "hot").string()) == 0);
  CHECK(read_file(grant->path) == bytes);
  CHECK(live_index() == folded_index());
}

TEST_CASE_FIXTURE(store_fixture, "store: a put may ask for COLD, which is fsynced and readable") {
  auto bytes = pattern(70'000, 7);
  auto req = request("cold.bin", bytes);
  req.tier = v1::TIER_COLD;
  req.data_type = v1::DATA_TYPE_METADATA;  // METADATA also gets a sha256
  auto info = put(req, bytes);
  REQUIRE_MESSAGE(info.ok(), info.error().to_string());
  CHECK(info->record.cold);
  CHECK_FALSE(info->record.hot);
  CHECK(info->record.sha256 == events::sha256_hex(bytes));
  auto grant = get("cold.bin");
  REQUIRE(grant.ok());
  CHECK(grant->tier == v1::TIER_COLD);
  CHECK(read_file(grant->path) == bytes);
  CHECK(stats().cold.used_bytes == bytes.size());
}

TEST_CASE_FIXTURE(store_fixture, "store: keys of any bytes stay inside the tier and apart") {
  std::string evil = "../../etc/passwd";
  std::string with_nul = std::string("a\0b", 3);
  REQUIRE(put(evil, "x").ok());
  REQUIRE(put(with_nul, "y").ok());
  REQUIRE(put(std::string(4096, 'k'), "z").ok());
  CHECK(read_file(get(evil)->path) == "x");
  CHECK(read_file(get(with_nul)->path) == "y");
  CHECK(get(evil)->path.find((dir.path() / "hot" / "objects").string()) == 0);
  CHECK(files_in("hot", "objects") == 3);
}

TEST_CASE_FIXTURE(store_fixture, "store: tenants have separate key spaces") {
  auto req = request("k", "one");
  req.tenant = "acme";
  REQUIRE(put(req, "one").ok());
  REQUIRE(put("k", "two").ok());
  CHECK(read_file(get("k", "acme")->path) == "one");
  CHECK(read_file(get("k")->path) == "two");
}

TEST_CASE_FIXTURE(store_fixture, "store: bad input names the field and changes nothing") {
  auto expect_invalid = [&](actors::put_request req, const std::string& field) {
    auto r = ask<actors::put_ticket>(store, put_atom::value, req);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == errc::invalid_argument);
    CHECK_MESSAGE(r.error().message().find(field) == 0, r.error().message());
  };
  expect_invalid(request("", "x"), "key is empty");
  expect_invalid(request(std::string(4097, 'k'), "x"), "key is 4097 bytes");
  auto bad_tenant = request("k", "x");
  bad_tenant.tenant = "ten\nant";
  expect_invalid(bad_tenant, "tenant contains a control character");
  auto bad_tier = request("k", "x");
  bad_tier.tier = static_cast<v1::Tier>(7);
  expect_invalid(bad_tier, "tier");
  auto bad_sum = request("k", "x");
  bad_sum.expected_checksum = "XYZ";
  expect_invalid(bad_sum, "checksum must be 16 lowercase hex");
  CHECK(stats().hot.reserved_bytes == 0);
  CHECK(memory->highest_seq().value() == 1);  // only the startup event
}

TEST_CASE_FIXTURE(store_fixture, "store: streamed size or checksum mismatch registers nothing") {
  auto req = request("short.bin", "");
  req.size = 10;
  auto r = put(req, "12345");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == errc::invalid_argument);
  CHECK(r.error().message().find("size: the put announced 10 bytes but 5 arrived") == 0);

  auto bytes = pattern(1000);
  auto wrong = request("sum.bin", bytes);
  wrong.expected_checksum = "0123456789abcdef";
  auto r2 = put(wrong, bytes);
  REQUIRE_FALSE(r2.ok());
  CHECK(r2.error().message().find("checksum: the bytes' xxh3 is") == 0);

  auto right = request("sum.bin", bytes);
  right.expected_checksum = persistence::xxh3_hex(bytes);
  CHECK(put(right, bytes).ok());

  sched.run();
  CHECK_FALSE(get("short.bin").ok());
  CHECK(stats().hot.reserved_bytes == 0);
  CHECK(stats().hot.used_bytes == 1000);
  CHECK(files_in("hot", "tmp") == 0);  // partial files deleted
}

TEST_CASE_FIXTURE(store_fixture, "store: a put of a live key is OBJECT_ALREADY_EXISTS") {
  REQUIRE(put("k", "one").ok());
  auto again = put("k", "two");
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code() == errc::object_already_exists);
  CHECK(read_file(get("k")->path) == "one");
}

TEST_CASE_FIXTURE(store_fixture, "store: a second put of a key still being put is refused") {
  auto first = ask<actors::put_ticket>(store, put_atom::value, request("k", "abc"));
  REQUIRE(first.ok());
  auto second = ask<actors::put_ticket>(store, put_atom::value, request("k", "abc"));
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().code() == errc::object_already_exists);
  CHECK(second.error().message().find("in progress") != std::string::npos);
}

TEST_CASE_FIXTURE(store_fixture, "store: an abandoned put is reclaimed after the put timeout") {
  auto ticket = ask<actors::put_ticket>(store, put_atom::value, request("slow.bin", pattern(5000)));
  REQUIRE(ticket.ok());
  {
    auto w = persistence::blob_writer::create(ticket->temp_path, false);
    REQUIRE(w.ok());
    REQUIRE((*w)->write("part", 4).ok());
  }
  CHECK(stats().hot.reserved_bytes == 5000);
  clock_ms += 5 * 60'000 - 1;
  tick();
  CHECK(stats().hot.reserved_bytes == 5000);  // not yet
  clock_ms += 1;
  tick();
  CHECK(stats().hot.reserved_bytes == 0);
  CHECK(stats().reclaimed_puts == 1);
  CHECK(files_in("hot", "tmp") == 0);
  persistence::blob_digest digest{4, persistence::xxh3_hex("part"), ""};
  auto late = ask<actors::object_info>(store, put_atom::value, ticket->put_id, digest);
  REQUIRE_FALSE(late.ok());
  CHECK(late.error().code() == errc::not_found);
  CHECK(put("slow.bin", "again").ok());  // the key is free again
}

TEST_CASE_FIXTURE(store_fixture, "store: a full disk fails the put with NO_AVAILABLE_SPACE") {
  stop();
  auto c = config();
  c.hot.inject_enospc_after_bytes = 10'000;
  start(c);
  auto r = put("big.bin", pattern(20'000));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == errc::no_available_space);
  CHECK(r.error().message().find("No space left on device") != std::string::npos);
  CHECK(stats().hot.reserved_bytes == 0);
  CHECK(files_in("hot", "tmp") == 0);
  CHECK(put("small.bin", pattern(5'000)).ok());
}

TEST_CASE_FIXTURE(store_fixture, "store: a journal failure publishes nothing and keeps the store usable") {
  journal->inject(persistence::fault::fail_write);
  auto r = put("k", pattern(3000));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == errc::durability_failed);
  CHECK_FALSE(get("k").ok());
  CHECK(files_in("hot", "objects") == 0);
  CHECK(stats().hot.reserved_bytes == 0);
  CHECK(put("k", pattern(3000)).ok());
  CHECK(live_index() == folded_index());
}

TEST_CASE_FIXTURE(store_fixture, "store: remove deletes the object, its files and says so in the journal") {
  REQUIRE(put("k", pattern(500)).ok());
  auto path = get("k")->path;
  clock_ms += 10'001;  // the read lease of that get has ended
  REQUIRE(remove("k").ok());
  sched.run();
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK(get("k").error().code() == errc::not_found);
  CHECK(remove("k").code() == errc::not_found);
  CHECK(events_of_type("object_removed") == std::vector<std::string>{"object|default/k"});
  CHECK(live_index() == folded_index());
}

TEST_CASE_FIXTURE(store_fixture, "store: a read lease blocks a plain remove, not a forced one") {
  REQUIRE(put("k", "data").ok());
  REQUIRE(get("k").ok());
  auto refused = remove("k");
  CHECK(refused.code() == errc::object_has_lease);
  CHECK(refused.message().find("retry after it ends or remove with force") != std::string::npos);
  clock_ms += 10'000;  // the lease (10 s) has just ended
  CHECK(remove("k").ok());
  REQUIRE(put("k2", "data").ok());
  REQUIRE(get("k2").ok());
  CHECK(remove("k2", true).ok());
}

TEST_CASE_FIXTURE(store_fixture, "store: batch remove answers per key") {
  REQUIRE(put("a", "1").ok());
  REQUIRE(put("b", "2").ok());
  REQUIRE(get("b").ok());  // leased
  auto r = ask<actors::batch_removal>(store, actors::remove_atom::value, std::string{"default"},
                                      std::vector<std::string>{"a", "missing", "b", "a"}, false,
                                      std::string{});
  REQUIRE(r.ok());
  REQUIRE(r->results.size() == 3);
  CHECK(r->results[0].result.ok());
  CHECK(r->results[1].result.code() == errc::not_found);
  CHECK(r->results[2].result.code() == errc::object_has_lease);
  CHECK_FALSE(get("a").ok());
}

TEST_CASE_FIXTURE(store_fixture, "store: a batch remove with a malformed key is refused whole, naming it") {
  REQUIRE(put("a", "1").ok());
  auto r = ask<actors::batch_removal>(store, actors::remove_atom::value, std::string{"default"},
                                      std::vector<std::string>{"a", ""}, false, std::string{});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == errc::invalid_argument);
  CHECK(r.error().message().find("keys[1]") != std::string::npos);
  CHECK(get("a").ok());  // nothing was removed
}

TEST_CASE("store: eviction drops the least recently accessed HOT replicas first") {
  store_fixture f{1000};
  REQUIRE(f.put("a", pattern(300)).ok());
  f.clock_ms += 1;
  REQUIRE(f.put("b", pattern(300)).ok());
  f.clock_ms += 1;
  REQUIRE(f.put("c", pattern(300)).ok());
  f.clock_ms += 20'000;
  REQUIRE(f.get("a").ok());  // a is now the most recently used
  f.clock_ms += 20'000;      // and its read lease has ended
  REQUIRE(f.put("d", pattern(300)).ok());  // 1200 > 1000: one must go
  CHECK(f.get("b").error().code() == errc::not_found);
  CHECK(f.get("a").ok());
  CHECK(f.get("c").ok());
  CHECK(f.get("d").ok());
  CHECK(f.stats().evicted_objects == 1);
  CHECK(f.stats().hot.used_bytes == 900);
  CHECK(f.events_of_type("object_removed") == std::vector<std::string>{"object|default/b"});
  CHECK(f.live_index() == f.folded_index());
}

TEST_CASE("store: passing the high watermark evicts down to high minus the eviction ratio") {
  store_fixture f{1000};
  for (int i = 0; i < 4; ++i) {
    REQUIRE(f.put("k" + std::to_string(i), pattern(230)).ok());
    f.clock_ms += 1;
  }
  // 920 > 900 (0.90): evict down to 850 (0.85): the oldest object goes.
  CHECK(f.stats().hot.used_bytes == 690);
  CHECK_FALSE(f.get("k0").ok());
}

TEST_CASE("store: an evicted object with a COLD replica stays readable from COLD") {
  store_fixture f{1000};
  REQUIRE(f.put("a", pattern(600)).ok());
  auto copied = f.ask<actors::object_info>(f.store, caf::add_atom::value, std::string{"default"},
                                           std::string{"a"}, v1::TIER_COLD);
  REQUIRE_MESSAGE(copied.ok(), copied.error().to_string());
  CHECK(copied->record.cold);
  f.clock_ms += 1;
  REQUIRE(f.put("b", pattern(600)).ok());
  auto grant = f.get("a");
  REQUIRE(grant.ok());
  CHECK(grant->tier == v1::TIER_COLD);
  CHECK(read_file(grant->path) == pattern(600));
  CHECK(f.events_of_type("replica_dropped") == std::vector<std::string>{"object|default/a"});
}

TEST_CASE("store: pinned and leased objects are never evicted, a put that cannot fit is refused") {
  store_fixture f{1000};
  auto pinned = f.request("pinned", pattern(500));
  pinned.hard_pin = true;
  REQUIRE(f.put(pinned, pattern(500)).ok());
  REQUIRE(f.put("leased", pattern(300)).ok());
  REQUIRE(f.get("leased").ok());
  auto r = f.put("new", pattern(400));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == errc::no_available_space);
  CHECK(r.error().message().find("1 pinned and 1 leased objects stay") != std::string::npos);
  CHECK(f.get("pinned").ok());
  CHECK(f.get("leased").ok());
  CHECK(f.stats().hot.reserved_bytes == 0);
  f.clock_ms += 60'000;
  f.tick();  // the lease expires
  CHECK(f.put("new", pattern(400)).ok());
  CHECK_FALSE(f.get("leased").ok());
}

TEST_CASE("store: the guard refuses generic removal of managed members and eviction skips them") {
  store_fixture f{1000};
  f.self->send(f.store, actors::guard_atom::value, std::string{"default"}, std::string{"weight:g1"},
               actors::managed_group{"default/llama@main#1", false});
  auto member = f.request("llama/0.bin", pattern(500));
  member.group_id = "weight:g1";
  member.data_type = v1::DATA_TYPE_WEIGHT;
  REQUIRE(f.put(member, pattern(500)).ok());
  auto refused = f.remove("llama/0.bin", true);
  CHECK(refused.code() == errc::managed_object);
  CHECK(refused.message().find("default/llama@main#1") != std::string::npos);

  REQUIRE(f.put("general", pattern(400)).ok());
  f.clock_ms += 60'000;
  auto evicted = f.ask<actors::eviction_summary>(f.store, actors::evict_atom::value, 0.0);
  REQUIRE(evicted.ok());
  CHECK(evicted->evicted_objects == 1);  // only the GENERAL object
  CHECK(evicted->skipped_managed == 1);
  CHECK(f.get("llama/0.bin").ok());
  CHECK(f.stats().guard_skips.at("evict") >= 1);

  auto no_prefix = f.ask<actors::removal_summary>(f.store, actors::removeall_atom::value,
                                                std::string{"default"}, std::string{""}, false,
                                                std::string{});
  REQUIRE_FALSE(no_prefix.ok());  // an empty request does not empty the tenant
  CHECK(no_prefix.error().code() == errc::invalid_argument);
  CHECK(no_prefix.error().message().find("prefix is required") == 0);
  auto all = f.ask<actors::removal_summary>(f.store, actors::removeall_atom::value,
                                            std::string{"default"}, std::string{""}, true,
                                            std::string{});
  REQUIRE(all.ok());
  CHECK(all->skipped_managed == 1);
  CHECK(f.stats().guard_skips.at("remove_all") == 1);
  CHECK(f.get("llama/0.bin").ok());

  // While its revision imports, generic removal of a member is allowed.
  f.self->send(f.store, actors::guard_atom::value, std::string{"default"}, std::string{"weight:g1"},
               actors::managed_group{"default/llama@main#1", true});
  CHECK(f.remove("llama/0.bin", true).ok());
}

TEST_CASE_FIXTURE(store_fixture, "store: group snapshot lists every member with its replicas") {
  for (auto key : {"m/2", "m/1", "manifest"}) {
    auto req = request(key, pattern(10));
    req.group_id = "weight:g";
    req.data_type = std::string{key} == "manifest" ? v1::DATA_TYPE_METADATA : v1::DATA_TYPE_WEIGHT;
    req.affinity_id = key;
    REQUIRE(put(req, pattern(10)).ok());
  }
  REQUIRE(put("other", "x").ok());
  auto snap = ask<actors::group_snapshot>(store, actors::group_atom::value, std::string{"default"},
                                          std::string{"weight:g"}, std::vector<std::string>{"other", "nope"});
  REQUIRE(snap.ok());
  REQUIRE(snap->members.size() == 3);
  CHECK(snap->members[0].ref.key == "m/1");
  CHECK(snap->members[2].data_type == v1::DATA_TYPE_METADATA);
  CHECK_FALSE(snap->members[2].sha256.empty());
  CHECK(snap->members[1].readable());
  CHECK(snap->outside.size() == 1);
  CHECK(snap->outside.count("other") == 1);
  auto none = ask<actors::group_snapshot>(store, actors::group_atom::value, std::string{"default"},
                                          std::string{"weight:none"}, std::vector<std::string>{});
  CHECK(none->members.empty());
}

TEST_CASE_FIXTURE(store_fixture, "store: replicas move between tiers, the last one cannot be dropped") {
  REQUIRE(put("k", pattern(2000)).ok());
  auto cold = ask<actors::object_info>(store, caf::add_atom::value, std::string{"default"},
                                       std::string{"k"}, v1::TIER_COLD);
  REQUIRE(cold.ok());
  CHECK(cold->record.hot);
  CHECK(cold->record.cold);
  CHECK(stats().cold.used_bytes == 2000);
  auto dropped = ask<actors::object_info>(store, actors::drop_atom::value, std::string{"default"},
                                          std::string{"k"}, v1::TIER_HOT, v1::REMOVAL_LIFECYCLE);
  REQUIRE(dropped.ok());
  CHECK_FALSE(dropped->record.hot);
  sched.run();
  CHECK(files_in("hot", "objects") == 0);
  auto last = ask<actors::object_info>(store, actors::drop_atom::value, std::string{"default"},
                                       std::string{"k"}, v1::TIER_COLD, v1::REMOVAL_LIFECYCLE);
  REQUIRE_FALSE(last.ok());
  CHECK(last.error().code() == errc::conflict);
  auto back = ask<actors::object_info>(store, caf::add_atom::value, std::string{"default"},
                                       std::string{"k"}, v1::TIER_HOT);
  REQUIRE(back.ok());
  CHECK(read_file(get("k")->path) == pattern(2000));
  CHECK(live_index() == folded_index());
}

TEST_CASE_FIXTURE(store_fixture, "store: list pages through a tenant's keys by prefix") {
  for (int i = 0; i < 5; ++i) REQUIRE(put("p/" + std::to_string(i), "x").ok());
  REQUIRE(put("q/0", "x").ok());
  auto page = ask<actors::object_page>(store, actors::list_atom::value, std::string{"default"},
                                       std::string{"p/"}, std::string{}, uint32_t{2});
  REQUIRE(page.ok());
  REQUIRE(page->objects.size() == 2);
  CHECK(page->next_start_after == "p/1");
  auto next = ask<actors::object_page>(store, actors::list_atom::value, std::string{"default"},
                                       std::string{"p/"}, page->next_start_after, uint32_t{10});
  REQUIRE(next->objects.size() == 3);
  CHECK(next->objects[0].record.ref.key == "p/2");
  CHECK(next->next_start_after.empty());
  auto too_many = ask<actors::object_page>(store, actors::list_atom::value, std::string{"default"},
                                           std::string{}, std::string{}, uint32_t{1001});
  CHECK(too_many.error().code() == errc::invalid_argument);
}

TEST_CASE_FIXTURE(store_fixture, "store: after a restart objects are back, a lost HOT file is dropped as an event") {
  REQUIRE(put("both", pattern(1000)).ok());
  REQUIRE(ask<actors::object_info>(store, caf::add_atom::value, std::string{"default"},
                                   std::string{"both"}, v1::TIER_COLD)
              .ok());
  REQUIRE(put("hot-only", pattern(800)).ok());
  REQUIRE(put("intact", pattern(600)).ok());
  auto before = live_index();
  auto hot_path = get("both")->path;
  auto lonely_path = get("hot-only")->path;
  restart();
  CHECK(live_index() == before);  // a clean restart changes nothing
  CHECK(node->recovery().lost_replicas == 0);

  stop();
  std::filesystem::remove(hot_path);
  std::filesystem::remove(lonely_path);
  start();
  CHECK(node->recovery().lost_replicas == 2);
  auto both = get("both");
  REQUIRE(both.ok());
  CHECK(both->tier == v1::TIER_COLD);
  CHECK(get("hot-only").error().code() == errc::not_ready);
  CHECK(read_file(get("intact")->path) == pattern(600));
  std::vector<std::string> lost;
  REQUIRE(memory->read({}, [&](const v1::Envelope& e) {
                   if (e.has_replica_dropped() && e.replica_dropped().reason() == v1::REMOVAL_LOST)
                     lost.push_back(e.replica_dropped().key());
                   return true;
                 }).ok());
  CHECK(lost == std::vector<std::string>{"both", "hot-only"});
  CHECK(live_index() == folded_index());
}

TEST_CASE_FIXTURE(store_fixture, "store: a damaged replica is dropped as corrupt at restart") {
  REQUIRE(put("k", pattern(4000)).ok());
  auto path = get("k")->path;
  stop();
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('!');
  }
  start();
  CHECK(node->recovery().corrupt_replicas == 1);
  CHECK(get("k").error().code() == errc::not_ready);
  CHECK(events_of_type("replica_dropped").size() == 1);
}

TEST_CASE_FIXTURE(store_fixture, "store: files nobody owns are removed at startup") {
  REQUIRE(put("k", "kept").ok());
  stop();
  std::ofstream(dir.path() / "hot" / "tmp" / "put-99") << "half a put";
  std::filesystem::create_directories(dir.path() / "cold" / "objects" / "ab");
  std::ofstream(dir.path() / "cold" / "objects" / "ab" / "stray") << "crashed copy";
  start();
  CHECK(node->recovery().orphan_files == 2);
  CHECK(files_in("hot", "tmp") == 0);
  CHECK(files_in("cold", "objects") == 0);
  CHECK(read_file(get("k")->path) == "kept");
}
