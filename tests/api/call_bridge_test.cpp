// The unary calls' bridge into the actors (api/server/call_bridge.hpp): a
// reply ends the call once with what `fill` wrote; an error ends it with its
// status; a call whose reply never comes ends BUSY after the server's
// timeout, and a reply arriving later changes nothing.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "actors/errors.hpp"
#include "api/server/call_bridge.hpp"

using namespace weightd;
using namespace std::chrono_literals;

namespace {

/// Answers n with n * 2; with a negative n it fails; with 0 it answers only
/// when told to (`release_atom`), as a stuck component would not at all.
using release_atom = caf::atom_constant<caf::atom("release")>;

struct doubler_state {
  std::vector<caf::response_promise> held;
};

caf::behavior doubler(caf::stateful_actor<doubler_state>* self) {
  return {
      [=](int n) -> caf::result<int> {
        if (n < 0) return actors::to_error({errc::conflict, "negative"});
        if (n == 0) {
          self->state.held.push_back(self->make_response_promise());
          return caf::delegated<int>{};
        }
        return n * 2;
      },
      [=](release_atom) {
        for (auto& rp : self->state.held) rp.deliver(42);
        self->state.held.clear();
      },
  };
}

struct outcome {
  std::promise<status> ended;
  std::atomic<int> ends{0};
  std::atomic<int> filled{-1};
};

struct bridge_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<api::call_bridge> bridge;
  caf::actor target;
  explicit bridge_fixture(std::chrono::milliseconds timeout) {
    cfg.set("scheduler.max-threads", size_t{2});
    actors::add_error_category(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    bridge = std::make_unique<api::call_bridge>(*sys, timeout);
    target = sys->spawn(doubler);
  }
  ~bridge_fixture() {
    caf::anon_send_exit(target, caf::exit_reason::user_shutdown);
    bridge.reset();
  }
  std::shared_ptr<outcome> call(int n) {
    auto out = std::make_shared<outcome>();
    bridge->post<int>(
        [out](const status& st) {
          if (out->ends++ == 0) out->ended.set_value(st);
        },
        target, [out](int reply) { out->filled = reply; }, n);
    return out;
  }
};

status wait_end(outcome& o, std::chrono::milliseconds within = 5s) {
  auto f = o.ended.get_future();
  REQUIRE(f.wait_for(within) == std::future_status::ready);
  return f.get();
}

}  // namespace

TEST_CASE("call bridge: a reply ends the call OK with what fill wrote, once") {
  bridge_fixture f{10s};
  std::vector<std::shared_ptr<outcome>> calls;
  for (int n = 1; n <= 200; ++n) calls.push_back(f.call(n));
  for (int n = 1; n <= 200; ++n) {
    auto st = wait_end(*calls[n - 1]);
    CHECK(st.ok());
    CHECK(calls[n - 1]->filled == 2 * n);
  }
  std::this_thread::sleep_for(2 * api::call_bridge::kSweepInterval);
  for (auto& c : calls) CHECK(c->ends == 1);
}

TEST_CASE("call bridge: an error reply ends the call with its status and fills nothing") {
  bridge_fixture f{10s};
  auto c = f.call(-1);
  auto st = wait_end(*c);
  CHECK(st.code() == errc::conflict);
  CHECK(c->filled == -1);
}

TEST_CASE("call bridge: a reply that never comes ends the call BUSY after the timeout, a late "
          "reply changes nothing") {
  bridge_fixture f{300ms};
  auto start = std::chrono::steady_clock::now();
  auto stuck = f.call(0);
  auto quick = f.call(5);  // calls behind a stuck one are not held up
  CHECK(wait_end(*quick).ok());
  auto st = wait_end(*stuck);
  auto waited = std::chrono::steady_clock::now() - start;
  CHECK(st.code() == errc::busy);
  CHECK(st.message().find("timed out") != std::string::npos);
  CHECK(waited >= 300ms);
  CHECK(waited < 300ms + 10 * api::call_bridge::kSweepInterval);
  caf::anon_send(f.target, release_atom::value);
  std::this_thread::sleep_for(2 * api::call_bridge::kSweepInterval);
  CHECK(stuck->ends == 1);
  CHECK(stuck->filled == -1);
}

TEST_CASE("call bridge: calls still waiting when the bridge stops end BUSY, none is left hanging") {
  bridge_fixture f{60s};
  auto stuck = f.call(0);
  std::this_thread::sleep_for(50ms);  // the bridge has it
  f.bridge.reset();
  auto st = wait_end(*stuck);
  CHECK(st.code() == errc::busy);
  CHECK(stuck->ends == 1);
}
