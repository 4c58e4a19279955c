#include "api/server/server.hpp"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include "api/common/pem.hpp"
#include "api/server/metrics.hpp"
#include "api/server/services.hpp"

namespace weightd::api {

result<std::shared_ptr<grpc::ServerCredentials>> server_credentials(const server_options& o) {
  bool tls = !o.tls_cert_file.empty() || !o.tls_key_file.empty();
  if (tls && (o.tls_cert_file.empty() || o.tls_key_file.empty()))
    return status{errc::invalid_argument, "--tls-cert-file and --tls-key-file go together"};
  if (!o.tls_client_ca_file.empty() && !tls)
    return status{errc::invalid_argument,
                  "--tls-client-ca-file needs --tls-cert-file and --tls-key-file"};
  if (!is_loopback_address(o.listen)) {
    std::string missing;
    if (!o.auth->secured()) missing = "--auth-tokens-file";
    if (!tls) missing += std::string{missing.empty() ? "" : " and "} + "--tls-cert-file/--tls-key-file";
    if (!missing.empty())
      return status{errc::invalid_argument,
                    "--listen " + o.listen + " is not a loopback address: serving beyond this "
                    "host needs authentication and TLS (SPEC §9); give " + missing};
  }
  if (!tls) return grpc::InsecureServerCredentials();
  auto cert = read_pem_file(o.tls_cert_file, "--tls-cert-file");
  if (!cert) return cert.error();
  auto key = read_pem_file(o.tls_key_file, "--tls-key-file");
  if (!key) return key.error();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  if (!o.tls_client_ca_file.empty()) {
    auto ca = read_pem_file(o.tls_client_ca_file, "--tls-client-ca-file");
    if (!ca) return ca.error();
    ssl.pem_root_certs = *ca;
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

bool is_loopback_address(const std::string& listen) {
  return listen.rfind("127.", 0) == 0 || listen.rfind("localhost:", 0) == 0 ||
         listen.rfind("[::1]:", 0) == 0;
}

struct grpc_server::services {
  services(caf::actor_system& sys, actors::node& node, const server_options& o)
      : limits(o.streams),
        bridge(sys, o.timeout),
        weights(make_weight_service(bridge, node, o, limits)),
        objects(make_object_service(sys, bridge, node, o, limits)),
        admin(make_admin_service(sys, bridge, node, o)),
        replication(make_replication_service(node, o, limits)) {}
  stream_limits limits;  // Put, Get, Watch and Follow streams share them
  call_bridge bridge;    // every unary call's way into the actors
  std::unique_ptr<grpc::Service> weights, objects, admin, replication;
};

const stream_limits& grpc_server::limits() const { return services_->limits; }

result<std::unique_ptr<grpc_server>> grpc_server::start(caf::actor_system& sys, actors::node& node,
                                                        server_options options) {
  if (!options.auth) {  // security off
    auto off = authenticator::open("");
    if (!off) return off.error();
    options.auth = *off;
  }
  auto credentials = server_credentials(options);
  if (!credentials) return credentials.error();
  std::unique_ptr<grpc_server> s{new grpc_server};
  s->sys_ = &sys;
  s->node_ = &node;
  // grpc.health.v1.Health (answered by gRPC itself, kept in step with the
  // node by the health thread) and grpc.reflection.v1alpha for grpcurl and
  // friends: both are process-wide switches read when the server is built.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  s->services_.reset(new services(sys, node, options));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, *credentials, &s->port_);
  builder.SetMaxReceiveMessageSize(static_cast<int>(kMaxChunkBytes + (64u << 10)));
  // A Follow message carries a batch of events, and one event may be as large
  // as the journal takes (kMaxEventBytes).
  builder.SetMaxSendMessageSize(
      static_cast<int>(std::max(kMaxChunkBytes, persistence::kMaxEventBytes) + (64u << 10)));
  // gRPC sets SO_REUSEPORT by default: a second daemon on a busy port would
  // start and share its calls. One port, one daemon.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // A standby's keepalive pings (every 10 s) on an idle Follow stream are welcome.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5'000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, static_cast<int>(kStreamWindowBytes));
  builder.RegisterService(s->services_->weights.get());
  builder.RegisterService(s->services_->objects.get());
  builder.RegisterService(s->services_->admin.get());
  builder.RegisterService(s->services_->replication.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> factories;
  factories.push_back(error_trailer_interceptor());  // first: metrics count its codes
  if (options.metrics) factories.push_back(metrics_interceptor(options.metrics));
  builder.experimental().SetInterceptorCreators(std::move(factories));
  s->server_ = builder.BuildAndStart();
  if (!s->server_ || s->port_ == 0)
    return status{errc::internal, "cannot listen on " + options.listen +
                                      "; is another process using the port? choose another --listen"};
  s->health_ = std::thread([self = s.get()] { self->watch_health(); });
  return s;
}

void grpc_server::watch_health() {
  auto* health = server_->GetHealthCheckService();
  bool serving = true;
  std::unique_lock lock(health_mutex_);
  while (!stopping_) {
    lock.unlock();
    auto failure = node_failure(*sys_, *node_);
    lock.lock();
    if (stopping_) break;  // Shutdown already answers NOT_SERVING
    if (failure.empty() != serving) {
      serving = failure.empty();
      if (serving) spdlog::info("grpc health SERVING again");
      else spdlog::warn("grpc health NOT_SERVING because {}", failure);
      health->SetServingStatus(serving);
    }
    health_wakeup_.wait_for(lock, kHealthInterval, [this] { return stopping_; });
  }
}

void grpc_server::stop_health() {
  {
    std::lock_guard lock(health_mutex_);
    stopping_ = true;
  }
  health_wakeup_.notify_all();
  if (health_.joinable()) health_.join();
}

void grpc_server::shutdown(std::chrono::milliseconds drain) {
  stop_health();
  // New calls are refused at once, idle connections get a GOAWAY; calls in
  // flight get until the deadline to finish, then they are cancelled.
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + drain);
}

grpc_server::~grpc_server() {
  shutdown(std::chrono::milliseconds(0));
  if (server_) server_->Wait();
}

}  // namespace weightd::api
