// What the services of the gRPC server share: turning a call away with its
// status, and admitting a caller (SPEC §9) before the call does anything.
#pragma once

#include <grpcpp/grpcpp.h>

#include <type_traits>
#include <utility>

#include "api/common/grpc_status.hpp"
#include "api/server/auth.hpp"
#include "api/weightd.pb.h"

namespace weightd::api {

using grpc::CallbackServerContext;
using grpc::ServerUnaryReactor;

/// Finishes a unary call with `st` at once.
inline ServerUnaryReactor* reject(CallbackServerContext* ctx, const status& st) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(to_grpc(ctx, st));
  return reactor;
}

/// The caller of a call may make it (SPEC §9): the request with the caller's
/// tenant in every tenant field, or UNAUTHENTICATED / PERMISSION_DENIED.
template <class Request>
result<std::pair<caller, Request>> admit(const authenticator& auth, const grpc::ServerContextBase* ctx,
                                         const Request& req) {
  auto request = req;
  auto who = auth.authorize(*ctx, request);
  if (!who) return who.error();
  return std::pair{std::move(*who), std::move(request)};
}

/// Commands that name a lease or an operation by its id carry the caller's
/// tenant: one of another tenant is NOT_FOUND.
template <class T, class = void>
struct names_by_id : std::false_type {};
template <class T>
struct names_by_id<T, std::void_t<decltype(std::declval<T&>().caller_tenant)>> : std::true_type {};

/// The trailer that names where writes go (SPEC §11).
inline constexpr const char* kLeaderMetadata = "weightd-leader";

/// What a standby answers to a call only the leader serves: UNAVAILABLE,
/// `weightd-error: NOT_LEADER`, and the leader's address in the trailer.
inline grpc::Status not_leader_status(grpc::ServerContextBase* ctx, const std::string& leader,
                                      const std::string& rpc) {
  ctx->AddTrailingMetadata(kLeaderMetadata, leader);
  return to_grpc(ctx, {errc::not_leader,
                       "this weightd is a standby of " + leader + "; send " + rpc + " to the leader"});
}

inline ServerUnaryReactor* reject_not_leader(CallbackServerContext* ctx, const std::string& leader,
                                             const std::string& rpc) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(not_leader_status(ctx, leader, rpc));
  return reactor;
}

/// Status says who asked (SPEC §9): the token's name, tenant and role; with
/// security off the peer address.
inline void say_who_asked(const caller& who, v1::StatusResponse* resp) {
  resp->set_caller(who.principal);
  if (!who.secured) return;
  resp->set_caller_tenant(who.tenant);
  resp->set_caller_role(role_name(who.role));
}

}  // namespace weightd::api
