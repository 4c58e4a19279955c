// The gRPC server's lifecycle: TLS, binding, the health and reflection
// services, draining at shutdown. The services it serves are a file each
// (services.hpp: WeightService, ObjectService, AdminService), their streams
// too (streams.hpp: Watch, Put, Get). A handler never blocks its gRPC
// thread: a unary call is posted to a long-lived bridge actor, whose request
// (with the server's deadline) finishes the reactor when the reply comes
// (call_bridge.hpp). Besides weightd.v1, the server answers the standard
// grpc.health.v1.Health (SERVING while /healthz would say ok) and server
// reflection (grpcurl lists and describes the services). Object bytes stream
// between the call and the tier files in chunks of at most 4 MiB; only
// metadata goes through actors.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "actors/node.hpp"
#include "api/common/wire.hpp"
#include "api/server/auth.hpp"
#include "api/server/stream_limits.hpp"
#include "api/server/sync_gate.hpp"

namespace weightd::api {

class rpc_metrics;

struct server_options {
  std::string listen = "127.0.0.1:7070";  // host:port; port 0 picks a free one
  std::shared_ptr<rpc_metrics> metrics;   // counts every call when set
  std::chrono::seconds timeout{60};       // per actor request
  stream_limit_options streams;           // open Put/Get streams, idle Puts
  std::string version = "dev";
  bool local_reads = true;  // serve OpenLocal (SPEC §4 Local reads; --local-reads)
  /// Who may call what (SPEC §9); null = security off (loopback only).
  std::shared_ptr<authenticator> auth;
  std::string tls_cert_file, tls_key_file;  // PEM; both or neither
  std::string tls_client_ca_file;           // PEM; set: clients must present a certificate it signed
  /// SPEC §11 Acknowledgement (--sync-standbys); null = writes answered at once.
  std::shared_ptr<sync_gate> sync;
};

/// Is `listen` (host:port) a loopback address (127.x, localhost, [::1])?
bool is_loopback_address(const std::string& listen);

/// TLS (and mutual TLS) when its files are given, else plaintext; beyond
/// loopback both TLS and a tokens file are required (SPEC §9).
result<std::shared_ptr<grpc::ServerCredentials>> server_credentials(const server_options& o);

class grpc_server {
 public:
  /// Binds and starts serving `node`. Listening beyond loopback needs a
  /// tokens file and TLS (SPEC §9): without them it is refused, naming what
  /// is missing.
  static result<std::unique_ptr<grpc_server>> start(caf::actor_system& sys, actors::node& node,
                                                    server_options options);
  ~grpc_server();

  int port() const { return port_; }
  /// The object streams' limits and what they hold now (tests, metrics).
  const stream_limits& limits() const;
  /// Stops accepting calls, answers health checks NOT_SERVING, and waits up
  /// to `drain` for in-flight calls; those still running then are cancelled.
  void shutdown(std::chrono::milliseconds drain);

  /// How often grpc.health.v1.Health follows /healthz's verdict.
  static constexpr std::chrono::milliseconds kHealthInterval{250};

 private:
  grpc_server() = default;
  /// The health thread: SERVING while node_failure() is "", NOT_SERVING else.
  void watch_health();
  void stop_health();

  struct services;
  caf::actor_system* sys_ = nullptr;
  actors::node* node_ = nullptr;
  std::unique_ptr<services> services_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::thread health_;
  std::mutex health_mutex_;
  std::condition_variable health_wakeup_;
  bool stopping_ = false;
};

}  // namespace weightd::api
