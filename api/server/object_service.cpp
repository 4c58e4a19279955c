#include "api/server/services.hpp"

#include <spdlog/spdlog.h>

#include "actors/errors.hpp"
#include "api/common/grpc_status.hpp"
#include "api/server/convert.hpp"
#include "api/server/service_support.hpp"
#include "api/server/streams.hpp"

namespace weightd::api {

namespace {

class object_service final : public v1::ObjectService::CallbackService {
 public:
  object_service(caf::actor_system& sys, call_bridge& bridge, actors::node& node, server_options o,
                 stream_limits& limits)
      : sys_(sys), bridge_(bridge), store_(node.objects()), timeout_(o.timeout), limits_(limits),
        auth_(o.auth), acknowledge_(write_acknowledger(o.sync, node, false)) {}

  grpc::ServerReadReactor<v1::PutRequest>* Put(CallbackServerContext* ctx,
                                               v1::PutResponse* resp) override {
    return start_put(sys_, store_, timeout_, limits_, *auth_, acknowledge_, ctx, resp);
  }
  grpc::ServerWriteReactor<v1::GetResponse>* Get(CallbackServerContext* ctx,
                                                 const v1::GetRequest* req) override {
    return start_get(sys_, store_, timeout_, limits_, *auth_, ctx, req);
  }
  ServerUnaryReactor* Stat(CallbackServerContext* ctx, const v1::StatRequest* req_in,
                           v1::ObjectInfo* resp) override {
    auto admitted = admit(*auth_, ctx, *req_in);
    if (!admitted) return reject(ctx, admitted.error());
    const auto* req = &admitted->second;
    return bridge_.call<actors::object_info>(
        ctx, store_, [resp](actors::object_info& i) { to_proto(i, resp); },
        actors::stat_atom::value, req->tenant(), req->key());
  }
  ServerUnaryReactor* Remove(CallbackServerContext* ctx, const v1::RemoveRequest* req_in,
                             v1::RemoveResponse* resp) override {
    auto admitted = admit(*auth_, ctx, *req_in);
    if (!admitted) return reject(ctx, admitted.error());
    const auto* req = &admitted->second;
    return bridge_.call_write<actors::object_info>(
        ctx, acknowledge_, store_,
        [resp](actors::object_info& i) { to_proto(i, resp->mutable_object()); },
        actors::remove_atom::value, req->tenant(), req->key(), req->force(),
        admitted->first.principal);
  }
  ServerUnaryReactor* BatchRemove(CallbackServerContext* ctx, const v1::BatchRemoveRequest* req_in,
                                  v1::BatchRemoveResponse* resp) override {
    auto admitted = admit(*auth_, ctx, *req_in);
    if (!admitted) return reject(ctx, admitted.error());
    const auto* req = &admitted->second;
    std::vector<std::string> keys(req->keys().begin(), req->keys().end());
    return bridge_.call_write<actors::batch_removal>(
        ctx, acknowledge_, store_,
        [resp](actors::batch_removal& b) {
          for (const auto& r : b.results) {
            auto* out = resp->add_results();
            out->set_key(r.key);
            out->set_code(code_name(r.result.code()));
            out->set_message(r.result.message());
          }
        },
        actors::remove_atom::value, req->tenant(), keys, req->force(),
        admitted->first.principal);
  }
  ServerUnaryReactor* RemoveAll(CallbackServerContext* ctx, const v1::RemoveAllRequest* req_in,
                                v1::RemoveAllResponse* resp) override {
    auto admitted = admit(*auth_, ctx, *req_in);
    if (!admitted) return reject(ctx, admitted.error());
    const auto* req = &admitted->second;
    return bridge_.call_write<actors::removal_summary>(
        ctx, acknowledge_, store_,
        [resp](actors::removal_summary& s) {
          for (const auto& k : s.removed_keys) resp->add_removed_keys(k);
          resp->set_skipped_managed(s.skipped_managed);
          resp->set_skipped_leased(s.skipped_leased);
          resp->set_skipped_busy(s.skipped_busy);
        },
        actors::removeall_atom::value, req->tenant(), req->prefix(), req->all(),
        admitted->first.principal);
  }
  ServerUnaryReactor* Evict(CallbackServerContext* ctx, const v1::EvictRequest* req_in,
                            v1::EvictResponse* resp) override {
    auto admitted = admit(*auth_, ctx, *req_in);
    if (!admitted) return reject(ctx, admitted.error());
    const auto* req = &admitted->second;
    return bridge_.call<actors::eviction_summary>(
        ctx, store_,
        [resp](actors::eviction_summary& s) {
          resp->set_evicted_objects(s.evicted_objects);
          resp->set_freed_bytes(s.freed_bytes);
          resp->set_skipped_managed(s.skipped_managed);
          resp->set_skipped_pinned(s.skipped_pinned);
          resp->set_skipped_leased(s.skipped_leased);
          resp->set_hot_used_bytes(s.hot_used_bytes);
        },
        actors::evict_atom::value, req->target_ratio());
  }
  ServerUnaryReactor* List(CallbackServerContext* ctx, const v1::ListObjectsRequest* req_in,
                           v1::ListObjectsResponse* resp) override {
    auto admitted = admit(*auth_, ctx, *req_in);
    if (!admitted) return reject(ctx, admitted.error());
    const auto* req = &admitted->second;
    return bridge_.call<actors::object_page>(
        ctx, store_,
        [resp](actors::object_page& page) {
          for (const auto& o : page.objects) to_proto(o, resp->add_objects());
          resp->set_next_start_after(page.next_start_after);
        },
        actors::list_atom::value, req->tenant(), req->prefix(), req->start_after(), req->limit());
  }

 private:
  caf::actor_system& sys_;
  call_bridge& bridge_;
  actors::object_store_actor store_;
  std::chrono::seconds timeout_;
  stream_limits& limits_;
  std::shared_ptr<authenticator> auth_;
  call_bridge::acknowledger acknowledge_;  // SPEC §11 Acknowledgement; null: at once
};

}  // namespace

std::unique_ptr<grpc::Service> make_object_service(caf::actor_system& sys, call_bridge& bridge,
                                                   actors::node& node, const server_options& o,
                                                   stream_limits& limits) {
  return std::make_unique<object_service>(sys, bridge, node, o, limits);
}

}  // namespace weightd::api
