#include "api/server/standby_server.hpp"

#include <grpcpp/generic/async_generic_service.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <mutex>

#include "api/common/grpc_status.hpp"
#include "actors/errors.hpp"
#include "actors/journal_reader.hpp"
#include "api/server/service_support.hpp"
#include "api/weightd.grpc.pb.h"
#include "events/upcast.hpp"

namespace weightd::api {

namespace {

class standby_admin final : public v1::AdminService::CallbackService {
 public:
  standby_admin(const follower& standby, const replica_mirror& mirror, std::string leader,
                const server_options& o, std::function<void()> promote)
      : standby_(standby),
        mirror_(mirror),
        leader_(std::move(leader)),
        options_(o),
        promote_(std::move(promote)) {}

  ServerUnaryReactor* Status(CallbackServerContext* ctx, const v1::StatusRequest* req,
                             v1::StatusResponse* resp) override {
    auto admitted = admit(*options_.auth, ctx, *req);
    if (!admitted) return reject(ctx, admitted.error());
    say_who_asked(admitted->first, resp);
    auto where = standby_.status();
    resp->set_version(options_.version);
    resp->set_role("standby");
    resp->set_epoch(where.epoch);
    resp->set_leader(leader_);
    resp->set_journal_seq(where.durable_seq);
    resp->set_leader_seq(where.leader_seq);
    resp->set_following(where.connected);
    resp->set_follow_error(where.failure.empty() ? where.last_error : where.failure);
    resp->set_lag_ms(where.lag_ms(std::chrono::steady_clock::now()));
    auto copies = mirror_.status();
    resp->set_mirror_objects(copies.held + copies.pending);
    resp->set_mirror_held(copies.held);
    resp->set_mirror_pending(copies.pending);
    resp->set_mirror_copied_bytes(copies.copied_bytes);
    resp->set_mirror_error(copies.last_error);
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  ServerUnaryReactor* Snapshot(CallbackServerContext* ctx, const v1::SnapshotRequest*,
                               v1::SnapshotResponse*) override {
    return reject_not_leader(ctx, leader_, "Snapshot");
  }
  ServerUnaryReactor* Promote(CallbackServerContext* ctx, const v1::PromoteRequest* req,
                              v1::PromoteResponse* resp) override {
    auto admitted = admit(*options_.auth, ctx, *req);
    if (!admitted) return reject(ctx, admitted.error());
    auto where = standby_.status();
    if (!where.failure.empty())
      return reject(ctx, {errc::not_ready, "this standby stopped following for good (" +
                                               where.failure + "); its journal needs a look "
                                               "(weightctl journal verify) before it may lead"});
    if (where.connected && !req->force())
      return reject(ctx, {errc::not_ready,
                          "the leader at " + leader_ + " still streams to this standby: promoting "
                          "now would make two leaders; stop it first, or pass --force if it is "
                          "cut off and cannot take writes"});
    if (promoting_.exchange(true))
      return reject(ctx, {errc::busy, "this standby is being promoted already"});
    resp->set_epoch(where.epoch + 1);
    resp->set_journal_seq(where.durable_seq);
    spdlog::warn("promotion requested by={} epoch={} journal_seq={} leader_was={} force={}",
                 admitted->first.principal, where.epoch + 1, where.durable_seq, leader_,
                 req->force());
    promote_();
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  const follower& standby_;
  const replica_mirror& mirror_;
  std::string leader_;
  const server_options& options_;
  std::function<void()> promote_;
  std::atomic<bool> promoting_{false};
};

/// Every RPC a standby does not serve: answered at once, without reading it.
class not_leader_reactor final : public grpc::ServerGenericBidiReactor {
 public:
  not_leader_reactor(grpc::GenericCallbackServerContext* ctx, const std::string& leader) {
    const auto& method = ctx->method();
    Finish(not_leader_status(ctx, leader, method.substr(method.rfind('/') + 1)));
  }
  void OnDone() override { delete this; }
};

class not_leader_service final : public grpc::CallbackGenericService {
 public:
  explicit not_leader_service(std::string leader) : leader_(std::move(leader)) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    return new not_leader_reactor(ctx, leader_);
  }

 private:
  std::string leader_;
};

/// A standby's journal reader asks its writer how far the journal is
/// committed (journal_reader.hpp); here the follower commits, and this
/// answers for it. Nothing else may append to a standby's journal.
actors::journal_actor spawn_follower_position(caf::actor_system& sys, const follower& standby) {
  return sys.spawn([&standby]() -> actors::journal_actor::behavior_type {
    return {
        [](actors::append_atom, actors::event_batch&) -> caf::result<actors::event_batch> {
          return actors::to_error(
              {errc::not_leader, "a standby's journal takes only its leader's events"});
        },
        [](caf::flush_atom) {},
        [&standby](actors::stats_atom) {
          actors::journal_stats stats;
          stats.highest_seq = standby.status().durable_seq;
          return stats;
        },
    };
  });
}

}  // namespace

struct standby_server::services {
  services(caf::actor_system& sys, const follower& standby, const replica_mirror& mirror,
           std::shared_ptr<const persistence::journal_backend> journal, const std::string& leader,
           server_options o, std::function<void()> promote)
      : options(std::move(o)),
        limits(options.streams),
        bridge(sys, options.timeout),
        position(spawn_follower_position(sys, standby)),
        reads{standby, bridge, [this, &sys, journal] { return reader_of(sys, journal); }, limits,
              options.auth},
        weights(make_standby_weight_service(reads, leader)),
        admin(standby, mirror, leader, options, std::move(promote)),
        others(leader) {}
  ~services() {
    std::lock_guard lock(reader_mutex);
    if (reader) caf::anon_send_exit(reader, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(position, caf::exit_reason::user_shutdown);
  }
  actors::journal_reader_actor reader_of(
      caf::actor_system& sys, const std::shared_ptr<const persistence::journal_backend>& journal) {
    std::lock_guard lock(reader_mutex);
    if (!reader) reader = actors::spawn_journal_reader(sys, journal, position, {}, true);
    return reader;
  }
  server_options options;
  stream_limits limits;  // Watch streams
  call_bridge bridge;    // History's way to the reader
  actors::journal_actor position;
  std::mutex reader_mutex;
  actors::journal_reader_actor reader;  // under reader_mutex; null until first used
  standby_reads reads;
  std::unique_ptr<grpc::Service> weights;
  standby_admin admin;
  not_leader_service others;
};

result<std::unique_ptr<standby_server>> standby_server::start(
    caf::actor_system& sys, const follower& standby, const replica_mirror& mirror,
    std::shared_ptr<const persistence::journal_backend> journal, std::string leader,
    server_options options, std::function<void()> promote) {
  if (!options.auth) {
    auto off = authenticator::open("");
    if (!off) return off.error();
    options.auth = *off;
  }
  auto credentials = server_credentials(options);
  if (!credentials) return credentials.error();
  std::unique_ptr<standby_server> s{new standby_server};
  auto listen = options.listen;
  s->services_ = std::make_unique<services>(sys, standby, mirror, std::move(journal), leader,
                                           std::move(options), std::move(promote));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, *credentials, &s->port_);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(&s->services_->admin);
  builder.RegisterService(s->services_->weights.get());
  builder.RegisterCallbackGenericService(&s->services_->others);
  s->server_ = builder.BuildAndStart();
  if (!s->server_ || s->port_ == 0)
    return status{errc::internal, "cannot listen on " + listen +
                                      "; is another process using the port? choose another --listen"};
  return s;
}

standby_server::~standby_server() { shutdown(std::chrono::milliseconds(0)); }

void standby_server::shutdown(std::chrono::milliseconds drain) {
  if (!server_) return;
  server_->Shutdown(std::chrono::system_clock::now() + drain);
  server_->Wait();
  server_.reset();
}

}  // namespace weightd::api
