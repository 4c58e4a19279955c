#include "api/server/replica_mirror.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <unordered_set>

namespace weightd::api {

namespace ev = events::v1;
using events::object_record;
using events::object_ref;
using persistence::tier_store;

mirror_placement place_mirror(const object_record* record, bool hot_fits) {
  mirror_placement p;
  if (!record || !record->readable()) return p;
  p.cold = record->cold || (record->hot && !hot_fits);
  p.hot = record->hot && hot_fits;
  return p;
}

namespace {

/// The bytes are the object's: its size and the checksum its algorithm names.
bool digest_matches(const object_record& r, const persistence::blob_digest& d) {
  const auto& sum = r.checksum_algorithm == ev::CHECKSUM_SHA256 ? d.sha256 : d.xxh3;
  return d.size == r.size && sum == r.checksum;
}

std::vector<object_ref> refs_of(const events::store_state& s) {
  std::vector<object_ref> out;
  out.reserve(s.objects.objects.size());
  for (const auto& [ref, record] : s.objects.objects) out.push_back(ref);
  return out;
}

}  // namespace

result<std::unique_ptr<replica_mirror>> replica_mirror::start(follower& standby,
                                                              actors::tiers files,
                                                              mirror_options options) {
  for (const auto* store : {files.hot.get(), files.cold.get()})
    if (auto st = store->init(); !st.ok()) return st;
  std::unique_ptr<replica_mirror> m{new replica_mirror(standby, std::move(files), std::move(options))};
  m->remove_unowned_files();
  // Listen first, then queue the whole fold: an object folded in between is
  // queued twice, never missed.
  standby.listen([self = m.get()](const follower::fold_step& step) { self->touched(step); });
  follower::fold_step all;
  all.everything = true;
  all.to_seq = standby.status().durable_seq;
  m->touched(all);
  for (unsigned i = 0; i < std::max(1u, m->options_.parallelism); ++i)
    m->workers_.emplace_back([self = m.get()] { self->work(); });
  return m;
}

replica_mirror::replica_mirror(follower& standby, actors::tiers files, mirror_options options)
    : standby_(standby),
      files_(std::move(files)),
      options_(std::move(options)),
      leader_(options_.leader) {}

replica_mirror::~replica_mirror() { stop(); }

void replica_mirror::stop() {
  standby_.listen(nullptr);
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    for (auto* ctx : in_flight_) ctx->TryCancel();
    wake_.notify_all();
  }
  for (auto& w : workers_)
    if (w.joinable()) w.join();
  workers_.clear();
}

mirror_status replica_mirror::status() const {
  std::lock_guard lock(mutex_);
  auto s = counts_;
  s.held = held_.size();
  s.pending = queued_.size() + busy_.size() + retry_at_.size();
  return s;
}

/// Files of neither tier that no object of the fold owns: objects removed
/// while this standby was down, and temp files of copies a crash cut short.
void replica_mirror::remove_unowned_files() {
  auto refs = standby_.read(refs_of);
  std::unordered_set<std::string> owned;
  owned.reserve(2 * refs.size());
  for (const auto& ref : refs)
    for (const auto* store : {files_.hot.get(), files_.cold.get()})
      owned.insert(store->object_path(ref).native());
  uint64_t removed = 0;
  for (const auto* store : {files_.hot.get(), files_.cold.get()})
    for (const auto& path : store->list_files())
      if (!owned.count(path.native())) {
        tier_store::remove_file(path);
        ++removed;
      }
  if (removed) spdlog::info("standby removed files no object owns files={}", removed);
}

void replica_mirror::queue(const object_ref& ref, uint64_t since) {
  if (since_.emplace(ref, since).second) since_seqs_.insert(since);
  for (auto it = retry_at_.begin(); it != retry_at_.end(); ++it)
    if (it->second == ref) {  // touched again: try now
      retry_at_.erase(it);
      break;
    }
  if (!queued_.insert(ref).second) return;
  queue_.push_back(ref);
  wake_.notify_all();  // a pacing worker waits on it too
}

void replica_mirror::touched(const follower::fold_step& step) {
  std::vector<object_ref> all;
  if (step.everything) all = standby_.read(refs_of);  // the fold's lock, not this one's
  {
    std::lock_guard lock(mutex_);
    folded_seq_ = step.to_seq;
    if (step.everything) reported_seq_ = std::min(reported_seq_, step.to_seq);
    for (const auto& ref : step.touched) queue(ref, step.from_seq);
    for (const auto& ref : all) queue(ref, 1);  // held since when? not known: from the start
    if (step.everything)
      for (const auto& [ref, k] : known_) queue(ref, 1);  // files of objects the fold lost
  }
  report();
}

uint64_t replica_mirror::mirrored_seq() const {
  return since_seqs_.empty() ? folded_seq_ : std::min(folded_seq_, *since_seqs_.begin() - 1);
}

