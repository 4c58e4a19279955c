#include <fcntl.h>
#include <unistd.h>

#include <mutex>

#include "api/common/wire.hpp"
#include "api/server/streams.hpp"
#include <spdlog/spdlog.h>

#include "actors/errors.hpp"
#include "api/common/grpc_status.hpp"
#include "api/server/convert.hpp"
#include "api/server/service_support.hpp"

namespace weightd::api {

namespace {

/// Put: header -> reserve (actor) -> chunks into the ticket's file -> digest
/// -> register (actor). The next read starts only after the last step, so a
/// slow tier pushes back on the client (flow control). The call is finished
/// once, under the watch's lock: by the stream itself, by a cancel, or by the
/// sweeper when the client sent nothing for --put-idle-timeout.
class put_reactor final : public grpc::ServerReadReactor<v1::PutRequest> {
 public:
  put_reactor(caf::actor_system& sys, actors::object_store_actor store, std::chrono::seconds timeout,
              stream_limits& limits, const authenticator& auth,
              call_bridge::acknowledger acknowledge, CallbackServerContext* ctx,
              v1::PutResponse* resp)
      : sys_(sys), store_(store), timeout_(timeout), ctx_(ctx), resp_(resp), auth_(auth),
        limits_(limits), acknowledge_(std::move(acknowledge)), watch_(limits.watch_put()) {
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
                if (!acknowledge_) return finish({});
                acknowledge_([this, watch](const status& st) {  // SPEC §11: the standbys hold it
                  std::lock_guard<std::recursive_mutex> lock(watch->lock);
                  if (!watch->finished) finish(st);
                });
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
  call_bridge::acknowledger acknowledge_;  // null: answered at once
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
    if (req->for_replica() && !allowed->first.any_tenant()) {
      finish({errc::permission_denied, "for_replica: a standby's copy needs the admin role"});
      return;
    }
    auto admitted = limits.admit(ctx->peer());
    if (!admitted) {
      finish(admitted.error());
      return;
    }
    slot_ = std::move(*admitted);
    sys.spawn([this, store, timeout, tenant = allowed->second.tenant(), key = req->key(),
               copy = req->for_replica()](caf::event_based_actor* self) {
      auto granted = [this, self](actors::read_grant& grant) {
        self->quit();
        fd_ = ::open(grant.path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd_ < 0)
          return finish({errc::not_found, "the replica of '" + grant.info.record.ref.key +
                                              "' vanished while being read; retry"});
        to_proto(grant.info, msg_.mutable_info());
        StartWrite(&msg_);
      };
      auto refused = [this, self](caf::error& err) {
        self->quit();
        finish(actors::to_status(err));
      };
      if (copy)
        self->request(store, timeout, caf::get_atom::value, actors::copy_atom::value, tenant, key)
            .then(granted, refused);
      else
        self->request(store, timeout, caf::get_atom::value, tenant, key).then(granted, refused);
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

}  // namespace

grpc::ServerReadReactor<v1::PutRequest>* start_put(caf::actor_system& sys,
                                                   actors::object_store_actor store,
                                                   std::chrono::seconds timeout,
                                                   stream_limits& limits,
                                                   const authenticator& auth,
                                                   call_bridge::acknowledger acknowledge,
                                                   CallbackServerContext* ctx,
                                                   v1::PutResponse* resp) {
  return new put_reactor(sys, store, timeout, limits, auth, std::move(acknowledge), ctx, resp);
}

grpc::ServerWriteReactor<v1::GetResponse>* start_get(caf::actor_system& sys,
                                                     actors::object_store_actor store,
                                                     std::chrono::seconds timeout,
                                                     stream_limits& limits,
                                                     const authenticator& auth,
                                                     CallbackServerContext* ctx,
                                                     const v1::GetRequest* req) {
  return new get_reactor(sys, store, timeout, limits, auth, ctx, req);
}

}  // namespace weightd::api
