// How a unary gRPC call reaches the actors. A few long-lived bridge actors
// (one per scheduler thread) send each call's request and finish its reactor
// when the reply comes; the gRPC thread only posts the call and returns.
//
// Why not a short-lived actor per call with a timed request (the first
// design): spawning an actor, registering a timeout with CAF's clock thread
// and tearing both down again cost more than the work of most calls (a
// GetRevision is a map lookup), and the clock thread woke for every call.
// Here a call is one message to a bridge, one request without a timer, one
// reply; the deadline (server_options.timeout) is kept by the bridge's own
// sweep every kSweepInterval over its pending calls, oldest first, so a
// reply that never comes still ends the call with BUSY, as before.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <list>
#include <memory>
#include <vector>

#include <caf/all.hpp>

#include "actors/errors.hpp"
#include "api/common/grpc_status.hpp"

namespace weightd::api {

/// One unary call between its post and its Finish. Only its bridge actor
/// touches it after the post, so it needs no lock.
struct bridged_call {
  /// Ends the call with its outcome (for gRPC: Finish with the status).
  std::function<void(const status&)> done;
  /// Sends the call's request from the bridge; run once, then dropped.
  std::function<void(caf::event_based_actor*, const std::shared_ptr<bridged_call>&)> send;
  std::chrono::steady_clock::time_point deadline{};
  /// Its place in its bridge's sweep list, erased when it finishes.
  std::list<std::shared_ptr<bridged_call>>* pending_list = nullptr;
  std::list<std::shared_ptr<bridged_call>>::iterator pending{};
  bool finished = false;
};
using bridged_call_ptr = std::shared_ptr<bridged_call>;

}  // namespace weightd::api

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::api::bridged_call_ptr)

namespace weightd::api {

/// Ends the call once: a late reply after the sweep finished it is dropped.
/// By value: the caller's pointer may be the list entry this erases.
void finish_bridged(bridged_call_ptr call, const status& st);

class call_bridge {
 public:
  static constexpr std::chrono::milliseconds kSweepInterval{100};

  /// `timeout`: how long a call may wait for its reply (--request-timeout).
  call_bridge(caf::actor_system& sys, std::chrono::milliseconds timeout);
  ~call_bridge();
  call_bridge(const call_bridge&) = delete;
  call_bridge& operator=(const call_bridge&) = delete;

  /// Sends `xs...` to `handle`; on the reply `fill(reply)` writes the
  /// response and the call ends OK, an error ends it with its status.
  template <class Reply, class Handle, class Fill, class... Ts>
  grpc::ServerUnaryReactor* call(grpc::CallbackServerContext* ctx, Handle handle, Fill fill,
                                 Ts... xs) {
    auto* reactor = ctx->DefaultReactor();
    post<Reply>(
        [reactor, ctx](const status& st) {
          reactor->Finish(st.ok() ? grpc::Status::OK : to_grpc(ctx, st));
        },
        std::move(handle), std::move(fill), std::move(xs)...);
    return reactor;
  }

  /// Holds an OK write's answer until `finish` may be called with it (the
  /// sync gate: SPEC §11 Acknowledgement); null: answered at once.
  using acknowledger = std::function<void(std::function<void(const status&)> finish)>;

  /// As call(), for a write: an OK reply is answered through `acknowledge`.
  template <class Reply, class Handle, class Fill, class... Ts>
  grpc::ServerUnaryReactor* call_write(grpc::CallbackServerContext* ctx, acknowledger acknowledge,
                                       Handle handle, Fill fill, Ts... xs) {
    if (!acknowledge) return call<Reply>(ctx, std::move(handle), std::move(fill), std::move(xs)...);
    auto* reactor = ctx->DefaultReactor();
    std::function<void(const status&)> finish = [reactor, ctx](const status& st) {
      reactor->Finish(st.ok() ? grpc::Status::OK : to_grpc(ctx, st));
    };
    post<Reply>(
        [finish, acknowledge](const status& st) {
          if (st.ok()) acknowledge(finish);
          else finish(st);
        },
        std::move(handle), std::move(fill), std::move(xs)...);
    return reactor;
  }

  /// The same without gRPC: `done(status)` ends the call (tests use it).
  template <class Reply, class Handle, class Fill, class... Ts>
  void post(std::function<void(const status&)> done, Handle handle, Fill fill, Ts... xs) {
    auto job = std::make_shared<bridged_call>();
    job->done = std::move(done);
    job->send = [handle, fill, xs...](caf::event_based_actor* self, const bridged_call_ptr& me) {
      self->request(handle, caf::infinite, xs...)
          .then(
              [me, fill](Reply& reply) {
                if (me->finished) return;  // the sweep ended it already
                fill(reply);
                finish_bridged(me, {});
              },
              [me](caf::error& err) { finish_bridged(me, actors::to_status(err)); });
    };
    caf::anon_send(next(), std::move(job));
  }

 private:
  const caf::actor& next() { return bridges_[next_++ % bridges_.size()]; }

  std::vector<caf::actor> bridges_;
  std::atomic<size_t> next_{0};
};

}  // namespace weightd::api
