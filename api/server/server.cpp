#include "api/server/server.hpp"

#include <fcntl.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "actors/errors.hpp"
#include "core/validate.hpp"
#include "api/server/call_bridge.hpp"
#include "api/server/convert.hpp"
#include "api/common/grpc_status.hpp"
#include "api/common/pem.hpp"
#include "api/server/metrics.hpp"
#include "api/weightd.grpc.pb.h"

namespace weightd::api {

namespace {

using grpc::CallbackServerContext;
using grpc::ServerUnaryReactor;

ServerUnaryReactor* reject(CallbackServerContext* ctx, const status& st) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(to_grpc(ctx, st));
  return reactor;
}

// ------------------------------------------------------------ WeightService

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
/// tenant: the registry answers NOT_FOUND for one of another tenant.
template <class T, class = void>
struct names_by_id : std::false_type {};
template <class T>
struct names_by_id<T, std::void_t<decltype(std::declval<T&>().caller_tenant)>> : std::true_type {};

/// Commands with a principal are mutations: the journal records who asked.
template <class T, class = void>
struct is_mutation : std::false_type {};
template <class T>
struct is_mutation<T, std::void_t<decltype(std::declval<T&>().principal)>> : std::true_type {};

std::function<void(actors::revision_view&)> view_into(v1::RevisionView* resp) {
  return [resp](actors::revision_view& v) { to_proto(v, resp); };
}

std::function<void(actors::lease_view&)> lease_into(v1::Lease* resp) {
  return [resp](actors::lease_view& l) { to_proto(l, resp); };
}

/// BeginUpsert and AbortUpsert answer with the lineage's claim.
std::function<void(actors::lineage_view&)> claim_into(v1::UpsertClaim* resp) {
  return [resp](actors::lineage_view& l) {
    if (l.claim) to_proto(*l.claim, resp);
  };
}

std::function<void(events::operation_record&)> operation_into(v1::Operation* resp) {
  return [resp](events::operation_record& op) { to_proto(op, resp); };
}

class weight_service final : public v1::WeightService::CallbackService {
 public:
  weight_service(call_bridge& bridge, actors::node& node, server_options o, stream_limits& limits)
      : bridge_(bridge), registry_(node.registry()), reader_(node.reader()),
        local_reads_(o.local_reads), limits_(limits), auth_(o.auth) {}

