// SPEC §5 errors on the wire, in one place: each weightd code has one gRPC
// status code; the domain code travels as trailing metadata
// `weightd-error: <CODE>`; the message is the status's (it says what to do).
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include <memory>

#include "events/status.hpp"

namespace weightd::api {

inline constexpr const char* kErrorMetadata = "weightd-error";

grpc::StatusCode grpc_code(errc code);

/// The status to finish a call with; adds the trailing metadata to `ctx`.
grpc::Status to_grpc(grpc::ServerContextBase* ctx, const status& st);

/// A server interceptor that gives every failed call the trailer: a status
/// gRPC itself produced (an RPC this version does not serve, a message over
/// the size limit) gets the domain code that matches its gRPC code, so a
/// client always finds `weightd-error`. Install it before any other.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> error_trailer_interceptor();

/// The weightd status a client sees (code from the trailing metadata).
status from_grpc(const grpc::ClientContext& ctx, const grpc::Status& st);

}  // namespace weightd::api
