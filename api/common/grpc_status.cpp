#include "api/common/grpc_status.hpp"

namespace weightd::api {

grpc::StatusCode grpc_code(errc code) {
  using G = grpc::StatusCode;
  switch (code) {
    case errc::ok: return G::OK;
    case errc::invalid_argument: return G::INVALID_ARGUMENT;
    case errc::not_found: return G::NOT_FOUND;
    case errc::conflict: return G::ALREADY_EXISTS;
    case errc::stale_generation: return G::ABORTED;
    case errc::not_ready: return G::FAILED_PRECONDITION;
    case errc::busy: return G::UNAVAILABLE;
    case errc::lease_expired: return G::FAILED_PRECONDITION;
    case errc::policy_unsatisfiable: return G::FAILED_PRECONDITION;
    case errc::generation_exhausted: return G::RESOURCE_EXHAUSTED;
    case errc::durability_failed: return G::UNAVAILABLE;
    case errc::managed_object: return G::FAILED_PRECONDITION;
    case errc::object_has_lease: return G::FAILED_PRECONDITION;
    case errc::object_already_exists: return G::ALREADY_EXISTS;
    case errc::no_available_space: return G::RESOURCE_EXHAUSTED;
    case errc::unauthenticated: return G::UNAUTHENTICATED;
    case errc::permission_denied: return G::PERMISSION_DENIED;
    case errc::data_loss: return G::DATA_LOSS;
    case errc::internal: return G::INTERNAL;
    case errc::resource_exhausted: return G::RESOURCE_EXHAUSTED;
    case errc::unimplemented: return G::UNIMPLEMENTED;
    case errc::not_leader: return G::UNAVAILABLE;
  }
  return G::UNKNOWN;
}

grpc::Status to_grpc(grpc::ServerContextBase* ctx, const status& st) {
  if (st.ok()) return grpc::Status::OK;
  ctx->AddTrailingMetadata(kErrorMetadata, code_name(st.code()));
  return {grpc_code(st.code()), st.message()};
}

namespace {

/// The domain code for a status that gRPC made without weightd.
errc domain_code(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNIMPLEMENTED: return errc::unimplemented;
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return errc::resource_exhausted;
    case grpc::StatusCode::INVALID_ARGUMENT: return errc::invalid_argument;
    case grpc::StatusCode::UNAUTHENTICATED: return errc::unauthenticated;
    case grpc::StatusCode::PERMISSION_DENIED: return errc::permission_denied;
    default: return errc::internal;
  }
}

class error_trailer final : public grpc::experimental::Interceptor {
 public:
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      auto st = methods->GetSendStatus();
      auto* trailers = methods->GetSendTrailingMetadata();
      // A cancelled call has nobody to read a trailer (and is no weightd error).
      if (!st.ok() && st.error_code() != grpc::StatusCode::CANCELLED && trailers &&
          trailers->find(kErrorMetadata) == trailers->end())
        trailers->emplace(kErrorMetadata, code_name(domain_code(st.error_code())));
    }
    methods->Proceed();
  }
};

class error_trailer_factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo*) override {
    return new error_trailer;
  }
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> error_trailer_interceptor() {
  return std::make_unique<error_trailer_factory>();
}

status from_grpc(const grpc::ClientContext& ctx, const grpc::Status& st) {
  if (st.ok()) return {};
  const auto& trailers = ctx.GetServerTrailingMetadata();
  if (auto it = trailers.find(kErrorMetadata); it != trailers.end()) {
    std::string name(it->second.data(), it->second.size());
    for (int c = 1; c <= static_cast<int>(kLastErrc); ++c)
      if (name == code_name(static_cast<errc>(c))) return {static_cast<errc>(c), st.error_message()};
  }
  // No weightd code: a transport error (unreachable daemon, deadline).
  if (st.error_code() == grpc::StatusCode::UNAVAILABLE ||
      st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
    return {errc::busy, "weightd is unreachable or too slow (" + st.error_message() +
                            "); is the daemon running at that address?"};
  return {errc::internal, "gRPC error " + std::to_string(st.error_code()) + ": " + st.error_message()};
}

}  // namespace weightd::api
