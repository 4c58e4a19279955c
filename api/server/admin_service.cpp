#include "api/server/services.hpp"

#include <spdlog/spdlog.h>

#include "actors/errors.hpp"
#include "api/common/grpc_status.hpp"
#include "api/server/convert.hpp"
#include "api/server/service_support.hpp"
#include "api/server/streams.hpp"
#include "api/server/metrics.hpp"

namespace weightd::api {

namespace {

class admin_service final : public v1::AdminService::CallbackService {
 public:
  admin_service(caf::actor_system& sys, call_bridge& bridge, actors::node& node, server_options o)
      : sys_(sys), bridge_(bridge), node_(node), options_(std::move(o)) {}

  ServerUnaryReactor* Status(CallbackServerContext* ctx, const v1::StatusRequest* req,
                             v1::StatusResponse* resp) override {
    auto admitted = admit(*options_.auth, ctx, *req);
    if (!admitted) return reject(ctx, admitted.error());
    say_who_asked(admitted->first, resp);
    auto* reactor = ctx->DefaultReactor();
    resp->set_version(options_.version);
    resp->set_writer_id(node_.writer_id());
    resp->set_role("leader");
    if (options_.sync) {  // SPEC §11: its standbys, and how many a write waits for
      resp->set_sync_standbys(options_.sync->required());
      for (const auto& s : options_.sync->standbys()) {
        auto* out = resp->add_standbys();
        out->set_member(s.member);
        out->set_durable_seq(s.durable_seq);
        out->set_mirrored_seq(s.mirrored_seq);
      }
    }
    if (auto journal = node_.backend())
      if (auto epoch = journal->highest_epoch(); epoch.ok()) resp->set_epoch(*epoch);
    auto journal = node_.journal();
    auto store = node_.objects();
    auto registry = node_.registry();
    auto timeout = options_.timeout;
    sys_.spawn([=](caf::event_based_actor* self) {
      self->request(journal, timeout, actors::stats_atom::value)
          .then(
              [=](actors::journal_stats& js) {
                resp->set_journal_seq(js.highest_seq);
                self->request(store, timeout, actors::stats_atom::value)
                    .then(
                        [=](actors::store_stats& ss) {
                          auto usage = [](const actors::tier_usage& u, v1::TierUsage* out) {
                            out->set_used_bytes(u.used_bytes);
                            out->set_reserved_bytes(u.reserved_bytes);
                            out->set_capacity_bytes(u.capacity_bytes);
                          };
                          usage(ss.hot, resp->mutable_hot());
                          usage(ss.cold, resp->mutable_cold());
                          resp->set_objects(ss.objects);
                          for (const auto& [op, n] : ss.guard_skips) (*resp->mutable_guard_skips())[op] = n;
                          self->request(registry, timeout, actors::stats_atom::value)
                              .then(
                                  [=](actors::registry_stats& rs) {
                                    for (const auto& [state, n] : rs.revisions)
                                      (*resp->mutable_revisions_by_state())[state] = n;
                                    reactor->Finish(grpc::Status::OK);
                                    self->quit();
                                  },
                                  [=](caf::error& err) {
                                    reactor->Finish(to_grpc(ctx, actors::to_status(err)));
                                    self->quit();
                                  });
                        },
                        [=](caf::error& err) {
                          reactor->Finish(to_grpc(ctx, actors::to_status(err)));
                          self->quit();
                        });
              },
              [=](caf::error& err) {
                reactor->Finish(to_grpc(ctx, actors::to_status(err)));
                self->quit();
              });
    });
    return reactor;
  }
  ServerUnaryReactor* Snapshot(CallbackServerContext* ctx, const v1::SnapshotRequest* req,
                               v1::SnapshotResponse* resp) override {
    if (auto admitted = admit(*options_.auth, ctx, *req); !admitted)
      return reject(ctx, admitted.error());
    return bridge_.call<uint64_t>(
        ctx, node_.snapshotter(),
        [resp](uint64_t seq) { resp->set_seq(seq); }, actors::snapshot_atom::value);
  }

  ServerUnaryReactor* Promote(CallbackServerContext* ctx, const v1::PromoteRequest* req,
                              v1::PromoteResponse*) override {
    if (auto admitted = admit(*options_.auth, ctx, *req); !admitted)
      return reject(ctx, admitted.error());
    return reject(ctx, {errc::not_ready, "this weightd is the leader already; promote a standby "
                                         "(one started with --follow)"});
  }

 private:
  caf::actor_system& sys_;
  call_bridge& bridge_;
  actors::node& node_;
  server_options options_;
};

}  // namespace

std::unique_ptr<grpc::Service> make_admin_service(caf::actor_system& sys, call_bridge& bridge,
                                                  actors::node& node, const server_options& o) {
  return std::make_unique<admin_service>(sys, bridge, node, o);
}

}  // namespace weightd::api