void replica_mirror::report() {
  uint64_t seq;
  {
    std::lock_guard lock(mutex_);
    seq = mirrored_seq();
    if (seq <= reported_seq_) return;
    reported_seq_ = seq;
  }
  standby_.mirrored(seq);
}

void replica_mirror::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    auto ready = [&] {
      return stopping_ || !queue_.empty() ||
             (!retry_at_.empty() && retry_at_.begin()->first <= std::chrono::steady_clock::now());
    };
    if (retry_at_.empty()) wake_.wait(lock, ready);
    else {
      auto due = retry_at_.begin()->first;  // a copy: the entry may go while we wait
      wake_.wait_until(lock, due, ready);
    }
    if (stopping_) return;
    if (queue_.empty()) {  // a retry is due
      auto ref = retry_at_.begin()->second;
      retry_at_.erase(retry_at_.begin());
      queue(ref, 1);  // its since_ stays as it was
    }
    auto ref = queue_.front();
    queue_.pop_front();
    queued_.erase(ref);
    if (!busy_.insert(ref).second) {  // another worker has it: it runs it again after
      dirty_.insert(ref);
      continue;
    }
    lock.unlock();
    auto outcome = reconcile(ref);
    lock.lock();
    busy_.erase(ref);
    if (outcome.ok()) {
      backoff_.erase(ref);
      if (!dirty_.count(ref) && !queued_.count(ref))  // not touched again meanwhile
        if (auto it = since_.find(ref); it != since_.end()) {
          since_seqs_.erase(since_seqs_.find(it->second));
          since_.erase(it);
        }
    } else if (!stopping_) {
      ++counts_.failures;
      if (counts_.last_error != outcome.to_string())
        spdlog::warn("standby could not copy a replica tenant={} key=\"{}\" error=\"{}\"; it "
                     "tries again", ref.tenant, ref.key, outcome.to_string());
      counts_.last_error = outcome.to_string();
      auto& wait = backoff_[ref];
      wait = wait.count() ? std::min(options_.max_retry, wait * 2) : options_.min_retry;
      retry_at_.emplace(std::chrono::steady_clock::now() + wait, ref);
    }
    if (dirty_.erase(ref)) queue(ref, 1);  // its since_ stays as it was
    lock.unlock();
    report();
    lock.lock();
  }
}

status replica_mirror::reconcile(const object_ref& ref) {
  auto record = standby_.read([&](const events::store_state& s) -> std::optional<object_record> {
    if (const auto* r = s.objects.find(ref)) return *r;
    return std::nullopt;
  });
  const object_record* r = record ? &*record : nullptr;
  bool fits;
  {
    std::lock_guard lock(mutex_);
    fits = hot_fits(ref, r ? r->size : 0);
  }
  auto want = place_mirror(r, fits);
  std::optional<held_file> have[2] = {look(ref, ev::TIER_HOT, r), look(ref, ev::TIER_COLD, r)};
  auto wanted = [&](ev::Tier t) { return t == ev::TIER_HOT ? want.hot : want.cold; };
  for (auto tier : {ev::TIER_HOT, ev::TIER_COLD}) {
    auto& file = have[tier == ev::TIER_COLD];
    bool right = file && r && file->size == r->size && file->checksum == r->checksum;
    if (file && (!wanted(tier) || !right)) {  // not wanted, or another put's bytes
      if (auto st = files_.of(tier).remove(ref); !st.ok()) return st;
      forget(ref, tier);
      file.reset();
    }
  }
  // COLD first: a HOT copy is then a local one.
  if (want.cold && !have[1]) {
    if (auto st = copy(*r, ev::TIER_COLD, have[0]); !st.ok()) return st;
    have[1] = held_file{r->size, r->checksum};
  }
  if (want.hot && !have[0]) {
    auto st = copy(*r, ev::TIER_HOT, have[1]);
    if (st.code() == errc::no_available_space && !have[1])  // HOT is full after all: COLD
      st = copy(*r, ev::TIER_COLD, std::nullopt);
    if (!st.ok()) return st;
  }
  std::lock_guard lock(mutex_);
  if (want.hot || want.cold) held_.insert(ref);
  else held_.erase(ref);
  return {};
}

std::optional<replica_mirror::held_file> replica_mirror::look(const object_ref& ref,
                                                              ev::Tier tier,
                                                              const object_record* record) {
  {
    std::lock_guard lock(mutex_);
    if (auto it = known_.find(ref); it != known_.end()) {
      const auto& file = tier == ev::TIER_HOT ? it->second.hot : it->second.cold;
      if (file) return file;
    }
  }
  const auto& store = files_.of(tier);
  std::error_code ec;
  if (!std::filesystem::exists(store.object_path(ref), ec)) return std::nullopt;
  // A file from before this run (a restart of the standby): checked once.
  if (record && store.verify(ref, record->size, record->checksum, options_.checksums) ==
                    persistence::replica_check::ok) {
    held_file file{record->size, record->checksum};
    remember(ref, tier, file);
    return file;
  }
  return held_file{};  // not the fold's bytes: removed by the caller
}

