#include "api/server/follower.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "api/common/grpc_status.hpp"
#include "api/server/divergence.hpp"
#include "events/event_type.hpp"
#include "events/identity.hpp"
#include "events/upcast.hpp"
#include "persistence/replay.hpp"

namespace weightd::api {

result<std::unique_ptr<follower>> follower::start(
    std::shared_ptr<persistence::journal_backend> journal, follower_options options) {
  auto credentials = channel_credentials(options.leader);
  if (!credentials) return credentials.error();
  auto folded = persistence::fold_journal(*journal);
  if (!folded) return folded.error();
  std::unique_ptr<follower> f{new follower(std::move(journal), std::move(options), std::move(*folded))};
  grpc::ChannelArguments args;
  // The leader's messages carry batches of events, one as large as a journal takes.
  args.SetMaxReceiveMessageSize(static_cast<int>(persistence::kMaxEventBytes + (1u << 20)));
  // A leader that vanished without closing the connection is noticed.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10'000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5'000);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);  // an idle stream is still watched
  f->channel_ = grpc::CreateCustomChannel(f->options_.leader.address, *credentials, args);
  f->stub_ = v1::ReplicationService::NewStub(f->channel_);
  f->thread_ = std::thread([self = f.get()] { self->run(); });
  return f;
}

follower::follower(std::shared_ptr<persistence::journal_backend> journal, follower_options options,
                   events::store_state folded)
    : journal_(std::move(journal)), options_(std::move(options)), state_(std::move(folded)) {
  status_.durable_seq = state_.applied_seq;
  status_.epoch = state_.epoch;
  status_.caught_up_at = std::chrono::steady_clock::now();
}

follower::~follower() { stop(); }

void follower::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    if (stream_) stream_->TryCancel();
    changed_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

follower_status follower::status() const {
  std::lock_guard lock(mutex_);
  return status_;
}

events::store_state follower::state() const {
  std::lock_guard lock(mutex_);
  return state_;
}

bool follower::wait_for(uint64_t seq, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return status_.durable_seq >= seq; });
}

void follower::listen(fold_listener listener) {
  std::lock_guard lock(listener_mutex_);
  listener_ = std::move(listener);
}

void follower::tell(const fold_step& step) {
  std::lock_guard lock(listener_mutex_);
  if (listener_) listener_(step);
}

void follower::mirrored(uint64_t seq) {
  auto had = mirrored_seq_.load();
  while (had < seq && !mirrored_seq_.compare_exchange_weak(had, seq)) {
  }
  if (had < seq) acknowledge();
}

bool follower::acknowledge() {
  std::lock_guard lock(write_mutex_);
  if (!writer_) return false;
  v1::FollowRequest ack;
  ack.set_durable_seq(status().durable_seq);
  ack.set_mirrored_seq(mirrored_seq_.load());
  return writer_->Write(ack);
}

namespace {

/// The object an event of an object stream is about.
std::optional<events::object_ref> object_of(const events::v1::Envelope& e) {
  switch (e.payload_case()) {
    case events::v1::Envelope::kObjectPut:
      return events::object_ref{e.object_put().tenant(), e.object_put().key()};
    case events::v1::Envelope::kReplicaAdded:
      return events::object_ref{e.replica_added().tenant(), e.replica_added().key()};
    case events::v1::Envelope::kReplicaDropped:
      return events::object_ref{e.replica_dropped().tenant(), e.replica_dropped().key()};
    case events::v1::Envelope::kObjectRemoved:
      return events::object_ref{e.object_removed().tenant(), e.object_removed().key()};
    default:
      return std::nullopt;
  }
}

}  // namespace

void follower::run() {
  auto backoff = options_.min_backoff;
  std::string said;  // the last error logged: a leader that stays down is said once
  for (;;) {
    auto welcomed_before = status().streams;
    auto ended = follow_once();
    std::unique_lock lock(mutex_);
    status_.connected = false;
    if (stopping_) return;
    if (std::exchange(stepped_back_, false) && status_.failure.empty()) continue;
    status_.last_error = ended.to_string();
    if (!status_.failure.empty()) {
      spdlog::critical("standby stops following leader={} error=\"{}\"; its journal holds seq {}. "
                       "Look at both journals (weightctl journal verify) before starting it again",
                       options_.leader.address, status_.failure, status_.durable_seq);
      return;
    }
    if (status_.streams != welcomed_before) backoff = options_.min_backoff;
    if (status_.last_error != said) {
      spdlog::warn("standby lost its leader leader={} error=\"{}\"; reconnecting", options_.leader.address,
                   status_.last_error);
      said = status_.last_error;
    }
    changed_.wait_for(lock, backoff, [this] { return stopping_; });
    if (stopping_) return;
    backoff = std::min(options_.max_backoff, backoff * 2);
  }
}

