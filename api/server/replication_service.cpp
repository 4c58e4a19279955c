// ReplicationService (SPEC §11 Follow): the leader's side of a standby's
// stream. The standby says who it is and how far its journal goes; the leader
// answers with its schema and seq, then streams its journal from the next
// seq, exactly as stored, one reader batch per message, and reads the
// standby's durable seq as it reports it.
//
// The envelopes come from the journal reader, like Watch's with no filter
// (journal_reader.hpp): a batch is pulled only when the previous message is
// written, so a slow standby holds one batch, and one that takes nothing for
// --watch-stall-timeout is ended (it reconnects and resumes from its journal).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <mutex>

#include "api/server/service_support.hpp"
#include "api/server/services.hpp"
#include "api/server/streams.hpp"
#include "api/server/sync_gate.hpp"
#include "api/weightd.grpc.pb.h"
#include "events/upcast.hpp"

namespace weightd::api {

namespace {

using follow_reactor_base = grpc::ServerBidiReactor<v1::FollowRequest, v1::FollowResponse>;

class follow_reactor final : public follow_reactor_base {
 public:
  follow_reactor(actors::node& node, stream_limits& limits, const authenticator& auth,
                 std::shared_ptr<sync_gate> gate, CallbackServerContext* ctx)
      : reader_(node.reader()),
        journal_(node.backend()),
        limits_(limits),
        auth_(auth),
        gate_(std::move(gate)),
        ctx_(ctx),
        watch_(limits.watch_put()) {
    std::lock_guard<std::recursive_mutex> lock(watch_->lock);
    StartRead(&in_);  // the standby's hello
  }

  void OnReadDone(bool ok) override {
    auto watch = watch_;
    std::lock_guard<std::recursive_mutex> lock(watch->lock);
    if (watch->finished) return;
    if (!ok) return finish({});  // the standby closed its side: the stream ends
    if (!welcomed_) {
      if (auto st = welcome(); !st.ok()) return finish(st);
      if (diverged_) return;  // nothing more to read: the stream ends
    } else {
      durable_seq_ = std::max(durable_seq_, in_.durable_seq());
      if (gate_handle_) gate_->report(gate_handle_, in_.durable_seq(), in_.mirrored_seq());
    }
    StartRead(&in_);
  }
  void OnWriteDone(bool ok) override {
    auto watch = watch_;
    std::lock_guard<std::recursive_mutex> lock(watch->lock);
    if (watch->finished) return;
    if (!ok) return finish({errc::internal, "the standby went away"});
    if (diverged_) return finish({});
    pull_next();
  }
  void OnCancel() override {
    auto watch = watch_;
    std::lock_guard<std::recursive_mutex> lock(watch->lock);
    if (watch->end()) {
      slot_ = {};
      Finish(grpc::Status::CANCELLED);
    }
  }
  void OnDone() override {
    {
      auto watch = watch_;
      std::lock_guard<std::recursive_mutex> lock(watch->lock);
      watch->on_idle = nullptr;
      if (sink_) sink_->stream = nullptr;  // a batch still on its way is dropped
      if (gate_handle_) gate_->leave(gate_handle_);
      if (welcomed_)
        spdlog::info("standby stopped following member={} peer={} durable_seq={}", member_, peer_,
                     durable_seq_);
    }
    delete this;
  }

 private:
  friend struct journal_sink<follow_reactor>;
  using sink = journal_sink<follow_reactor>;