status replica_mirror::copy(const object_record& record, ev::Tier into,
                            const std::optional<held_file>& other) {
  const auto& target = files_.of(into);
  bool want_sha256 = record.checksum_algorithm == ev::CHECKSUM_SHA256;
  if (other) {  // the other tier has the bytes: a local copy
    std::string temp;
    {
      std::lock_guard lock(mutex_);
      temp = "mirror-" + std::to_string(++temp_names_);
    }
    auto digest = target.copy_from(files_.other(into), record.ref, temp, want_sha256);
    if (digest && digest_matches(record, *digest)) {
      remember(record.ref, into, {record.size, record.checksum});
      std::lock_guard lock(mutex_);
      ++counts_.local_copies;
      return {};
    }
    if (digest) (void)target.remove(record.ref);  // damaged here: fetch it instead
    else if (digest.error().code() == errc::no_available_space) return digest.error();
  }
  return fetch(record, target);
}

status replica_mirror::fetch(const object_record& record, const tier_store& into) {
  std::filesystem::path temp;
  {
    std::lock_guard lock(mutex_);
    temp = into.temp_path("mirror-" + std::to_string(++temp_names_));
  }
  if (auto st = into.allocate(temp, record.size); !st.ok()) return st;
  auto writer = persistence::blob_writer::create(temp, record.checksum_algorithm ==
                                                           ev::CHECKSUM_SHA256,
                                                 into.options().inject_enospc_after_bytes);
  if (!writer) {
    tier_store::remove_file(temp);
    return writer.error();
  }
  grpc::ClientContext ctx;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) {
      tier_store::remove_file(temp);
      return {errc::not_ready, "the standby stops"};
    }
    in_flight_.insert(&ctx);
  }
  weightd::v1::GetRequest req;
  req.set_tenant(record.ref.tenant);
  req.set_key(record.ref.key);
  req.set_for_replica(true);
  auto got = leader_.get(
      req,
      [&](const std::string& chunk) -> weightd::status {
        if (!pace(chunk.size())) return {errc::not_ready, "the standby stops"};
        return (*writer)->write(chunk.data(), chunk.size());
      },
      &ctx);
  {
    std::lock_guard lock(mutex_);
    in_flight_.erase(&ctx);
  }
  auto digest = got.ok() ? (*writer)->finish() : result<persistence::blob_digest>(got.error());
  weightd::status failure;
  if (!digest) failure = digest.error();
  else if (!digest_matches(record, *digest))
    failure = weightd::status{errc::conflict, "the leader sent " + std::to_string(digest->size) +
                                                  " bytes that do not match the object's size "
                                                  "and checksum"};
  else
    failure = into.publish(temp, record.ref);
  if (!failure.ok()) {
    tier_store::remove_file(temp);
    return failure;
  }
  remember(record.ref, into.tier(), {record.size, record.checksum});
  std::lock_guard lock(mutex_);
  ++counts_.copied_objects;
  counts_.copied_bytes += record.size;
  return {};
}

void replica_mirror::remember(const object_ref& ref, ev::Tier tier, held_file file) {
  std::lock_guard lock(mutex_);
  auto& slot = tier == ev::TIER_HOT ? known_[ref].hot : known_[ref].cold;
  if (tier == ev::TIER_HOT) hot_bytes_ += file.size - (slot ? slot->size : 0);
  slot = std::move(file);
}

void replica_mirror::forget(const object_ref& ref, ev::Tier tier) {
  std::lock_guard lock(mutex_);
  auto it = known_.find(ref);
  if (it == known_.end()) return;
  auto& slot = tier == ev::TIER_HOT ? it->second.hot : it->second.cold;
  if (slot && tier == ev::TIER_HOT) hot_bytes_ -= slot->size;
  slot.reset();
  if (!it->second.hot && !it->second.cold) known_.erase(it);
}

bool replica_mirror::hot_fits(const object_ref& ref, uint64_t size) const {
  auto capacity = files_.hot->options().capacity_bytes;
  if (capacity == 0) return true;
  if (auto it = known_.find(ref); it != known_.end() && it->second.hot) return true;
  return hot_bytes_ + size <= capacity;
}

bool replica_mirror::pace(size_t bytes) {
  if (options_.rate_bytes == 0) return true;
  std::unique_lock lock(mutex_);
  auto now = std::chrono::steady_clock::now();
  auto slot = std::max(now, next_free_);
  next_free_ = slot + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                          std::chrono::duration<double>(static_cast<double>(bytes) /
                                                        static_cast<double>(options_.rate_bytes)));
  wake_.wait_until(lock, slot, [&] { return stopping_; });
  return !stopping_;
}

}  // namespace weightd::api