  ServerUnaryReactor* BeginImport(CallbackServerContext* ctx, const v1::BeginImportRequest* req,
                                  v1::RevisionView* resp) override {
    return command<actors::revision_view>(ctx, *req, view_into(resp));
  }
  ServerUnaryReactor* CommitImport(CallbackServerContext* ctx, const v1::CommitImportRequest* req,
                                   v1::RevisionView* resp) override {
    return command<actors::revision_view>(ctx, *req, view_into(resp));
  }
  ServerUnaryReactor* AbortImport(CallbackServerContext* ctx, const v1::AbortImportRequest* req,
                                  v1::AbortImportResponse* resp) override {
    return command<actors::removal_result>(ctx, *req, [resp](actors::removal_result& r) {
      to_proto(r.view, resp->mutable_revision());
      for (const auto& k : r.removed_keys) resp->add_removed_keys(k);
      for (const auto& k : r.refused_keys) {
        auto* refused = resp->add_refused_keys();
        refused->set_key(k.key);
        refused->set_reason(k.reason);
      }
    });
  }
  ServerUnaryReactor* GetRevision(CallbackServerContext* ctx, const v1::GetRevisionRequest* req,
                                  v1::RevisionView* resp) override {
    return command<actors::revision_view>(ctx, *req, view_into(resp));
  }
  ServerUnaryReactor* ListRevisions(CallbackServerContext* ctx,
                                    const v1::ListRevisionsRequest* req,
                                    v1::ListRevisionsResponse* resp) override {
    return command<actors::revision_page>(ctx, *req, [resp](actors::revision_page& page) {
      for (const auto& v : page.revisions) to_proto(v, resp->add_revisions());
      resp->set_next_page_token(page.next_page_token);
    });
  }
  ServerUnaryReactor* UpdatePolicy(CallbackServerContext* ctx, const v1::UpdatePolicyRequest* req,
                                   v1::RevisionView* resp) override {
    return command<actors::revision_view>(ctx, *req, view_into(resp));
  }
  ServerUnaryReactor* RemoveRevision(CallbackServerContext* ctx,
                                     const v1::RemoveRevisionRequest* req,
                                     v1::RemoveRevisionResponse* resp) override {
    return command<actors::removal_result>(ctx, *req, [resp](actors::removal_result& r) {
      to_proto(r.view, resp->mutable_revision());
      for (const auto& k : r.removed_keys) resp->add_removed_keys(k);
    });
  }
  ServerUnaryReactor* AcquireLease(CallbackServerContext* ctx, const v1::AcquireLeaseRequest* req,
                                   v1::Lease* resp) override {
    return command<actors::lease_view>(ctx, *req, lease_into(resp));
  }
  ServerUnaryReactor* RenewLease(CallbackServerContext* ctx, const v1::RenewLeaseRequest* req,
                                 v1::Lease* resp) override {
    return command<actors::lease_view>(ctx, *req, lease_into(resp));
  }
  ServerUnaryReactor* ReleaseLease(CallbackServerContext* ctx, const v1::ReleaseLeaseRequest* req,
                                   v1::ReleaseLeaseResponse*) override {
    return command<actors::lease_view>(ctx, *req, [](actors::lease_view&) {});
  }
  ServerUnaryReactor* RevokeLease(CallbackServerContext* ctx, const v1::RevokeLeaseRequest* req,
                                  v1::Lease* resp) override {
    return command<actors::lease_view>(ctx, *req, lease_into(resp));
  }
  ServerUnaryReactor* ListLeases(CallbackServerContext* ctx, const v1::ListLeasesRequest* req,
                                 v1::ListLeasesResponse* resp) override {
    return command<actors::lease_list>(ctx, *req, [resp](actors::lease_list& list) {
      for (const auto& l : list.leases) to_proto(l, resp->add_leases());
    });
  }
  ServerUnaryReactor* Migrate(CallbackServerContext* ctx, const v1::MigrateRequest* req,
                              v1::Operation* resp) override {
    return command<events::operation_record>(ctx, *req, operation_into(resp));
  }
  ServerUnaryReactor* GetOperation(CallbackServerContext* ctx, const v1::GetOperationRequest* req,
                                   v1::Operation* resp) override {
    return command<events::operation_record>(ctx, *req, operation_into(resp));
  }
  ServerUnaryReactor* CancelOperation(CallbackServerContext* ctx,
                                      const v1::CancelOperationRequest* req,
                                      v1::Operation* resp) override {
    return command<events::operation_record>(ctx, *req, operation_into(resp));
  }
  ServerUnaryReactor* Reconcile(CallbackServerContext* ctx, const v1::ReconcileRequest* req,
                                v1::ReconcileResponse* resp) override {
    return command<actors::reconcile_report>(
        ctx, *req, [resp](actors::reconcile_report& r) { to_proto(r, resp); });
  }
  ServerUnaryReactor* History(CallbackServerContext* ctx, const v1::HistoryRequest* req,
                              v1::HistoryResponse* resp) override {
    auto admitted = admit(*auth_, ctx, *req);
    if (!admitted) return reject(ctx, admitted.error());
    auto query = from_proto(admitted->second);
    if (!query) return reject(ctx, query.error());
    return bridge_.call<actors::history_page>(
        ctx, reader_,
        [resp](actors::history_page& page) {
          for (auto& e : page.events) *resp->add_events() = std::move(e);
          resp->set_next_page_token(history_page_token(page.next_after));
        },
        actors::history_atom::value, std::move(*query));
  }
  ServerUnaryReactor* OpenLocal(CallbackServerContext* ctx, const v1::OpenLocalRequest* req,
                                v1::OpenLocalResponse* resp) override {
    if (!local_reads_)
      return reject(ctx, {errc::permission_denied,
                          "local reads are off on this daemon (--local-reads=false); read the "
                          "objects with Get instead"});
    return command<actors::local_listing>(
        ctx, *req, [resp](actors::local_listing& l) { to_proto(l, resp); });
  }
  ServerUnaryReactor* BeginUpsert(CallbackServerContext* ctx, const v1::BeginUpsertRequest* req,
                                  v1::UpsertClaim* resp) override {
    return command<actors::lineage_view>(ctx, *req, claim_into(resp));
  }
  ServerUnaryReactor* CommitUpsert(CallbackServerContext* ctx, const v1::CommitUpsertRequest* req,
                                   v1::RevisionView* resp) override {
    return command<actors::revision_view>(ctx, *req, view_into(resp));
  }
  ServerUnaryReactor* AbortUpsert(CallbackServerContext* ctx, const v1::AbortUpsertRequest* req,
                                  v1::UpsertClaim* resp) override {
    return command<actors::lineage_view>(ctx, *req, claim_into(resp));
  }
  ServerUnaryReactor* GetLineage(CallbackServerContext* ctx, const v1::GetLineageRequest* req,
                                 v1::Lineage* resp) override {
    return command<actors::lineage_view>(ctx, *req,
                                         [resp](actors::lineage_view& l) { to_proto(l, resp); });
  }
  grpc::ServerWriteReactor<events::v1::Envelope>* Watch(CallbackServerContext* ctx,
                                                        const v1::WatchRequest* req) override;

