// The services of weightd.v1, one file each: WeightService
// (weight_service.cpp), ObjectService (object_service.cpp), AdminService
// (admin_service.cpp), ReplicationService (replication_service.cpp). Every unary call goes through the call bridge
// (call_bridge.hpp); the streams are streams.hpp's.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/service_type.h>

#include <memory>

#include "actors/node.hpp"
#include "api/server/call_bridge.hpp"
#include "api/server/server.hpp"
#include "api/server/stream_limits.hpp"
#include "api/weightd.pb.h"

namespace weightd::api {

std::unique_ptr<grpc::Service> make_weight_service(call_bridge& bridge, actors::node& node,
                                                   const server_options& o, stream_limits& limits);
std::unique_ptr<grpc::Service> make_object_service(caf::actor_system& sys, call_bridge& bridge,
                                                   actors::node& node, const server_options& o,
                                                   stream_limits& limits);
std::unique_ptr<grpc::Service> make_admin_service(caf::actor_system& sys, call_bridge& bridge,
                                                  actors::node& node, const server_options& o);
/// History (SPEC §4) from the journal reader: the leader's and a standby's.
grpc::ServerUnaryReactor* answer_history(call_bridge& bridge, actors::journal_reader_actor reader,
                                         const authenticator& auth,
                                         grpc::CallbackServerContext* ctx,
                                         const v1::HistoryRequest& req,
                                         v1::HistoryResponse* resp);
/// ReplicationService (replication_service.cpp): a standby's Follow stream.
std::unique_ptr<grpc::Service> make_replication_service(actors::node& node, const server_options& o,
                                                        stream_limits& limits);

}  // namespace weightd::api
