// The server's streams, each a gRPC reactor that moves one object's bytes or
// the journal's events and talks to the actors only for metadata: Watch
// (watch_stream.cpp), Put and Get (object_streams.cpp). Each starts admitted
// by the caller's token and within the stream limits (stream_limits.hpp).
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "actors/actors.hpp"
#include "api/server/auth.hpp"
#include "api/server/call_bridge.hpp"
#include "api/server/stream_limits.hpp"
#include "api/weightd.grpc.pb.h"

namespace weightd::api {

/// What the journal reader holds for a Watch or Follow stream: it outlives
/// the stream and hands it batches (journal_reader.hpp). `Stream` takes a
/// batch with take_batch() and ends with finish(status), both called under
/// the stream's lock; once the call is done the stream sets `stream` to null
/// and a batch still on its way is dropped.
template <class Stream>
struct journal_sink final : actors::watch_sink {
  journal_sink(std::shared_ptr<put_watch> w, Stream* s) : watch(std::move(w)), stream(s) {}
  bool deliver(std::vector<events::v1::Envelope> batch) override {
    std::lock_guard<std::recursive_mutex> lock(watch->lock);
    if (!stream || watch->finished) return false;
    stream->take_batch(std::move(batch));
    return true;
  }
  void fail(const status& why) override {
    std::lock_guard<std::recursive_mutex> lock(watch->lock);
    if (stream) stream->finish(why);
  }
  std::shared_ptr<put_watch> watch;
  Stream* stream;  // under watch->lock; null once the call is done
};

/// A Watch from the journal reader; with `refused` set it ends at once with it.
grpc::ServerWriteReactor<events::v1::Envelope>* start_watch(actors::journal_reader_actor reader,
                                                            stream_limits& limits,
                                                            const authenticator& auth,
                                                            grpc::CallbackServerContext* ctx,
                                                            const v1::WatchRequest& req,
                                                            const status& refused = {});

/// A Put; `acknowledge` (null: none) holds an OK answer (call_bridge::call_write).
grpc::ServerReadReactor<v1::PutRequest>* start_put(caf::actor_system& sys,
                                                   actors::object_store_actor store,
                                                   std::chrono::seconds timeout,
                                                   stream_limits& limits,
                                                   const authenticator& auth,
                                                   call_bridge::acknowledger acknowledge,
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