 private:
  /// Converts the request (bad input fails here, naming the field), records
  /// who asked on mutations, and sends the command to the registry.
  template <class Reply, class Request, class Fill>
  ServerUnaryReactor* command(CallbackServerContext* ctx, const Request& req, Fill fill) {
    auto admitted = admit(*auth_, ctx, req);
    if (!admitted) return reject(ctx, admitted.error());
    const auto& [who, request] = *admitted;
    auto cmd = from_proto(request);
    if (!cmd) return reject(ctx, cmd.error());
    using command_type = std::decay_t<decltype(*cmd)>;
    // The command's fields are checked once, where every entry passes: the
    // registry (core/validate.hpp's check_command).
    if constexpr (is_mutation<command_type>::value) cmd->principal = who.principal;
    if constexpr (names_by_id<command_type>::value)  // a lease or operation of another tenant
      cmd->caller_tenant = who.any_tenant() ? "" : who.tenant;
    return bridge_.call<Reply>(ctx, registry_, fill, std::move(*cmd));
  }

  call_bridge& bridge_;
  actors::registry_actor registry_;
  actors::journal_reader_actor reader_;
  bool local_reads_;
  stream_limits& limits_;
  std::shared_ptr<authenticator> auth_;
};

/// Watch: the journal reader hands a batch to the stream's sink; the stream
/// writes it one event at a time and pulls the next batch only when it is
/// written — a slow client holds one batch and its position, nothing more
/// (journal_reader.hpp). One that takes nothing for --watch-stall-timeout is
/// ended with RESOURCE_EXHAUSTED naming the seq to resume from. Everything is
/// finished once, under the watch's lock, by whoever comes first.
class watch_reactor final : public grpc::ServerWriteReactor<events::v1::Envelope> {
 public:
  watch_reactor(actors::journal_reader_actor reader, stream_limits& limits, const authenticator& auth,
                CallbackServerContext* ctx, const v1::WatchRequest& req)
      : reader_(reader), ctx_(ctx), watch_(limits.watch_put()) {
    auto watch = watch_;
    std::lock_guard<std::recursive_mutex> lock(watch->lock);
    auto allowed = admit(auth, ctx, req);
    if (!allowed) {
      finish(allowed.error());
      return;
    }
    auto pull = from_proto(allowed->second);
    if (pull && !allowed->first.any_tenant()) pull->filter.tenant = allowed->first.tenant;
    if (!pull) {
      finish(pull.error());
      return;
    }
    auto admitted = limits.admit(ctx->peer());
    if (!admitted) {
      finish(admitted.error());
      return;
    }
    slot_ = std::move(*admitted);
    filter_ = std::move(pull->filter);
    next_seq_ = pull->from_seq;
    auto stall = limits.options().watch_stall_timeout;
    watch->idle_timeout_ms = std::max<int64_t>(1, stall.count());
    watch->on_idle = [this, stall] {
      finish({errc::resource_exhausted,
              "the watcher took no event for " + std::to_string(stall.count()) +
                  " ms (--watch-stall-timeout); resume with from_seq " + std::to_string(next_seq_)});
    };
    sink_ = std::make_shared<sink>(watch, this);
    pull_next();
  }

