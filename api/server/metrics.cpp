#include "api/server/metrics.hpp"

#include <httplib.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "api/common/enum_names.hpp"
#include "api/common/grpc_status.hpp"
#include "api/server/follower.hpp"
#include "api/server/replica_mirror.hpp"

namespace weightd::api {

namespace {

using grpc::experimental::InterceptionHookPoints;
using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

/// gRPC's own name of a status code ("DEADLINE_EXCEEDED"): a metric label
/// is a name, never a raw number.
std::string grpc_code_name(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

class metrics_interceptor_impl final : public grpc::experimental::Interceptor {
 public:
  metrics_interceptor_impl(std::string rpc, std::shared_ptr<rpc_metrics> metrics,
                           grpc::ServerContextBase* context)
      : rpc_(std::move(rpc)), metrics_(std::move(metrics)), context_(context) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      // A call the client cancelled (an interrupted transfer) is CANCELLED,
      // whatever the handler answered to its broken stream.
      std::string code = "OK";
      if (auto* trailers = methods->GetSendTrailingMetadata())
        if (auto it = trailers->find(kErrorMetadata); it != trailers->end()) code = it->second;
      auto st = methods->GetSendStatus();
      if (code == "OK" && !st.ok()) code = grpc_code_name(st.error_code());
      if (context_ && context_->IsCancelled()) code = "CANCELLED";
      metrics_->record(rpc_, code, std::chrono::duration<double>(
                                       std::chrono::steady_clock::now() - start_).count());
    }
    methods->Proceed();
  }

 private:
  std::string rpc_;
  std::shared_ptr<rpc_metrics> metrics_;
  grpc::ServerContextBase* context_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

class metrics_factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit metrics_factory(std::shared_ptr<rpc_metrics> m) : metrics_(std::move(m)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    std::string method = info->method();  // "/weightd.v1.WeightService/BeginImport"
    return new metrics_interceptor_impl(method.substr(method.rfind('/') + 1), metrics_,
                                        info->server_context());
  }

 private:
  std::shared_ptr<rpc_metrics> metrics_;
};

template <class Reply, class Handle, class... Ts>
std::optional<Reply> ask(caf::actor_system& sys, Handle h, Ts... xs) {
  caf::scoped_actor self{sys};
  std::optional<Reply> out;
  self->request(h, std::chrono::seconds(5), xs...)
      .receive([&](Reply& r) { out = std::move(r); }, [](caf::error&) {});
  return out;
}

/// One family of figures the actors keep (no prometheus-cpp object holds
/// them): its samples are added with `sample`.
struct family_builder {
  MetricFamily family;

  family_builder(std::string name, std::string help, MetricType type) {
    family.name = std::move(name);
    family.help = std::move(help);
    family.type = type;
  }
  family_builder& sample(double value, std::vector<ClientMetric::Label> labels = {}) {
    ClientMetric m;
    m.label = std::move(labels);
    if (family.type == MetricType::Counter) m.counter.value = value;
    else m.gauge.value = value;
    family.metric.push_back(std::move(m));
    return *this;
  }
};

family_builder gauge(std::string name, std::string help) {
  return {std::move(name), std::move(help), MetricType::Gauge};
}
family_builder counter(std::string name, std::string help) {
  return {std::move(name), std::move(help), MetricType::Counter};
}

/// The node's figures, asked of its actors (below).
std::vector<MetricFamily> node_families(caf::actor_system& sys, actors::node& node,
                                        const std::string& version);

}  // namespace

rpc_metrics::rpc_metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      requests_(&prometheus::BuildCounter()
                     .Name("weightd_requests_total")
                     .Help("gRPC requests by RPC and weightd code.")
                     .Register(*registry_)),
      durations_(&prometheus::BuildHistogram()
                      .Name("weightd_request_duration_seconds")
                      .Help("Time from a gRPC call's start to its status, by RPC and weightd code.")
                      .Register(*registry_)) {}

const prometheus::Histogram::BucketBoundaries& rpc_metrics::latency_buckets() {
  static const prometheus::Histogram::BucketBoundaries buckets{
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
      0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};
  return buckets;
}

void rpc_metrics::record(const std::string& rpc, const std::string& code, double seconds) {
  const prometheus::Labels labels{{"rpc", rpc}, {"code", code}};
  requests_->Add(labels).Increment();
  durations_->Add(labels, latency_buckets()).Observe(seconds);
}

