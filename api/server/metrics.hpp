// Prometheus metrics and health on a separate HTTP port (cpp-httplib).
//
// RPC counts and latencies are recorded by a gRPC server interceptor — one
// place for every service. Everything else (journal position and commit
// latency, tier bytes, revisions by state, guard skips) is asked of the
// actors when /metrics is scraped, on the HTTP thread (never a gRPC or CAF
// worker thread).
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "actors/node.hpp"

namespace httplib {
class Server;
}

namespace weightd::api {

/// Requests by (rpc, code) with their total latency.
class rpc_metrics {
 public:
  void record(const std::string& rpc, const std::string& code, double seconds);
  std::string render() const;  // Prometheus text

 private:
  struct counter {
    uint64_t count = 0;
    double seconds = 0;
  };
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, counter> by_rpc_code_;
};

/// The interceptor factory to register with the gRPC server.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> metrics_interceptor(
    std::shared_ptr<rpc_metrics> metrics);

/// /metrics and /healthz on their own port.
class metrics_server {
 public:
  static result<std::unique_ptr<metrics_server>> start(caf::actor_system& sys, actors::node& node,
                                                       std::shared_ptr<rpc_metrics> rpcs,
                                                       const std::string& listen);
  ~metrics_server();
  int port() const { return port_; }

 private:
  metrics_server() = default;
  std::string render();

  caf::actor_system* sys_ = nullptr;
  actors::node* node_ = nullptr;
  std::shared_ptr<rpc_metrics> rpcs_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace weightd::api