weightd::status follower::follow_once() {
  grpc::ClientContext ctx;
  if (!options_.leader.token.empty())
    ctx.AddMetadata("authorization", "Bearer " + options_.leader.token);
  v1::FollowRequest hello;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return {};
    stream_ = &ctx;
    hello.set_durable_seq(status_.durable_seq);
    hello.set_epoch(state_.epoch);
  }
  auto forget = [&] {
    std::lock_guard lock(mutex_);
    stream_ = nullptr;
  };
  hello.set_schema_version(events::kSchemaVersion);
  for (const auto& type : events::all_event_type_names()) hello.add_event_types(type);
  hello.set_member(options_.member);
  hello.set_mirrored_seq(mirrored_seq_.load());
  auto stream = stub_->Follow(&ctx);
  v1::FollowResponse message;
  weightd::status ended;
  if (stream->Write(hello) && stream->Read(&message)) {
    if (message.schema_version() > events::kSchemaVersion) {
      ended = {errc::not_ready, "the leader writes event schema " +
                                    std::to_string(message.schema_version()) +
                                    " but this weightd decodes up to schema " +
                                    std::to_string(events::kSchemaVersion) +
                                    "; upgrade this standby's weightd"};
    } else if (message.epoch() < hello.epoch()) {
      ended = {errc::conflict, "the leader at " + options_.leader.address + " is at epoch " +
                                   std::to_string(message.epoch()) +
                                   " but this standby's journal holds epoch " +
                                   std::to_string(hello.epoch()) +
                                   ": it is a former leader; follow the current one"};
    } else if (message.has_divergence()) {
      ended = step_back(message.divergence());
      stepped_back_ = ended.ok();  // the leader ends this stream; the next starts at once
      if (!ended.ok() && status().failure.empty())
        spdlog::warn("standby could not set its diverged tail aside error=\"{}\"; it tries "
                     "again", ended.to_string());
    } else {
      {
        std::lock_guard lock(mutex_);
        status_.connected = true;
        status_.leader_seq = message.leader_seq();
        if (status_.durable_seq >= status_.leader_seq)
          status_.caught_up_at = std::chrono::steady_clock::now();
        ++status_.streams;
        changed_.notify_all();
      }
      spdlog::info("standby follows leader={} from_seq={} leader_seq={}", options_.leader.address,
                   hello.durable_seq() + 1, message.leader_seq());
      {
        std::lock_guard lock(write_mutex_);
        writer_ = stream.get();  // the mirror acknowledges on it too
      }
      while (ended.ok() && stream->Read(&message)) {
        ended = take(message);
        if (ended.ok() && !acknowledge()) break;
      }
      std::lock_guard lock(write_mutex_);
      writer_ = nullptr;
    }
  }
  if (!ended.ok()) ctx.TryCancel();
  auto finished = from_grpc(ctx, stream->Finish());
  forget();
  if (!ended.ok()) return ended;
  if (!finished.ok()) return finished;
  return {errc::internal, "the leader ended the stream"};
}

weightd::status follower::take(v1::FollowResponse& message) {
  std::vector<events::v1::Envelope> batch;
  batch.reserve(static_cast<size_t>(message.envelopes_size()));
  for (auto& e : *message.mutable_envelopes()) batch.push_back(std::move(e));
  if (!batch.empty()) {
    if (auto st = journal_->append_copied(batch); !st.ok()) {
      // Not the next seqs or a lower epoch (not a prefix of the leader's
      // journal), or a journal that refuses writes until it is reopened:
      // trying again cannot help.
      std::lock_guard lock(mutex_);
      status_.failure = st.to_string();
      return st;
    }
  }
  std::unique_lock lock(mutex_);
  for (const auto& e : batch) {
    if (auto st = persistence::fold_event(state_, e); !st.ok()) {
      status_.failure = "event " + std::to_string(e.global_seq()) + " does not fold: " + st.to_string();
      return st;
    }
  }
  status_.durable_seq = state_.applied_seq;
  status_.epoch = state_.epoch;
  status_.leader_seq = std::max(message.leader_seq(), status_.durable_seq);
  if (status_.durable_seq >= status_.leader_seq)
    status_.caught_up_at = std::chrono::steady_clock::now();
  changed_.notify_all();
  lock.unlock();  // only this thread changes state_: it reads it unlocked below
  fold_step step;
  for (const auto& e : batch)
    if (auto ref = object_of(e)) step.touched.push_back(std::move(*ref));
  if (!batch.empty()) {
    step.from_seq = batch.front().global_seq();
    step.to_seq = batch.back().global_seq();
    tell(step);
  }
  since_snapshot_ += batch.size();
  if (options_.snapshot_every && since_snapshot_ >= options_.snapshot_every) {
    since_snapshot_ = 0;
    if (auto saved = persistence::save_state_snapshot(*journal_, state_); !saved)
      spdlog::warn("standby snapshot failed error=\"{}\"; the next one retries",
                   saved.error().to_string());
  }
  return {};
}

