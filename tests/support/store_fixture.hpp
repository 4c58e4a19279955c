// A running object store on the deterministic scheduler: real tier
// directories in a temp dir, an in-memory journal (behind the fault
// decorator), a fake wall clock, and helpers to put and read bytes.
#pragma once

#include <fstream>
#include <sstream>

#include "actor_fixture.hpp"
#include "actors/node.hpp"
#include "persistence/faulty_journal.hpp"
#include "persistence/replay.hpp"
#include "support.hpp"

namespace weightd::test {

struct store_fixture : actor_fixture {
  temp_dir dir;
  int64_t clock_ms = 1'000'000;
  uint64_t hot_capacity;
  std::shared_ptr<persistence::memory_journal> memory =
      std::make_shared<persistence::memory_journal>();
  std::shared_ptr<persistence::faulty_journal> journal =
      std::make_shared<persistence::faulty_journal>(memory);
  std::unique_ptr<actors::node> node;
  actors::object_store_actor store;

  explicit store_fixture(uint64_t hot_capacity_bytes = 1 << 20) : hot_capacity(hot_capacity_bytes) {
    start();
  }
  ~store_fixture() { stop(); }

  actors::node_config config() {
    actors::node_config c;
    c.hot = {events::v1::TIER_HOT, dir.path() / "hot", hot_capacity, false};
    c.cold = {events::v1::TIER_COLD, dir.path() / "cold", 0, true};
    c.objects.now_ms = [this] { return clock_ms; };
    c.detached = false;
    c.io_workers = 1;
    c.scrub.rate_bytes = 0;  // scrub tests run their rounds by hand
    return c;
  }
  void start(actors::node_config c) {
    auto started = actors::node::start(sys, std::move(c), journal);
    REQUIRE_MESSAGE(started.ok(), started.error().to_string());
    node = std::move(*started);
    store = node->objects();
    sched.run();  // actors initialise when first scheduled
  }
  void start() { start(config()); }
  void stop() {
    if (!node) return;
    node->stop();
    sched.run();
    node.reset();
  }
  void restart() {
    stop();
    start();
  }

  /// The live object index of the store actor.
  const events::object_index& live_index() {
    using impl = caf::stateful_actor<actors::object_store_state, actors::object_store_actor::base>;
    return dynamic_cast<impl&>(*caf::actor_cast<caf::abstract_actor*>(store)).state.index;
  }
  /// The index as the journal describes it.
  events::object_index folded_index() {
    auto state = persistence::fold_journal(*memory);
    REQUIRE_MESSAGE(state.ok(), state.error().to_string());
    return state->objects;
  }

  actors::put_request request(const std::string& key, const std::string& bytes) {
    actors::put_request r;
    r.key = key;
    r.size = bytes.size();
    return r;
  }
  /// Puts `bytes` under `req` (key and size already set) through the two-step protocol.
  result<actors::object_info> put(actors::put_request req, const std::string& bytes) {
    auto ticket = ask<actors::put_ticket>(store, actors::put_atom::value, req);
    if (!ticket) return ticket.error();
    auto writer = persistence::blob_writer::create(ticket->temp_path, ticket->want_sha256,
                                                   ticket->enospc_after_bytes);
    if (!writer) return writer.error();
    for (size_t at = 0; at < bytes.size(); at += 4096) {
      auto st = (*writer)->write(bytes.data() + at, std::min<size_t>(4096, bytes.size() - at));
      if (!st.ok()) {
        self->send(store, actors::abort_atom::value, ticket->put_id);
        sched.run();
        return st;
      }
    }
    auto digest = (*writer)->finish();
    if (!digest) return digest.error();
    return ask<actors::object_info>(store, actors::put_atom::value, ticket->put_id, *digest);
  }
  result<actors::object_info> put(const std::string& key, const std::string& bytes) {
    return put(request(key, bytes), bytes);
  }
  result<actors::read_grant> get(const std::string& key, const std::string& tenant = "default") {
    return ask<actors::read_grant>(store, caf::get_atom::value, tenant, key);
  }
  status remove(const std::string& key, bool force = false) {
    auto r = ask<actors::object_info>(store, actors::remove_atom::value, std::string{"default"},
                                      key, force, std::string{});
    return r.ok() ? status{} : r.error();
  }
  actors::store_stats stats() { return *ask<actors::store_stats>(store, actors::stats_atom::value); }
  void tick() {
    self->send(store, caf::tick_atom::value);
    sched.run();
  }
  std::vector<std::string> events_of_type(const std::string& type) {
    std::vector<std::string> keys;
    REQUIRE(persistence::read_type(*memory, type, {}, [&](const events::v1::Envelope& e) {
              keys.push_back(e.stream());
              return true;
            }).ok());
    return keys;
  }
  size_t files_in(const std::string& tier, const std::string& sub) {
    size_t n = 0;
    for (auto it = std::filesystem::recursive_directory_iterator(dir.path() / tier / sub);
         it != std::filesystem::recursive_directory_iterator(); ++it)
      n += it->is_regular_file() ? 1 : 0;
    return n;
  }
};



}  // namespace weightd::test
