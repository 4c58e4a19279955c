#include "api/server/call_bridge.hpp"

#include <algorithm>
#include <thread>

namespace weightd::api {

namespace {

using sweep_atom = caf::atom_constant<caf::atom("sweep")>;

/// A bridge's calls still waiting for their reply, oldest first: all have
/// the same timeout, so the front is always the next to expire.
struct bridge_state {
  std::list<bridged_call_ptr> pending;
  ~bridge_state() {  // the bridge stopped (server shutdown): nothing is left hanging
    while (!pending.empty())
      finish_bridged(pending.front(), {errc::busy, "the daemon is shutting down; retry"});
  }
};

caf::behavior bridge(caf::stateful_actor<bridge_state>* self, std::chrono::milliseconds timeout) {
  self->delayed_send(self, call_bridge::kSweepInterval, sweep_atom::value);
  return {
      [=](const bridged_call_ptr& call) {
        auto& pending = self->state.pending;
        call->deadline = std::chrono::steady_clock::now() + timeout;
        call->pending_list = &pending;
        call->pending = pending.insert(pending.end(), call);
        auto send = std::move(call->send);
        send(self, call);
      },
      [=](sweep_atom) {
        auto& pending = self->state.pending;
        auto now = std::chrono::steady_clock::now();
        while (!pending.empty() && pending.front()->deadline <= now) {
          finish_bridged(pending.front(), actors::to_status(caf::make_error(caf::sec::request_timeout)));
        }
        self->delayed_send(self, call_bridge::kSweepInterval, sweep_atom::value);
      },
  };
}

}  // namespace

void finish_bridged(bridged_call_ptr call, const status& st) {
  if (call->finished) return;
  call->finished = true;
  if (call->pending_list) call->pending_list->erase(call->pending);
  call->pending_list = nullptr;
  auto done = std::move(call->done);
  done(st);
}

call_bridge::call_bridge(caf::actor_system& sys, std::chrono::milliseconds timeout) {
  auto n = std::max<size_t>(1, std::min<size_t>(sys.scheduler().num_workers(), 8));
  for (size_t i = 0; i < n; ++i) bridges_.push_back(sys.spawn(bridge, timeout));
}

call_bridge::~call_bridge() {
  for (auto& b : bridges_) caf::anon_send_exit(b, caf::exit_reason::user_shutdown);
}

}  // namespace weightd::api
