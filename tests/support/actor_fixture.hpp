// A minimal doctest fixture on CAF 0.17.6's deterministic test_coordinator
// (CAF's own caf/test/dsl.hpp fixture crashes under doctest). Time is fake:
// advance it with sched.advance_time(...).
#pragma once

#include <doctest/doctest.h>

#include "actors/errors.hpp"
#include "caf/all.hpp"

namespace weightd::test {

struct actor_fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scoped_actor self;
  caf::scheduler::test_coordinator& sched;

  static caf::actor_system_config& prepare(caf::actor_system_config& c) {
    c.set("scheduler.policy", caf::atom("testing"));
    actors::add_error_category(c);
    return c;
  }
  actor_fixture()
      : sys(prepare(cfg)),
        self(sys, true),
        sched(dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler())) {}
  ~actor_fixture() { sched.run(); }

  /// Sends a request, runs the scheduler until idle, returns the reply.
  template <class T, class Handle, class... Ts>
  result<T> ask(const Handle& h, Ts&&... xs) {
    auto rh = self->request(h, caf::infinite, std::forward<Ts>(xs)...);
    sched.run();
    result<T> out{errc::internal, "no reply"};
    rh.receive([&](T& value) { out = std::move(value); },
               [&](caf::error& err) { out = actors::to_status(err); });
    return out;
  }
};

}  // namespace weightd::test