  void OnWriteDone(bool ok) override {
    auto watch = watch_;
    std::lock_guard<std::recursive_mutex> lock(watch->lock);
    if (watch->finished) return;
    if (!ok) return finish({errc::internal, "the watcher went away"});
    next_seq_ = msg_.global_seq() + 1;
    write_next();
  }
  void OnCancel() override {
    auto watch = watch_;
    std::lock_guard<std::recursive_mutex> lock(watch->lock);
    if (watch->end()) {
      slot_ = {};  // its place is free before the client hears the end
      Finish(grpc::Status::CANCELLED);
    }
  }
  void OnDone() override {
    {
      auto watch = watch_;
      std::lock_guard<std::recursive_mutex> lock(watch->lock);
      watch->on_idle = nullptr;
      if (sink_) sink_->stream = nullptr;  // a batch still on its way is dropped
    }
    delete this;
  }

 private:
  /// What the journal reader holds: it outlives the stream, and says so.
  struct sink final : actors::watch_sink {
    sink(std::shared_ptr<put_watch> w, watch_reactor* s) : watch(std::move(w)), stream(s) {}
    bool deliver(std::vector<events::v1::Envelope> batch) override {
      std::lock_guard<std::recursive_mutex> lock(watch->lock);
      if (!stream || watch->finished) return false;
      stream->pending_ = std::move(batch);
      stream->next_in_batch_ = 0;
      stream->write_next();
      return true;
    }
    void fail(const status& why) override {
      std::lock_guard<std::recursive_mutex> lock(watch->lock);
      if (stream) stream->finish(why);
    }
    std::shared_ptr<put_watch> watch;
    watch_reactor* stream;  // under watch->lock; null once the call is done
  };

  /// Under the lock: the next event of the batch, or the next pull.
  void write_next() {
    if (next_in_batch_ >= pending_.size()) {
      pending_.clear();
      return pull_next();
    }
    msg_ = std::move(pending_[next_in_batch_++]);
    watch_->touch();  // from now the client has --watch-stall-timeout to take it
    StartWrite(&msg_);
  }
  void pull_next() {
    watch_->pause();  // waiting for the journal is not the client's stall
    caf::anon_send(reader_, actors::watch_atom::value, actors::watch_pull{sink_, next_seq_, filter_});
  }
  /// Under the lock.
  void finish(const status& st) {
    if (!watch_->end()) return;
    slot_ = {};  // a client that saw the end may open the next stream at once
    Finish(to_grpc(ctx_, st));
  }

  actors::journal_reader_actor reader_;
  CallbackServerContext* ctx_;
  std::shared_ptr<put_watch> watch_;
  stream_limits::slot slot_;
  std::shared_ptr<sink> sink_;
  actors::watch_filter filter_;
  uint64_t next_seq_ = 0;  // 0 until the reader fixed "from now"
  std::vector<events::v1::Envelope> pending_;
  size_t next_in_batch_ = 0;
  events::v1::Envelope msg_;
};

grpc::ServerWriteReactor<events::v1::Envelope>* weight_service::Watch(CallbackServerContext* ctx,
                                                                      const v1::WatchRequest* req) {
  return new watch_reactor(reader_, limits_, *auth_, ctx, *req);
}

// ------------------------------------------------------------ ObjectService

/// Put: header -> reserve (actor) -> chunks into the ticket's file -> digest
/// -> register (actor). The next read starts only after the last step, so a
/// slow tier pushes back on the client (flow control). The call is finished
/// once, under the watch's lock: by the stream itself, by a cancel, or by the
/// sweeper when the client sent nothing for --put-idle-timeout.
class put_reactor final : public grpc::ServerReadReactor<v1::PutRequest> {
 public:
  put_reactor(caf::actor_system& sys, actors::object_store_actor store, std::chrono::seconds timeout,
              stream_limits& limits, const authenticator& auth, CallbackServerContext* ctx,
              v1::PutResponse* resp)
      : sys_(sys), store_(store), timeout_(timeout), ctx_(ctx), resp_(resp), auth_(auth),
        limits_(limits), watch_(limits.watch_put()) {
    auto watch = watch_;
    std::lock_guard<std::recursive_mutex> lock(watch->lock);
    auto admitted = limits.admit(ctx->peer());
    if (!admitted) {
      finish(admitted.error());
      return;
    }
    slot_ = std::move(*admitted);
    auto idle = std::to_string(limits.options().put_idle_timeout.count());
    watch->on_idle = [this, idle] {
      fail({errc::resource_exhausted, "the put sent no bytes for " + idle +
                                          " ms (--put-idle-timeout); its reservation was given "
                                          "back; start the put again"});
    };
    StartRead(&req_);
  }

