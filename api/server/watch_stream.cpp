#include <mutex>

#include "api/server/streams.hpp"
#include <spdlog/spdlog.h>

#include "actors/errors.hpp"
#include "api/common/grpc_status.hpp"
#include "api/server/convert.hpp"
#include "api/server/service_support.hpp"

namespace weightd::api {

namespace {

/// Watch: the journal reader hands a batch to the stream's sink; the stream
/// writes it one event at a time and pulls the next batch only when it is
/// written — a slow client holds one batch and its position, nothing more
/// (journal_reader.hpp). One that takes nothing for --watch-stall-timeout is
/// ended with RESOURCE_EXHAUSTED naming the seq to resume from. Everything is
/// finished once, under the watch's lock, by whoever comes first.
class watch_reactor final : public grpc::ServerWriteReactor<events::v1::Envelope> {
 public:
  watch_reactor(actors::journal_reader_actor reader, stream_limits& limits, const authenticator& auth,
                CallbackServerContext* ctx, const v1::WatchRequest& req, const status& refused)
      : reader_(reader), ctx_(ctx), watch_(limits.watch_put()) {
    auto watch = watch_;
    std::lock_guard<std::recursive_mutex> lock(watch->lock);
    if (!refused.ok()) {
      finish(refused);
      return;
    }
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
  friend struct journal_sink<watch_reactor>;
  using sink = journal_sink<watch_reactor>;

  /// Under the lock: a batch from the journal reader.
  void take_batch(std::vector<events::v1::Envelope> batch) {
    pending_ = std::move(batch);
    next_in_batch_ = 0;
    write_next();
  }
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

}  // namespace

grpc::ServerWriteReactor<events::v1::Envelope>* start_watch(actors::journal_reader_actor reader,
                                                            stream_limits& limits,
                                                            const authenticator& auth,
                                                            CallbackServerContext* ctx,
                                                            const v1::WatchRequest& req,
                                                            const status& refused) {
  return new watch_reactor(reader, limits, auth, ctx, req, refused);
}

}  // namespace weightd::api
