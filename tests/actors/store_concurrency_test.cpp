// Many clients putting into a small HOT tier at once, on real threads with
// the production (detached) actors: the tier's accounting never exceeds its
// capacity, every put either lands or is refused cleanly, and the index is
// the fold of the journal afterwards.
#include <doctest/doctest.h>

#include <atomic>
#include <random>
#include <thread>

#include "actors/errors.hpp"
#include "actors/node.hpp"
#include "persistence/replay.hpp"
#include "support.hpp"

using namespace weightd;
using namespace weightd::test;

TEST_CASE("store: concurrent puts into a small tier never exceed its capacity") {
  temp_dir dir;
  constexpr uint64_t capacity = 64 << 10;
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", size_t{2});
  cfg.set("scheduler.policy", caf::atom("sharing"));
  actors::add_error_category(cfg);
  caf::actor_system sys{cfg};
  actors::node_config c;
  c.journal.dir = dir.path() / "journal";
  c.journal.mode = persistence::durability::nosync;
  c.hot = {events::v1::TIER_HOT, dir.path() / "hot", capacity, false};
  c.cold = {events::v1::TIER_COLD, dir.path() / "cold", 0, true};
  c.io_workers = 2;
  auto started = actors::node::start(sys, c);
  REQUIRE(started.ok());
  auto& node = **started;
  auto store = node.objects();

  std::atomic<bool> done{false};
  std::atomic<uint64_t> worst{0}, polls{0};
  std::thread monitor([&] {
    caf::scoped_actor self{sys};
    while (!done) {
      self->request(store, std::chrono::seconds(10), actors::stats_atom::value)
          .receive(
              [&](actors::store_stats& s) {
                uint64_t total = s.hot.used_bytes + s.hot.reserved_bytes;
                uint64_t seen = worst.load();
                while (total > seen && !worst.compare_exchange_weak(seen, total)) {}
                ++polls;
              },
              [](caf::error&) {});
    }
  });

  constexpr int clients = 8, each = 30;
  std::atomic<int> stored{0}, refused{0}, other{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < clients; ++t)
    threads.emplace_back([&, t] {
      caf::scoped_actor self{sys};
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < each; ++i) {
        actors::put_request req;
        req.key = "c" + std::to_string(t) + "/" + std::to_string(i);
        req.size = 1024 + rng() % (8 << 10);
        std::string bytes(req.size, static_cast<char>('a' + t));
        status outcome;
        self->request(store, std::chrono::seconds(30), actors::put_atom::value, req)
            .receive(
                [&](actors::put_ticket& ticket) {
                  auto w = persistence::blob_writer::create(ticket.temp_path, ticket.want_sha256);
                  REQUIRE(w.ok());
                  REQUIRE((*w)->write(bytes.data(), bytes.size()).ok());
                  auto digest = (*w)->finish();
                  self->request(store, std::chrono::seconds(30), actors::put_atom::value,
                                ticket.put_id, *digest)
                      .receive([&](actors::object_info&) {},
                               [&](caf::error& err) { outcome = actors::to_status(err); });
                },
                [&](caf::error& err) { outcome = actors::to_status(err); });
        if (outcome.ok()) ++stored;
        else if (outcome.code() == errc::no_available_space) ++refused;
        else ++other;
      }
    });
  for (auto& t : threads) t.join();
  done = true;
  monitor.join();

  CHECK(other == 0);
  CHECK(stored + refused == clients * each);
  CHECK(stored > clients * each / 2);  // eviction makes room for most of them
  CHECK(worst <= capacity);
  MESSAGE(stored.load() << " stored, " << refused.load() << " refused, peak accounted "
                        << worst.load() << " of " << capacity << " bytes over " << polls.load()
                        << " polls");
  node.stop();
  started->reset();
  // An evicted replica's file is unlinked by an I/O worker after its event is
  // durable; a stop can come first and leave the file behind. The next start
  // removes such orphans: from then on the files are exactly the fold.
  auto again = actors::node::start(sys, c);
  REQUIRE_MESSAGE(again.ok(), again.error().to_string());
  uint64_t on_disk = 0;
  for (auto& f : std::filesystem::recursive_directory_iterator(dir.path() / "hot" / "objects"))
    if (f.is_regular_file()) on_disk += f.file_size();
  CHECK(on_disk <= capacity);
  CHECK((*again)->recovery().hot_bytes == on_disk);
  (*again)->stop();
}
