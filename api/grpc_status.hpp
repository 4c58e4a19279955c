// SPEC §5 errors on the wire, in one place: each weightd code has one gRPC
// status code; the domain code travels as trailing metadata
// `weightd-error: <CODE>`; the message is the status's (it says what to do).
#pragma once

#include <grpcpp/grpcpp.h>

#include "events/status.hpp"

namespace weightd::api {

inline constexpr const char* kErrorMetadata = "weightd-error";

grpc::StatusCode grpc_code(errc code);

/// The status to finish a call with; adds the trailing metadata to `ctx`.
grpc::Status to_grpc(grpc::ServerContextBase* ctx, const status& st);

/// The weightd status a client sees (code from the trailing metadata).
status from_grpc(const grpc::ClientContext& ctx, const grpc::Status& st);

}  // namespace weightd::api