  /// Under the lock: checks the hello, answers it, starts the stream.
  status welcome() {
    auto allowed = admit(auth_, ctx_, in_);
    if (!allowed) return allowed.error();
    if (in_.member().size() > 1024) return {errc::invalid_argument, "member must be 0..1024 bytes"};
    peer_ = ctx_->peer();
    member_ = in_.member().empty() ? peer_ : in_.member();
    if (in_.schema_version() < events::kSchemaVersion)
      return {errc::not_ready,
              "the standby decodes event schema " + std::to_string(in_.schema_version()) +
                  " but this leader writes schema " + std::to_string(events::kSchemaVersion) +
                  "; upgrade the standby's weightd first"};
    if (!journal_) return {errc::busy, "weightd is stopping; the standby reconnects"};
    auto highest = journal_->highest_seq();
    if (!highest) return highest.error();
    auto epoch = journal_->highest_epoch();
    if (!epoch) return epoch.error();
    if (in_.epoch() > *epoch)
      return {errc::conflict, "the standby's journal holds epoch " + std::to_string(in_.epoch()) +
                                  " but this weightd is at epoch " + std::to_string(*epoch) +
                                  ": this weightd is a former leader and must not lead"};
    epoch_ = *epoch;
    if (in_.epoch() < epoch_) {
      // A former leader (or a standby of one) may hold events this leader's
      // history never had: those past the first epoch change above its own.
      auto fork = persistence::leadership_above(*journal_, in_.epoch());
      if (!fork) return fork.error();
      if (*fork && in_.durable_seq() > (*fork)->last_seq_of_previous_epoch())
        return tell_divergence(**fork, *highest);
    }
    if (in_.durable_seq() > *highest)
      return {errc::conflict,
              "the standby holds seq " + std::to_string(in_.durable_seq()) +
                  " but this leader's journal ends at " + std::to_string(*highest) +
                  "; its journal is not a copy of this one: give it an empty data directory"};
    auto admitted = limits_.admit(ctx_->peer());
    if (!admitted) return admitted.error();
    slot_ = std::move(*admitted);
    durable_seq_ = in_.durable_seq();
    next_seq_ = durable_seq_ + 1;
    welcomed_ = true;
    if (gate_) {  // it counts for --sync-standbys from now (sync_gate.hpp)
      gate_handle_ = gate_->join(member_);
      gate_->report(gate_handle_, in_.durable_seq(), in_.mirrored_seq());
    }
    spdlog::info("standby follows member={} peer={} from_seq={} leader_seq={}", member_,
                 ctx_->peer(), next_seq_, *highest);
    auto stall = limits_.options().watch_stall_timeout;
    watch_->idle_timeout_ms = std::max<int64_t>(1, stall.count());
    watch_->on_idle = [this, stall] {
      finish({errc::resource_exhausted, "the standby took nothing for " +
                                            std::to_string(stall.count()) +
                                            " ms (--watch-stall-timeout); it reconnects"});
    };
    sink_ = std::make_shared<sink>(watch_, this);
    out_.Clear();
    out_.set_leader_seq(*highest);
    out_.set_schema_version(events::kSchemaVersion);
    out_.set_epoch(epoch_);
    leader_seq_ = *highest;
    watch_->touch();
    StartWrite(&out_);
    return {};
  }
  /// Under the lock: the one message to a standby that diverged (SPEC §11
  /// Divergence); the stream ends once it is written, and the standby comes
  /// back truncated.
  status tell_divergence(const events::v1::LeadershipTaken& fork, uint64_t highest) {
    spdlog::warn("standby diverged member={} peer={} its_seq={} its_epoch={} last_common_seq={} "
                 "epoch={}; it sets its tail aside and follows again",
                 member_, peer_, in_.durable_seq(), in_.epoch(),
                 fork.last_seq_of_previous_epoch(), fork.epoch());
    diverged_ = true;
    out_.Clear();
    out_.set_leader_seq(highest);
    out_.set_schema_version(events::kSchemaVersion);
    out_.set_epoch(epoch_);
    out_.mutable_divergence()->set_last_common_seq(fork.last_seq_of_previous_epoch());
    out_.mutable_divergence()->set_epoch(fork.epoch());
    StartWrite(&out_);
    return {};
  }
  /// Under the lock: a batch from the journal reader, as one message.
  void take_batch(std::vector<events::v1::Envelope> batch) {
    out_.Clear();
    for (auto& e : batch) *out_.add_envelopes() = std::move(e);
    if (out_.envelopes_size() > 0) next_seq_ = out_.envelopes().rbegin()->global_seq() + 1;
    // The head as committed now (a meta key; on the reader's thread), so
    // that a standby behind it knows how far: its lag in Status.
    if (auto head = journal_->highest_seq(); head.ok())
      leader_seq_ = std::max(leader_seq_, *head);
    leader_seq_ = std::max(leader_seq_, next_seq_ - 1);
    out_.set_leader_seq(leader_seq_);
    out_.set_schema_version(events::kSchemaVersion);
    out_.set_epoch(epoch_);
    watch_->touch();  // from now the standby has --watch-stall-timeout to take it
    StartWrite(&out_);
  }
  void pull_next() {
    watch_->pause();  // waiting for the journal is not the standby's stall
    caf::anon_send(reader_, actors::watch_atom::value,
                   actors::watch_pull{sink_, next_seq_, actors::watch_filter{}});
  }
  /// Under the lock.
  void finish(const status& st) {
    if (!watch_->end()) return;
    slot_ = {};
    Finish(to_grpc(ctx_, st));
  }

  actors::journal_reader_actor reader_;
  std::shared_ptr<const persistence::journal_backend> journal_;
  stream_limits& limits_;
  const authenticator& auth_;
  std::shared_ptr<sync_gate> gate_;  // null: no one counts the standbys
  uint64_t gate_handle_ = 0;         // 0 until welcomed (and not diverged)
  CallbackServerContext* ctx_;
  std::shared_ptr<put_watch> watch_;
  stream_limits::slot slot_;
  std::shared_ptr<sink> sink_;
  v1::FollowRequest in_;
  v1::FollowResponse out_;
  bool welcomed_ = false;
  bool diverged_ = false;  // told it diverged: the stream ends after that message
  std::string member_, peer_;
  uint64_t next_seq_ = 1;
  uint64_t durable_seq_ = 0;  // as the standby last reported it
  uint64_t leader_seq_ = 0;   // the highest seq known to be committed here
  uint64_t epoch_ = 0;        // this leader's, when the standby was welcomed
};

class replication_service final : public v1::ReplicationService::CallbackService {
 public:
  replication_service(actors::node& node, const server_options& o, stream_limits& limits)
      : node_(node), auth_(o.auth), gate_(o.sync), limits_(limits) {}

  follow_reactor_base* Follow(CallbackServerContext* ctx) override {
    return new follow_reactor(node_, limits_, *auth_, gate_, ctx);
  }

 private:
  actors::node& node_;
  std::shared_ptr<authenticator> auth_;
  std::shared_ptr<sync_gate> gate_;
  stream_limits& limits_;
};

}  // namespace

std::unique_ptr<grpc::Service> make_replication_service(actors::node& node, const server_options& o,
                                                        stream_limits& limits) {
  return std::make_unique<replication_service>(node, o, limits);
}

}  // namespace weightd::api