std::vector<MetricFamily> rpc_metrics::collect() const {
  auto families = registry_->Collect();
  // prometheus-cpp sorts labels by name; `rpc` first reads as before
  // (weightd_requests_total{rpc="Put",code="OK"}) and greps the same.
  for (auto& family : families)
    for (auto& metric : family.metric)
      std::stable_partition(metric.label.begin(), metric.label.end(),
                            [](const ClientMetric::Label& l) { return l.name == "rpc"; });
  return families;
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> metrics_interceptor(
    std::shared_ptr<rpc_metrics> metrics) {
  return std::make_unique<metrics_factory>(std::move(metrics));
}

std::string node_failure(caf::actor_system& sys, actors::node& node) {
  auto failure = node.health().failure();
  if (!failure.empty()) return failure;
  auto js = ask<actors::journal_stats>(sys, node.journal(), actors::stats_atom::value);
  if (!js) return "the journal writer does not answer";
  if (!js->refusing_writes.empty())
    return "the journal refuses writes: " + js->refusing_writes + "; restart weightd";
  return "";
}

result<std::unique_ptr<metrics_server>> metrics_server::start(caf::actor_system& sys,
                                                              actors::node& node,
                                                              std::shared_ptr<rpc_metrics> rpcs,
                                                              const std::string& listen,
                                                              std::string version) {
  source from;
  from.families = [&sys, &node, rpcs = std::move(rpcs), version = std::move(version)] {
    auto families = rpcs->collect();
    for (auto& f : node_families(sys, node, version)) families.push_back(std::move(f));
    return families;
  };
  from.failure = [&sys, &node] { return node_failure(sys, node); };
  return start(std::move(from), listen);
}

result<std::unique_ptr<metrics_server>> metrics_server::start(source from,
                                                              const std::string& listen) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos)
    return status{errc::invalid_argument, "--http-listen must be host:port"};
  std::unique_ptr<metrics_server> m{new metrics_server};
  m->source_ = std::move(from);
  m->http_ = std::make_unique<httplib::Server>();
  // httplib sets SO_REUSEPORT: a second daemon would bind the same port and
  // split the scrapes. One port, one daemon.
  m->http_->set_socket_options([](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  auto* self = m.get();
  m->http_->Get("/metrics", [self](const httplib::Request&, httplib::Response& res) {
    res.set_content(prometheus::TextSerializer{}.Serialize(self->source_.families()),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
  m->http_->Get("/healthz", [self](const httplib::Request&, httplib::Response& res) {
    // 503 names what is wrong.
    auto failure = self->source_.failure();
    res.status = failure.empty() ? 200 : 503;
    res.set_content(failure.empty() ? "ok\n" : failure + "\n", "text/plain");
  });
  auto host = listen.substr(0, colon);
  int port = 0;
  try {
    port = std::stoi(listen.substr(colon + 1));
  } catch (const std::exception&) {
    return status{errc::invalid_argument, "--http-listen must be host:port, port a number"};
  }
  m->port_ = port == 0 ? m->http_->bind_to_any_port(host) : (m->http_->bind_to_port(host, port) ? port : -1);
  if (m->port_ <= 0)
    return status{errc::internal, "cannot listen on " + listen + " for metrics; choose another --http-listen"};
  m->thread_ = std::thread([self] { self->http_->listen_after_bind(); });
  return m;
}

metrics_server::~metrics_server() {
  if (http_) http_->stop();
  if (thread_.joinable()) thread_.join();
}

namespace {

std::vector<MetricFamily> node_families(caf::actor_system& sys, actors::node& node,
                                        const std::string& version) {
  auto* sys_ = &sys;
  auto* node_ = &node;
  const auto& version_ = version;
  std::vector<MetricFamily> out;
  auto add = [&](const family_builder& b) { out.push_back(b.family); };
  auto add_one = [&](family_builder b, double value) { add(b.sample(value)); };

  add(gauge("weightd_build_info", "Always 1; the labels say which weightd and gRPC serve.")
          .sample(1, {{"version", version_}, {"grpc_version", grpc::Version()}}));
  add_one(gauge("weightd_startup_seconds",
                "How long the last start took (replay, tier check, spawning)."),
          node_->startup_seconds());
  add_one(gauge("weightd_healthy", "1 while /healthz answers 200, 0 while it answers 503."),
          node_failure(*sys_, *node_).empty() ? 1 : 0);

  if (auto js = ask<actors::journal_stats>(*sys_, node_->journal(), actors::stats_atom::value)) {
    add_one(gauge("weightd_journal_seq", "Highest committed journal seq."), js->highest_seq);
    add_one(counter("weightd_journal_commits_total", "Journal transactions committed."), js->commits);
    add_one(counter("weightd_journal_events_total", "Events in committed transactions."), js->events);
    add_one(gauge("weightd_journal_last_commit_seconds",
                  "Duration of the last commit (fsync included)."),
            js->last_commit_us / 1e6);
    add_one(counter("weightd_journal_commit_seconds_total", "Time spent committing (fsync included)."),
            js->total_commit_us / 1e6);
  }
  if (auto ss = ask<actors::store_stats>(*sys_, node_->objects(), actors::stats_atom::value)) {
    auto used = gauge("weightd_tier_used_bytes", "Bytes of committed replicas, by tier.");
    auto reserved = gauge("weightd_tier_reserved_bytes", "Bytes reserved by puts and copies, by tier.");
    auto capacity = gauge("weightd_tier_capacity_bytes", "Configured capacity by tier (0 = unlimited).");
    for (auto [tier, usage] : {std::pair{"HOT", ss->hot}, std::pair{"COLD", ss->cold}}) {
      used.sample(usage.used_bytes, {{"tier", tier}});
      reserved.sample(usage.reserved_bytes, {{"tier", tier}});
      capacity.sample(usage.capacity_bytes, {{"tier", tier}});
    }
    add(used);
    add(reserved);
    add(capacity);
    add_one(gauge("weightd_objects", "Objects in the key space."), ss->objects);
    auto skips = counter("weightd_guard_skips_total", "Managed objects skipped by eviction and cleanup.");
    for (const auto& [op, n] : ss->guard_skips) skips.sample(n, {{"op", op}});
    add(skips);
    add_one(counter("weightd_spills_total",
                    "Puts of an importing revision's members written to COLD because HOT was full."),
            ss->spills);
    add_one(counter("weightd_hot_allocation_failures_total",
                    "HOT reservations refused even after eviction (they count as memory pressure)."),
            ss->hot_allocation_failures);
    add_one(counter("weightd_scrub_bytes_total",
                    "Replica bytes the scrub re-read against their checksums."),
            ss->scrub_bytes);
    add_one(counter("weightd_scrub_corrupt_total",
                    "Replicas the scrub dropped because their bytes no longer match (or their file "
                    "is gone)."),
            ss->scrub_corrupt);
    auto migrated = counter("weightd_migrated_bytes_total",
                            "Bytes copied between the tiers by migrations and repairs, by target tier.");
    migrated.sample(ss->copied_to_hot_bytes, {{"to", "HOT"}});
    migrated.sample(ss->copied_to_cold_bytes, {{"to", "COLD"}});
    add(migrated);
  }
  if (auto rs = ask<actors::registry_stats>(*sys_, node_->registry(), actors::stats_atom::value)) {
    auto revisions = gauge("weightd_revisions", "Revisions by availability.");
    for (const auto& [state, n] : rs->revisions) revisions.sample(n, {{"state", state}});
    add(revisions);
    add_one(gauge("weightd_leases", "Revision leases not yet released, expired or revoked."),
            rs->live_leases);
    auto residency = gauge("weightd_revisions_by_residency", "READY and DEGRADED revisions by residency.");
    const auto* residencies = events::v1::Residency_descriptor();
    for (const auto& [name, n] : rs->residency) {
      const auto* value = residencies->FindValueByName(name);
      residency.sample(n, {{"residency", value ? short_enum_name(value->number(), residencies) : name}});
    }
    add(residency);
    auto operations = gauge("weightd_operations", "Operations by state (terminal ones since the start).");
    for (const auto& [state, n] : rs->operations) operations.sample(n, {{"state", state}});
    add(operations);
    auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch()).count();
    add_one(gauge("weightd_oldest_running_operation_seconds",
                  "Age of the oldest RUNNING operation (0 = none)."),
            rs->oldest_running_operation_ms
                ? static_cast<double>(now_ms - rs->oldest_running_operation_ms) / 1000.0
                : 0.0);
  }
  return out;
}

}  // namespace

std::vector<MetricFamily> standby_families(const follower_status& following,
                                           const mirror_status& mirror,
                                           const std::string& version) {
  std::vector<MetricFamily> out;
  auto add = [&](const family_builder& b) { out.push_back(b.family); };
  auto add_one = [&](family_builder b, double value) { add(b.sample(value)); };
  add(gauge("weightd_build_info", "Always 1; the labels say which weightd and gRPC serve.")
          .sample(1, {{"version", version}, {"grpc_version", grpc::Version()}}));
  add_one(gauge("weightd_standby", "1 on a standby (SPEC §11), which serves reads only."), 1);
  add_one(gauge("weightd_journal_seq", "Highest committed journal seq."), following.durable_seq);
  add_one(gauge("weightd_standby_leader_seq", "The leader's journal seq as last heard."),
          following.leader_seq);
  add_one(gauge("weightd_standby_following", "1 while a stream from the leader is open."),
          following.connected ? 1 : 0);
  add_one(gauge("weightd_standby_lag_seconds",
                "0 while the standby holds every event its leader told it of, else the time "
                "since it last did."),
          static_cast<double>(following.lag_ms(std::chrono::steady_clock::now())) / 1000.0);
  auto objects = gauge("weightd_mirror_objects",
                       "Objects of the standby's journal by whether their bytes are here.");
  objects.sample(static_cast<double>(mirror.held), {{"state", "held"}});
  objects.sample(static_cast<double>(mirror.pending), {{"state", "pending"}});
  add(objects);
  add_one(counter("weightd_mirror_copied_bytes_total",
                  "Replica bytes the standby copied from its leader."),
          static_cast<double>(mirror.copied_bytes));
  add_one(counter("weightd_mirror_copied_objects_total",
                  "Replicas the standby copied from its leader."),
          static_cast<double>(mirror.copied_objects));
  add_one(counter("weightd_mirror_failures_total",
                  "Copies from the leader that failed and were tried again."),
          static_cast<double>(mirror.failures));
  return out;
}

}  // namespace weightd::api
