#include "api/grpc_status.hpp"

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
  }
  return G::UNKNOWN;
}

grpc::Status to_grpc(grpc::ServerContextBase* ctx, const status& st) {
  if (st.ok()) return grpc::Status::OK;
  ctx->AddTrailingMetadata(kErrorMetadata, code_name(st.code()));
  return {grpc_code(st.code()), st.message()};
}

status from_grpc(const grpc::ClientContext& ctx, const grpc::Status& st) {
  if (st.ok()) return {};
  const auto& trailers = ctx.GetServerTrailingMetadata();
  if (auto it = trailers.find(kErrorMetadata); it != trailers.end()) {
    std::string name(it->second.data(), it->second.size());
    for (int c = 1; c <= static_cast<int>(errc::internal); ++c)
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