weightd::status follower::step_back(const v1::Divergence& divergence) {
  auto had = status();
  auto stop_for_good = [this](const std::string& why) {
    std::lock_guard lock(mutex_);
    status_.failure = why;
    return weightd::status{errc::conflict, why};
  };
  // What the leader says must fit what this journal holds; and a standby
  // that served reads in this run does not rewrite them under its readers.
  if (divergence.last_common_seq() >= had.durable_seq || divergence.epoch() <= had.epoch)
    return stop_for_good("the leader says this journal diverged after seq " +
                         std::to_string(divergence.last_common_seq()) + " at epoch " +
                         std::to_string(divergence.epoch()) + ", but it holds seq " +
                         std::to_string(had.durable_seq) + " at epoch " +
                         std::to_string(had.epoch));
  if (had.streams > 0)
    return stop_for_good("the leader's history no longer holds seqs " +
                         std::to_string(divergence.last_common_seq() + 1) + ".." +
                         std::to_string(had.durable_seq) +
                         " this standby copied and served; restart it to set them aside");
  if (options_.data_dir.empty())
    return stop_for_good("this journal diverged and there is no data directory to set its "
                         "tail aside in");
  auto stepped = set_aside_diverged(*journal_, divergence, options_.data_dir);
  if (!stepped) return stepped.error();  // nothing removed yet unless it says so: try again
  auto folded = persistence::fold_journal(*journal_);
  if (!folded) return stop_for_good("folding the journal after setting its diverged tail aside "
                                    "failed: " + folded.error().to_string());
  if (folded->applied_seq != divergence.last_common_seq())
    return stop_for_good("after setting its diverged tail aside the journal ends at seq " +
                         std::to_string(folded->applied_seq) + ", not " +
                         std::to_string(divergence.last_common_seq()));
  {
    std::lock_guard lock(mutex_);
    state_ = std::move(*folded);
    status_.durable_seq = state_.applied_seq;
    status_.epoch = state_.epoch;
    since_snapshot_ = 0;
  }
  if (mirrored_seq_.load() > divergence.last_common_seq())
    mirrored_seq_ = divergence.last_common_seq();  // the mirror says again what it holds
  fold_step everything;
  everything.everything = true;
  everything.to_seq = divergence.last_common_seq();
  tell(everything);
  spdlog::warn("standby set its diverged tail aside events={} seqs={}..{} file={} "
               "last_common_seq={} leader_epoch={}; it follows from there",
               *stepped, divergence.last_common_seq() + 1, had.durable_seq,
               diverged_file(options_.data_dir, divergence).string(),
               divergence.last_common_seq(), divergence.epoch());
  return {};
}

result<uint64_t> take_leadership(persistence::journal_backend& journal, const std::string& member,
                                 const std::string& advertise, int64_t now_ms) {
  auto epoch = journal.highest_epoch();
  if (!epoch) return epoch.error();
  auto seq = journal.highest_seq();
  if (!seq) return seq.error();
  events::v1::Envelope e;
  e.set_stream(events::kSystemStream);
  e.set_timestamp_ms(now_ms);
  e.set_epoch(*epoch + 1);
  auto* taken = e.mutable_leadership_taken();
  taken->set_epoch(*epoch + 1);
  taken->set_member(member);
  taken->set_advertise(advertise);
  taken->set_last_seq_of_previous_epoch(*seq);
  std::vector<events::v1::Envelope> batch{std::move(e)};
  if (auto st = journal.append(batch); !st.ok()) return st;
  return *epoch + 1;
}

}  // namespace weightd::api