  void OnReadDone(bool ok) override {
    auto watch = watch_;
    std::lock_guard<std::recursive_mutex> lock(watch->lock);
    if (watch->finished) return;
    if (!ticket_) return on_header(ok);
    if (!ok) return on_end();  // the client finished sending
    watch->touch();
    if (req_.part_case() != v1::PutRequest::kChunk)
      return fail({errc::invalid_argument, "chunk expected after the header"});
    if (req_.chunk().size() > kMaxChunkBytes)
      return fail({errc::invalid_argument, "chunk is larger than 4 MiB"});
    if (auto st = writer_->write(req_.chunk().data(), req_.chunk().size()); !st.ok()) return fail(st);
    StartRead(&req_);
  }
  void OnCancel() override {
    auto watch = watch_;
    std::lock_guard<std::recursive_mutex> lock(watch->lock);
    abandon();
    if (watch->end()) {
      slot_ = {};  // its places are free before the client hears the end
      tenant_slot_ = {};
      Finish(grpc::Status::CANCELLED);
    }
  }
  void OnDone() override {
    {
      auto watch = watch_;
      std::lock_guard<std::recursive_mutex> lock(watch->lock);
      watch->on_idle = nullptr;
    }
    delete this;
  }

 private:
  void on_header(bool ok) {
    if (!ok || req_.part_case() != v1::PutRequest::kHeader)
      return finish({errc::invalid_argument, "header is required as the first message of a put"});
    auto admitted = admit(auth_, ctx_, req_.header());
    if (!admitted) return finish(admitted.error());
    auto request = from_proto(admitted->second);
    if (!request) return finish(request.error());
    request->principal = admitted->first.principal;
    auto tenant_slot = limits_.admit_put(request->tenant.empty() ? "default" : request->tenant);
    if (!tenant_slot) return finish(tenant_slot.error());
    tenant_slot_ = std::move(*tenant_slot);
    // The replies hold the watch, never read it through `this`: a call that
    // was cancelled or went idle meanwhile is finished, and OnDone may have
    // deleted this reactor already.
    sys_.spawn([this, watch = watch_, store = store_, timeout = timeout_, request = *request](
                   caf::event_based_actor* self) {
      self->request(store, timeout, actors::put_atom::value, request)
          .then(
              [this, self, watch, store](actors::put_ticket& ticket) {
                self->quit();
                std::lock_guard<std::recursive_mutex> lock(watch->lock);
                if (watch->finished) {  // cancelled or idle while reserving: give it back
                  caf::anon_send(store, actors::abort_atom::value, ticket.put_id);
                  return;
                }
                ticket_ = ticket;
                watch->touch();
                auto writer = persistence::blob_writer::create(ticket.temp_path, ticket.want_sha256,
                                                               ticket.enospc_after_bytes);
                if (!writer) return fail(writer.error());
                writer_ = std::move(*writer);
                StartRead(&req_);
              },
              [this, self, watch](caf::error& err) {
                self->quit();
                std::lock_guard<std::recursive_mutex> lock(watch->lock);
                if (!watch->finished) finish(actors::to_status(err));
              });
    });
  }

  void on_end() {
    watch_->on_idle = nullptr;  // registering is the store's work, not the client's
    auto digest = writer_->finish();
    if (!digest) return fail(digest.error());
    auto id = ticket_->put_id;
    sys_.spawn([this, watch = watch_, store = store_, timeout = timeout_, id,
                digest = *digest](caf::event_based_actor* self) {
      self->request(store, timeout, actors::put_atom::value, id, digest)
          .then(
              [this, self, watch](actors::object_info& info) {
                self->quit();
                std::lock_guard<std::recursive_mutex> lock(watch->lock);
                if (watch->finished) return;  // the call ended meanwhile (cancel, shutdown)
                to_proto(info, resp_->mutable_object());
                finish({});
              },
              [this, self, watch](caf::error& err) {
                self->quit();
                std::lock_guard<std::recursive_mutex> lock(watch->lock);
                if (!watch->finished) finish(actors::to_status(err));
              });
    });
  }

