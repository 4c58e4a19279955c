// "Let it crash, visibly" (SPEC §8, DESIGN): a core actor that stops while the
// node runs is a failure the watchdog reports — the host's on_failure runs
// (weightd exits 70 then) and /healthz answers 503 naming the actor — while a
// normal stop is none. On the production (threaded) actors.
#include <doctest/doctest.h>
#include <httplib.h>

#include <atomic>
#include <thread>

#include "actors/embedded.hpp"
#include "api/server/metrics.hpp"
#include "support.hpp"

using namespace weightd;
using namespace weightd::test;
namespace v1 = events::v1;

namespace {

struct watched_node {
  temp_dir dir;
  std::shared_ptr<std::atomic<int>> failures = std::make_shared<std::atomic<int>>(0);
  std::unique_ptr<actors::embedded> store;

  watched_node() {
    actors::node_config c;
    c.journal.dir = dir.path() / "journal";
    c.hot = {v1::TIER_HOT, dir.path() / "hot", 64 << 20, false};
    c.cold = {v1::TIER_COLD, dir.path() / "cold", 0, true};
    auto count = failures;
    c.on_failure = [count](const std::string&) { ++*count; };
    auto started = actors::embedded::start(c, 2);
    REQUIRE_MESSAGE(started.ok(), started.error().to_string());
    store = std::move(*started);
  }
  actors::node& node() { return store->handles(); }
  /// Waits (at most 5 s) until the watchdog reports a failure: health names it
  /// first, the host's on_failure runs just after, on the watchdog's thread.
  std::string failure() {
    for (int i = 0; i < 500 && (node().health().failure().empty() || *failures == 0); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return node().health().failure();
  }
};

}  // namespace

TEST_CASE("watchdog: a registry that stops is a failure the host hears of, and /healthz is 503 naming it") {
  watched_node w;
  auto metrics = api::metrics_server::start(w.store->system(), w.node(),
                                            std::make_shared<api::rpc_metrics>(), "127.0.0.1:0");
  REQUIRE(metrics.ok());
  httplib::Client http("127.0.0.1", (*metrics)->port());
  auto before = http.Get("/healthz");
  REQUIRE(before);
  CHECK(before->status == 200);
  caf::anon_send_exit(w.node().registry(), caf::exit_reason::kill);
  CHECK(w.failure().find("the registry stopped") == 0);
  CHECK(*w.failures == 1);
  auto after = http.Get("/healthz");
  REQUIRE(after);
  CHECK(after->status == 503);
  CHECK(after->body.find("the registry stopped") != std::string::npos);
  metrics->reset();
}

TEST_CASE("watchdog: it watches every core actor: writer, snapshotter, store, registry, reader, I/O workers, scrubber") {
  watched_node w;
  caf::scoped_actor self{w.store->system()};
  uint64_t watched = 0;
  self->request(w.node().watchdog(), std::chrono::seconds(5), caf::ok_atom::value)
      .receive([&](uint64_t n) { watched = n; }, [](caf::error&) {});
  CHECK(watched == 5 + actors::node_config{}.io_workers + (w.node().scrubber() ? 1 : 0));
}

TEST_CASE("watchdog: an object store that stops is a failure too, reported once") {
  watched_node w;
  caf::anon_send_exit(w.node().objects(), caf::exit_reason::kill);
  CHECK(w.failure().find("the object store stopped") == 0);
  caf::anon_send_exit(w.node().registry(), caf::exit_reason::kill);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(*w.failures == 1);
}

TEST_CASE("watchdog: stopping the node is no failure") {
  watched_node w;
  w.node().stop();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK(w.node().health().failure().empty());
  CHECK(*w.failures == 0);
}
