// The server's streams, each a gRPC reactor that moves one object's bytes or
// the journal's events and talks to the actors only for metadata: Watch
// (watch_stream.cpp), Put and Get (object_streams.cpp). Each starts admitted
// by the caller's token and within the stream limits (stream_limits.hpp).
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "actors/actors.hpp"
#include "api/server/auth.hpp"
#include "api/server/stream_limits.hpp"
#include "api/weightd.grpc.pb.h"

namespace weightd::api {

grpc::ServerWriteReactor<events::v1::Envelope>* start_watch(actors::journal_reader_actor reader,
                                                            stream_limits& limits,
                                                            const authenticator& auth,
                                                            grpc::CallbackServerContext* ctx,
                                                            const v1::WatchRequest& req);

grpc::ServerReadReactor<v1::PutRequest>* start_put(caf::actor_system& sys,
                                                   actors::object_store_actor store,
                                                   std::chrono::seconds timeout,
                                                   stream_limits& limits,
                                                   const authenticator& auth,
                                                   grpc::CallbackServerContext* ctx,
                                                   v1::PutResponse* resp);

grpc::ServerWriteReactor<v1::GetResponse>* start_get(caf::actor_system& sys,
                                                     actors::object_store_actor store,
                                                     std::chrono::seconds timeout,
                                                     stream_limits& limits,
                                                     const authenticator& auth,
                                                     grpc::CallbackServerContext* ctx,
                                                     const v1::GetRequest* req);

}  // namespace weightd::api