  /// Gives the reservation back and ends the call with `st`.
  void fail(const status& st) {
    abandon();
    finish(st);
  }
  void abandon() {
    if (ticket_ && !abandoned_) {
      abandoned_ = true;
      caf::anon_send(store_, actors::abort_atom::value, ticket_->put_id);
    }
  }
  /// Ends the call (once; the caller holds the watch's lock). Nothing of this
  /// reactor may be touched afterwards: OnDone may already have deleted it.
  void finish(const status& st) {
    if (!watch_->end()) return;
    slot_ = {};  // a client that saw the end may open the next stream at once
    tenant_slot_ = {};
    Finish(to_grpc(ctx_, st));
  }

  caf::actor_system& sys_;
  actors::object_store_actor store_;
  std::chrono::seconds timeout_;
  CallbackServerContext* ctx_;
  v1::PutResponse* resp_;
  const authenticator& auth_;
  stream_limits& limits_;
  std::shared_ptr<put_watch> watch_;
  stream_limits::slot slot_;
  stream_limits::slot tenant_slot_;  // this tenant's place (--max-puts-per-tenant)
  v1::PutRequest req_;
  std::optional<actors::put_ticket> ticket_;
  std::unique_ptr<persistence::blob_writer> writer_;
  bool abandoned_ = false;
};

/// Get: read grant (actor) -> the info, then the file in chunks; the next
/// chunk is read when the previous one was sent (flow control). Chunks start
/// small and double with every one the client takes, up to kGetChunkBytes:
/// a reader that keeps up streams in large chunks at once, and a stream whose
/// client does not read holds only a small one. Chunks above the first size
/// come out of one budget for all Get streams (stream_limits::take_get_bytes,
/// --get-buffer): past it a stream sends first-size chunks, and its buffer
/// shrinks back.
class get_reactor final : public grpc::ServerWriteReactor<v1::GetResponse> {
 public:
  get_reactor(caf::actor_system& sys, actors::object_store_actor store, std::chrono::seconds timeout,
              stream_limits& limits, const authenticator& auth, CallbackServerContext* ctx,
              const v1::GetRequest* req)
      : ctx_(ctx), limits_(limits) {
    auto allowed = admit(auth, ctx, *req);
    if (!allowed) {
      finish(allowed.error());
      return;
    }
    auto admitted = limits.admit(ctx->peer());
    if (!admitted) {
      finish(admitted.error());
      return;
    }
    slot_ = std::move(*admitted);
    sys.spawn([this, store, timeout, tenant = allowed->second.tenant(), key = req->key()](
                  caf::event_based_actor* self) {
      self->request(store, timeout, caf::get_atom::value, tenant, key)
          .then(
              [this, self](actors::read_grant& grant) {
                self->quit();
                fd_ = ::open(grant.path.c_str(), O_RDONLY | O_CLOEXEC);
                if (fd_ < 0)
                  return finish({errc::not_found, "the replica of '" + grant.info.record.ref.key +
                                                      "' vanished while being read; retry"});
                to_proto(grant.info, msg_.mutable_info());
                StartWrite(&msg_);
              },
              [this, self](caf::error& err) {
                self->quit();
                finish(actors::to_status(err));
              });
    });
  }
  ~get_reactor() override {
    give_back();
    if (fd_ >= 0) ::close(fd_);
  }

  void OnWriteDone(bool ok) override {
    give_back();  // the chunk was taken
    if (!ok) return finish({errc::internal, "the client went away"});
    size_t size = limits_.take_get_bytes(chunk_bytes_, kFirstGetChunkBytes);
    counted_ = size > kFirstGetChunkBytes ? size : 0;
    std::string* chunk = msg_.mutable_chunk();
    if (chunk->capacity() > 2 * size) std::string(size, '\0').swap(*chunk);  // memory back
    chunk->resize(size);
    ssize_t n = ::read(fd_, chunk->data(), chunk->size());
    if (n < 0) return finish({errc::internal, "reading the replica failed"});
    if (n == 0) return finish({});
    chunk->resize(static_cast<size_t>(n));
    chunk_bytes_ = std::min(chunk_bytes_ * 2, kGetChunkBytes);
    StartWrite(&msg_);
  }
  void OnDone() override { delete this; }

