#include "api/server/metrics.hpp"

#include "api/common/enum_names.hpp"

#include <httplib.h>
#include <spdlog/fmt/fmt.h>

#include <chrono>

#include "api/common/grpc_status.hpp"

namespace weightd::api {

namespace {

using grpc::experimental::InterceptionHookPoints;

class metrics_interceptor_impl final : public grpc::experimental::Interceptor {
 public:
  metrics_interceptor_impl(std::string rpc, std::shared_ptr<rpc_metrics> metrics)
      : rpc_(std::move(rpc)), metrics_(std::move(metrics)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      std::string code = "OK";
      if (auto* trailers = methods->GetSendTrailingMetadata())
        if (auto it = trailers->find(kErrorMetadata); it != trailers->end()) code = it->second;
      auto st = methods->GetSendStatus();
      if (code == "OK" && !st.ok()) code = "GRPC_" + std::to_string(st.error_code());
      metrics_->record(rpc_, code, std::chrono::duration<double>(
                                       std::chrono::steady_clock::now() - start_).count());
    }
    methods->Proceed();
  }

 private:
  std::string rpc_;
  std::shared_ptr<rpc_metrics> metrics_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

class metrics_factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit metrics_factory(std::shared_ptr<rpc_metrics> m) : metrics_(std::move(m)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    std::string method = info->method();  // "/weightd.v1.WeightService/BeginImport"
    return new metrics_interceptor_impl(method.substr(method.rfind('/') + 1), metrics_);
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

}  // namespace

void rpc_metrics::record(const std::string& rpc, const std::string& code, double seconds) {
  std::lock_guard lock(mutex_);
  auto& c = by_rpc_code_[{rpc, code}];
  ++c.count;
  c.seconds += seconds;
}

std::string rpc_metrics::render() const {
  std::lock_guard lock(mutex_);
  std::string out =
      "# HELP weightd_requests_total gRPC requests by RPC and weightd code.\n"
      "# TYPE weightd_requests_total counter\n";
  for (const auto& [key, c] : by_rpc_code_)
    out += fmt::format("weightd_requests_total{{rpc=\"{}\",code=\"{}\"}} {}\n", key.first,
                       key.second, c.count);
  out += "# HELP weightd_request_seconds_total Time spent serving gRPC requests.\n"
         "# TYPE weightd_request_seconds_total counter\n";
  for (const auto& [key, c] : by_rpc_code_)
    out += fmt::format("weightd_request_seconds_total{{rpc=\"{}\",code=\"{}\"}} {:.6f}\n",
                       key.first, key.second, c.seconds);
  return out;
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> metrics_interceptor(
    std::shared_ptr<rpc_metrics> metrics) {
  return std::make_unique<metrics_factory>(std::move(metrics));
}

result<std::unique_ptr<metrics_server>> metrics_server::start(caf::actor_system& sys,
                                                              actors::node& node,
                                                              std::shared_ptr<rpc_metrics> rpcs,
                                                              const std::string& listen) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos)
    return status{errc::invalid_argument, "--http-listen must be host:port"};
  std::unique_ptr<metrics_server> m{new metrics_server};
  m->sys_ = &sys;
  m->node_ = &node;
  m->rpcs_ = std::move(rpcs);
  m->http_ = std::make_unique<httplib::Server>();
  // httplib sets SO_REUSEPORT: a second daemon would bind the same port and
  // split the scrapes. One port, one daemon.
  m->http_->set_socket_options([](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  auto* self = m.get();
  m->http_->Get("/metrics", [self](const httplib::Request&, httplib::Response& res) {
    res.set_content(self->render(), "text/plain; version=0.0.4");
  });
  m->http_->Get("/healthz", [self](const httplib::Request&, httplib::Response& res) {
    // 503 names what is wrong: a core actor stopped, the journal refuses
    // writes since a commit failed, or it does not answer.
    auto failure = self->node_->health().failure();
    if (failure.empty()) {
      auto js = ask<actors::journal_stats>(*self->sys_, self->node_->journal(), actors::stats_atom::value);
      if (!js) failure = "the journal writer does not answer";
      else if (!js->refusing_writes.empty())
        failure = "the journal refuses writes: " + js->refusing_writes + "; restart weightd";
    }
    res.status = failure.empty() ? 200 : 503;
    res.set_content(failure.empty() ? "ok\n" : failure + "\n", "text/plain");
  });
  auto host = listen.substr(0, colon);
  int port = std::stoi(listen.substr(colon + 1));
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

std::string metrics_server::render() {
  std::string out = rpcs_->render();
  auto gauge = [&](const char* name, const char* help, uint64_t value, const std::string& labels = "") {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{}{} {}\n", name, help, name, name,
                       labels.empty() ? "" : "{" + labels + "}", value);
  };
  out += fmt::format("# HELP weightd_startup_seconds How long the last start took (replay, tier check, "
                     "spawning).\n# TYPE weightd_startup_seconds gauge\nweightd_startup_seconds {:.3f}\n",
                     node_->startup_seconds());
  if (auto js = ask<actors::journal_stats>(*sys_, node_->journal(), actors::stats_atom::value)) {
    gauge("weightd_journal_seq", "Highest committed journal seq.", js->highest_seq);
    gauge("weightd_journal_commits", "Journal transactions committed.", js->commits);
    gauge("weightd_journal_events", "Events in committed transactions.", js->events);
    gauge("weightd_journal_last_commit_microseconds", "Duration of the last commit (fsync included).",
          js->last_commit_us);
    gauge("weightd_journal_commit_microseconds_total", "Time spent committing.", js->total_commit_us);
  }
  if (auto ss = ask<actors::store_stats>(*sys_, node_->objects(), actors::stats_atom::value)) {
    for (auto [tier, usage] : {std::pair{"HOT", ss->hot}, std::pair{"COLD", ss->cold}}) {
      auto labels = fmt::format("tier=\"{}\"", tier);
      gauge("weightd_tier_used_bytes", "Bytes of committed replicas.", usage.used_bytes, labels);
      gauge("weightd_tier_reserved_bytes", "Bytes reserved by puts and copies.", usage.reserved_bytes, labels);
      gauge("weightd_tier_capacity_bytes", "Configured capacity (0 = unlimited).", usage.capacity_bytes, labels);
    }
    gauge("weightd_objects", "Objects in the key space.", ss->objects);
    out += "# HELP weightd_guard_skips_total Managed objects skipped by eviction and cleanup.\n"
           "# TYPE weightd_guard_skips_total counter\n";
    for (const auto& [op, n] : ss->guard_skips)
      out += fmt::format("weightd_guard_skips_total{{op=\"{}\"}} {}\n", op, n);
    auto counter = [&](const char* name, const char* help, uint64_t value) {
      out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, value);
    };
    counter("weightd_spills_total",
            "Puts of an importing revision's members written to COLD because HOT was full.",
            ss->spills);
    counter("weightd_hot_allocation_failures_total",
            "HOT reservations refused even after eviction (they count as memory pressure).",
            ss->hot_allocation_failures);
    counter("weightd_scrub_bytes_total", "Replica bytes the scrub re-read against their checksums.",
            ss->scrub_bytes);
    counter("weightd_scrub_corrupt_total",
            "Replicas the scrub dropped because their bytes no longer match (or their file is gone).",
            ss->scrub_corrupt);
    out += "# HELP weightd_migrated_bytes_total Bytes copied between the tiers by migrations.\n"
           "# TYPE weightd_migrated_bytes_total counter\n";
    out += fmt::format("weightd_migrated_bytes_total{{to=\"HOT\"}} {}\n", ss->copied_to_hot_bytes);
    out += fmt::format("weightd_migrated_bytes_total{{to=\"COLD\"}} {}\n", ss->copied_to_cold_bytes);
  }
  if (auto rs = ask<actors::registry_stats>(*sys_, node_->registry(), actors::stats_atom::value)) {
    out += "# HELP weightd_revisions Revisions by availability.\n# TYPE weightd_revisions gauge\n";
    for (const auto& [state, n] : rs->revisions)
      out += fmt::format("weightd_revisions{{state=\"{}\"}} {}\n", state, n);
    out += "# HELP weightd_leases Revision leases not yet released, expired or revoked.\n"
           "# TYPE weightd_leases gauge\n";
    out += fmt::format("weightd_leases {}\n", rs->live_leases);
    out += "# HELP weightd_revisions_by_residency READY and DEGRADED revisions by residency.\n"
           "# TYPE weightd_revisions_by_residency gauge\n";
    for (const auto& [residency, n] : rs->residency)
      out += fmt::format("weightd_revisions_by_residency{{residency=\"{}\"}} {}\n",
                         short_enum_name(events::v1::Residency_descriptor()
                                             ->FindValueByName(residency)->number(),
                                         events::v1::Residency_descriptor()),
                         n);
    out += "# HELP weightd_operations Operations by state (terminal ones since the start).\n"
           "# TYPE weightd_operations gauge\n";
    for (const auto& [state, n] : rs->operations)
      out += fmt::format("weightd_operations{{state=\"{}\"}} {}\n", state, n);
    auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch()).count();
    out += "# HELP weightd_oldest_running_operation_seconds Age of the oldest RUNNING operation (0 = none).\n"
           "# TYPE weightd_oldest_running_operation_seconds gauge\n";
    out += fmt::format("weightd_oldest_running_operation_seconds {:.3f}\n",
                       rs->oldest_running_operation_ms
                           ? static_cast<double>(now_ms - rs->oldest_running_operation_ms) / 1000.0
                           : 0.0);
  }
  return out;
}

}  // namespace weightd::api
