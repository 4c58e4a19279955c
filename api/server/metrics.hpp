// Prometheus metrics and health on a separate HTTP port (cpp-httplib), in the
// text format of Debian's prometheus-cpp (Registry, Family, TextSerializer).
//
// RPC counts and latencies are recorded by a gRPC server interceptor — one
// place for every service — into prometheus-cpp counters and histograms.
// Everything else (journal position and commit time, tier bytes, revisions by
// state, guard skips) is asked of the actors when /metrics is scraped, on the
// HTTP thread (never a gRPC or CAF worker thread), and handed to the
// serializer as metric families of their own: those figures are the actors'
// totals, which a prometheus::Counter (increment only) cannot be set to.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "actors/node.hpp"

namespace httplib {
class Server;
}

namespace weightd::api {

struct follower_status;  // follower.hpp
struct mirror_status;    // replica_mirror.hpp

/// Requests by (rpc, code): a counter and a latency histogram in seconds.
class rpc_metrics {
 public:
  rpc_metrics();
  void record(const std::string& rpc, const std::string& code, double seconds);
  /// The families as the serializer takes them.
  std::vector<prometheus::MetricFamily> collect() const;

  /// From 100 µs (a Stat answered from memory) to 60 s (the actor timeout).
  static const prometheus::Histogram::BucketBoundaries& latency_buckets();

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Histogram>* durations_;
};

/// The interceptor factory to register with the gRPC server.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> metrics_interceptor(
    std::shared_ptr<rpc_metrics> metrics);

/// What is wrong with the node, "" while it is healthy: a core actor
/// stopped, the journal refuses writes since a commit failed, or the journal
/// does not answer. /healthz and the gRPC health service both ask this.
/// Blocks the calling thread up to 5 s (a round trip to the journal).
std::string node_failure(caf::actor_system& sys, actors::node& node);

/// What a standby's /metrics shows (SPEC §11): where its journal is
/// against its leader's, and its copies of the replicas.
std::vector<prometheus::MetricFamily> standby_families(const follower_status& following,
                                                       const mirror_status& mirror,
                                                       const std::string& version);

/// /metrics and /healthz on their own port.
class metrics_server {
 public:
  /// What the pages show: the metric families, and what is wrong ("" =
  /// healthy: /healthz answers 200).
  struct source {
    std::function<std::vector<prometheus::MetricFamily>()> families;
    std::function<std::string()> failure;
  };
  /// A leader's: its RPCs and the node's figures.
  static result<std::unique_ptr<metrics_server>> start(caf::actor_system& sys, actors::node& node,
                                                       std::shared_ptr<rpc_metrics> rpcs,
                                                       const std::string& listen,
                                                       std::string version = "dev");
  static result<std::unique_ptr<metrics_server>> start(source from, const std::string& listen);
  ~metrics_server();
  int port() const { return port_; }

 private:
  metrics_server() = default;

  source source_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace weightd::api
