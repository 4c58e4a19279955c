#include "persistence/memory_journal.hpp"

#include <mutex>

#include "persistence/event_codec.hpp"
#include "persistence/record.hpp"

namespace weightd::persistence {

status memory_journal::append_batch(std::vector<Envelope>& batch, numbering how) {
  if (auto st = validate_batch(batch); !st.ok()) return st;
  std::unique_lock lock(mutex_);
  // Stage everything first so a batch is applied all or nothing.
  std::map<std::string, stream_info*> touched;
  std::map<std::string, uint64_t> next_stream_seq;
  std::vector<std::pair<uint64_t, std::string>> staged;
  uint64_t seq = highest_;
  uint64_t epoch = epoch_;
  for (auto& e : batch) {
    auto [it, fresh] = next_stream_seq.try_emplace(e.stream(), 0);
    if (fresh) {
      auto found = streams_.find(e.stream());
      it->second = found == streams_.end() ? 0 : found->second.highest;
    }
    if (auto st = stamp_event(e, ++seq, ++it->second, writer_id_, how, epoch); !st.ok()) return st;
    staged.emplace_back(seq, encode_event(e));
  }
  for (auto& [s, record] : staged) events_.emplace(s, std::move(record));
  for (const auto& e : batch) {
    auto& info = streams_[e.stream()];
    info.highest = e.stream_seq();
    info.index.emplace(e.stream_seq(), e.global_seq());
  }
  highest_ = seq;
  epoch_ = epoch;
  return {};
}

result<uint64_t> memory_journal::highest_epoch() const {
  std::shared_lock lock(mutex_);
  return epoch_;
}

result<uint64_t> memory_journal::highest_seq() const {
  std::shared_lock lock(mutex_);
  return highest_;
}

status memory_journal::read(seq_range range, const event_visitor& visit) const {
  std::shared_lock lock(mutex_);
  uint64_t count = 0;
  for (auto it = events_.lower_bound(range.from);
       it != events_.end() && it->first <= range.to && count < range.max; ++it, ++count) {
    auto e = decode_event(it->first, it->second);
    if (!e) return e.error();
    if (!visit(*e)) break;
  }
  return {};
}

result<uint64_t> memory_journal::highest_stream_seq(std::string_view stream) const {
  std::shared_lock lock(mutex_);
  auto it = streams_.find(stream);
  return it == streams_.end() ? 0 : it->second.highest;
}

status memory_journal::read_stream(std::string_view stream, seq_range range,
                                   const event_visitor& visit) const {
  std::shared_lock lock(mutex_);
  auto found = streams_.find(stream);
  if (found == streams_.end()) return {};
  uint64_t count = 0;
  const auto& index = found->second.index;
  for (auto it = index.lower_bound(range.from);
       it != index.end() && it->first <= range.to && count < range.max; ++it, ++count) {
    auto e = decode_event(it->second, events_.at(it->second));
    if (!e) return e.error();
    if (!visit(*e)) break;
  }
  return {};
}

status memory_journal::delete_stream_to(std::string_view stream, uint64_t to_stream_seq) {
  std::unique_lock lock(mutex_);
  auto found = streams_.find(stream);
  if (found == streams_.end()) return {};
  auto& info = found->second;
  auto end = info.index.upper_bound(to_stream_seq);
  for (auto it = info.index.begin(); it != end; ++it) events_.erase(it->second);
  info.index.erase(info.index.begin(), end);
  info.deleted_to = std::max(info.deleted_to, std::min(to_stream_seq, info.highest));
  return {};
}

status memory_journal::truncate_after(uint64_t seq) {
  std::unique_lock lock(mutex_);
  if (seq >= highest_) return {};
  uint64_t epoch = 0;  // the newest remaining event's (epochs never decrease)
  if (auto tail = events_.upper_bound(seq); tail != events_.begin()) {
    auto kept = std::prev(tail);
    auto e = decode_event(kept->first, kept->second);
    if (!e) return e.error();
    epoch = e->epoch();
  }
  if (seq > 0 && events_.upper_bound(seq) == events_.begin())
    return {errc::not_ready, "cannot truncate to seq " + std::to_string(seq) +
                                 ": the journal holds no event at or before it"};
  std::vector<std::pair<std::string, uint64_t>> tail;  // decoded first: all or nothing
  for (auto it = events_.upper_bound(seq); it != events_.end(); ++it) {
    auto e = decode_event(it->first, it->second);
    if (!e) return e.error();
    tail.emplace_back(e->stream(), e->stream_seq());
  }
  for (const auto& [stream, stream_seq] : tail) {
    auto& info = streams_[stream];
    info.index.erase(stream_seq);
    info.highest = info.index.empty() ? info.deleted_to : info.index.rbegin()->first;
  }
  events_.erase(events_.upper_bound(seq), events_.end());
  for (auto it = snapshots_.begin(); it != snapshots_.end();)
    it = it->first.second > seq ? snapshots_.erase(it) : std::next(it);
  highest_ = seq;
  epoch_ = epoch;
  return {};
}

status memory_journal::save_snapshot(const snapshot_record& s) {
  std::unique_lock lock(mutex_);
  auto key = stream_hash(s.stream) + be64(s.seq);
  snapshots_[{s.stream, s.seq}] =
      encode_record(key, encode_snapshot_body(s.stream, s.timestamp_ms, s.data));
  return {};
}

result<std::optional<snapshot_record>> memory_journal::load_snapshot(
    std::string_view stream, const snapshot_criteria& criteria) const {
  std::shared_lock lock(mutex_);
  std::string name{stream};
  auto first = snapshots_.lower_bound({name, 0});
  auto last = snapshots_.upper_bound({name, criteria.max_seq});
  for (auto it = last; it != first;) {
    --it;
    snapshot_record s;
    s.seq = it->first.second;
    auto body = decode_record(stream_hash(name) + be64(s.seq), it->second);
    if (!body || !decode_snapshot_body(*body, s.stream, s.timestamp_ms, s.data))
      continue;  // damaged: the newest *valid* snapshot is wanted
    if (criteria.matches(s)) return std::optional<snapshot_record>{std::move(s)};
  }
  return std::optional<snapshot_record>{};
}

result<std::vector<uint64_t>> memory_journal::damaged_snapshots(std::string_view stream) const {
  std::shared_lock lock(mutex_);
  std::string name{stream};
  std::vector<uint64_t> damaged;
  for (auto it = snapshots_.lower_bound({name, 0});
       it != snapshots_.end() && it->first.first == name; ++it) {
    snapshot_record s;
    auto body = decode_record(stream_hash(name) + be64(it->first.second), it->second);
    if (!body || !decode_snapshot_body(*body, s.stream, s.timestamp_ms, s.data))
      damaged.push_back(it->first.second);
  }
  return damaged;
}

status memory_journal::delete_snapshot(std::string_view stream, uint64_t seq) {
  std::unique_lock lock(mutex_);
  snapshots_.erase({std::string{stream}, seq});
  return {};
}

status memory_journal::delete_snapshots(std::string_view stream,
                                        const snapshot_criteria& criteria) {
  std::unique_lock lock(mutex_);
  std::string name{stream};
  for (auto it = snapshots_.lower_bound({name, 0});
       it != snapshots_.end() && it->first.first == name;) {
    snapshot_record s;
    s.seq = it->first.second;
    auto body = decode_record(stream_hash(name) + be64(s.seq), it->second);
    bool decoded = body && decode_snapshot_body(*body, s.stream, s.timestamp_ms, s.data);
    if (decoded && criteria.matches(s)) it = snapshots_.erase(it); else ++it;
  }
  return {};
}

void memory_journal::corrupt_event_for_testing(uint64_t seq) {
  std::unique_lock lock(mutex_);
  auto& record = events_.at(seq);
  record.back() = static_cast<char>(record.back() ^ 0x5a);
}

void memory_journal::corrupt_snapshot_for_testing(std::string_view stream, uint64_t seq) {
  std::unique_lock lock(mutex_);
  auto& record = snapshots_.at({std::string{stream}, seq});
  record.back() = static_cast<char>(record.back() ^ 0x5a);
}

}  // namespace weightd::persistence