 private:
  void finish(const status& st) {
    slot_ = {};  // a client that saw the end may open the next stream at once
    give_back();
    Finish(to_grpc(ctx_, st));
  }
  void give_back() {
    if (counted_) limits_.give_get_bytes(counted_);
    counted_ = 0;
  }

  CallbackServerContext* ctx_;
  stream_limits& limits_;
  stream_limits::slot slot_;
  v1::GetResponse msg_;
  size_t chunk_bytes_ = kFirstGetChunkBytes;
  size_t counted_ = 0;  // bytes of the chunk in flight held in limits_'s Get budget
  int fd_ = -1;
};

class object_service final : public v1::ObjectService::CallbackService {
 public:
  object_service(caf::actor_system& sys, call_bridge& bridge, actors::node& node, server_options o,
                 stream_limits& limits)
      : sys_(sys), bridge_(bridge), store_(node.objects()), timeout_(o.timeout), limits_(limits),
        auth_(o.auth) {}

  grpc::ServerReadReactor<v1::PutRequest>* Put(CallbackServerContext* ctx,
                                               v1::PutResponse* resp) override {
    return new put_reactor(sys_, store_, timeout_, limits_, *auth_, ctx, resp);
  }
  grpc::ServerWriteReactor<v1::GetResponse>* Get(CallbackServerContext* ctx,
                                                 const v1::GetRequest* req) override {
    return new get_reactor(sys_, store_, timeout_, limits_, *auth_, ctx, req);
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
    return bridge_.call<actors::object_info>(
        ctx, store_,
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
    return bridge_.call<actors::batch_removal>(
        ctx, store_,
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
    return bridge_.call<actors::removal_summary>(
        ctx, store_,
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
};

// ------------------------------------------------------------- AdminService

class admin_service final : public v1::AdminService::CallbackService {
 public:
  admin_service(caf::actor_system& sys, call_bridge& bridge, actors::node& node, server_options o)
      : sys_(sys), bridge_(bridge), node_(node), options_(std::move(o)) {}

  ServerUnaryReactor* Status(CallbackServerContext* ctx, const v1::StatusRequest* req,
                             v1::StatusResponse* resp) override {
    auto admitted = admit(*options_.auth, ctx, *req);
    if (!admitted) return reject(ctx, admitted.error());
    resp->set_caller(admitted->first.principal);
    if (admitted->first.secured) {
      resp->set_caller_tenant(admitted->first.tenant);
      resp->set_caller_role(role_name(admitted->first.role));
    }
    auto* reactor = ctx->DefaultReactor();
    resp->set_version(options_.version);
    resp->set_writer_id(node_.writer_id());
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

 private:
  caf::actor_system& sys_;
  call_bridge& bridge_;
  actors::node& node_;
  server_options options_;
};

}  // namespace

namespace {

/// TLS (and mutual TLS) when its files are given, else plaintext; beyond
/// loopback both TLS and a tokens file are required (SPEC §9).
result<std::shared_ptr<grpc::ServerCredentials>> server_credentials(const server_options& o) {
  bool tls = !o.tls_cert_file.empty() || !o.tls_key_file.empty();
  if (tls && (o.tls_cert_file.empty() || o.tls_key_file.empty()))
    return status{errc::invalid_argument, "--tls-cert-file and --tls-key-file go together"};
  if (!o.tls_client_ca_file.empty() && !tls)
    return status{errc::invalid_argument,
                  "--tls-client-ca-file needs --tls-cert-file and --tls-key-file"};
  if (!is_loopback_address(o.listen)) {
    std::string missing;
    if (!o.auth->secured()) missing = "--auth-tokens-file";
    if (!tls) missing += std::string{missing.empty() ? "" : " and "} + "--tls-cert-file/--tls-key-file";
    if (!missing.empty())
      return status{errc::invalid_argument,
                    "--listen " + o.listen + " is not a loopback address: serving beyond this "
                    "host needs authentication and TLS (SPEC §9); give " + missing};
  }
  if (!tls) return grpc::InsecureServerCredentials();
  auto cert = read_pem_file(o.tls_cert_file, "--tls-cert-file");
  if (!cert) return cert.error();
  auto key = read_pem_file(o.tls_key_file, "--tls-key-file");
  if (!key) return key.error();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  if (!o.tls_client_ca_file.empty()) {
    auto ca = read_pem_file(o.tls_client_ca_file, "--tls-client-ca-file");
    if (!ca) return ca.error();
    ssl.pem_root_certs = *ca;
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

bool is_loopback_address(const std::string& listen) {
  return listen.rfind("127.", 0) == 0 || listen.rfind("localhost:", 0) == 0 ||
         listen.rfind("[::1]:", 0) == 0;
}

struct grpc_server::services {
  services(caf::actor_system& sys, actors::node& node, const server_options& o)
      : limits(o.streams), bridge(sys, o.timeout), weights(bridge, node, o, limits),
        objects(sys, bridge, node, o, limits), admin(sys, bridge, node, o) {}
  stream_limits limits;  // Put, Get and Watch streams share them
  call_bridge bridge;    // every unary call's way into the actors
  weight_service weights;
  object_service objects;
  admin_service admin;
};

const stream_limits& grpc_server::limits() const { return services_->limits; }

result<std::unique_ptr<grpc_server>> grpc_server::start(caf::actor_system& sys, actors::node& node,
                                                        server_options options) {
  if (!options.auth) {  // security off
    auto off = authenticator::open("");
    if (!off) return off.error();
    options.auth = *off;
  }
  auto credentials = server_credentials(options);
  if (!credentials) return credentials.error();
  std::unique_ptr<grpc_server> s{new grpc_server};
  s->sys_ = &sys;
  s->node_ = &node;
  // grpc.health.v1.Health (answered by gRPC itself, kept in step with the
  // node by the health thread) and grpc.reflection.v1alpha for grpcurl and
  // friends: both are process-wide switches read when the server is built.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  s->services_.reset(new services(sys, node, options));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, *credentials, &s->port_);
  builder.SetMaxReceiveMessageSize(static_cast<int>(kMaxChunkBytes + (64u << 10)));
  builder.SetMaxSendMessageSize(static_cast<int>(kMaxChunkBytes + (64u << 10)));
  // gRPC sets SO_REUSEPORT by default: a second daemon on a busy port would
  // start and share its calls. One port, one daemon.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, static_cast<int>(kStreamWindowBytes));
  builder.RegisterService(&s->services_->weights);
  builder.RegisterService(&s->services_->objects);
  builder.RegisterService(&s->services_->admin);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> factories;
  factories.push_back(error_trailer_interceptor());  // first: metrics count its codes
  if (options.metrics) factories.push_back(metrics_interceptor(options.metrics));
  builder.experimental().SetInterceptorCreators(std::move(factories));
  s->server_ = builder.BuildAndStart();
  if (!s->server_ || s->port_ == 0)
    return status{errc::internal, "cannot listen on " + options.listen +
                                      "; is another process using the port? choose another --listen"};
  s->health_ = std::thread([self = s.get()] { self->watch_health(); });
  return s;
}

void grpc_server::watch_health() {
  auto* health = server_->GetHealthCheckService();
  bool serving = true;
  std::unique_lock lock(health_mutex_);
  while (!stopping_) {
    lock.unlock();
    auto failure = node_failure(*sys_, *node_);
    lock.lock();
    if (stopping_) break;  // Shutdown already answers NOT_SERVING
    if (failure.empty() != serving) {
      serving = failure.empty();
      if (serving) spdlog::info("grpc health SERVING again");
      else spdlog::warn("grpc health NOT_SERVING because {}", failure);
      health->SetServingStatus(serving);
    }
    health_wakeup_.wait_for(lock, kHealthInterval, [this] { return stopping_; });
  }
}

void grpc_server::stop_health() {
  {
    std::lock_guard lock(health_mutex_);
    stopping_ = true;
  }
  health_wakeup_.notify_all();
  if (health_.joinable()) health_.join();
}

void grpc_server::shutdown(std::chrono::milliseconds drain) {
  stop_health();
  // New calls are refused at once, idle connections get a GOAWAY; calls in
  // flight get until the deadline to finish, then they are cancelled.
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + drain);
}

grpc_server::~grpc_server() {
  shutdown(std::chrono::milliseconds(0));
  if (server_) server_->Wait();
}

}  // namespace weightd::api
