// The gRPC server: WeightService, ObjectService and AdminService on gRPC's
// callback API. A handler never blocks its gRPC thread: each call becomes a
// request (finite deadline) from a short-lived actor, which finishes the
// reactor when the reply comes. Object bytes stream between the call and the
// tier files in chunks of at most 4 MiB; only metadata goes through actors.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "actors/node.hpp"
#include "api/common/wire.hpp"
#include "api/server/stream_limits.hpp"

namespace weightd::api {

class rpc_metrics;

struct server_options {
  std::string listen = "127.0.0.1:7070";  // host:port; port 0 picks a free one
  std::shared_ptr<rpc_metrics> metrics;   // counts every call when set
  std::chrono::seconds timeout{60};       // per actor request
  stream_limit_options streams;           // open Put/Get streams, idle Puts
  std::string version = "dev";
};

/// Is `listen` (host:port) a loopback address (127.x, localhost, [::1])?
bool is_loopback_address(const std::string& listen);

class grpc_server {
 public:
  /// Binds and starts serving `node`. Listening beyond loopback is refused
  /// until authentication exists (SPEC §9).
  static result<std::unique_ptr<grpc_server>> start(caf::actor_system& sys, actors::node& node,
                                                    server_options options);
  ~grpc_server();

  int port() const { return port_; }
  /// Stops accepting calls and waits up to `drain` for in-flight ones.
  void shutdown(std::chrono::milliseconds drain);

 private:
  grpc_server() = default;
  struct services;
  std::unique_ptr<services> services_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace weightd::api
