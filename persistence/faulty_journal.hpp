// A journal decorator that injects failures, for tests of every failure path
// (the PersistenceTestKit idea: a storage policy per operation).
//
// A fault is armed for the nth call of its kind from now (1 = the next one)
// and fires once, except `fail_fsync`, which — like a real failed commit —
// leaves the journal refusing every append until it is "reopened" (reset()).
// hold_appends() stalls the disk instead: appends wait until released.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "persistence/journal_backend.hpp"

namespace weightd::persistence {

enum class fault {
  fail_write,  // the write fails before commit: nothing stored, journal usable
  fail_fsync,  // the commit's fsync fails: the batch IS stored (durability
               // unknown to the caller) and further appends are refused
  reject,      // the batch is refused as invalid: nothing stored, journal usable
  map_full,    // the map cannot grow: nothing stored, journal usable
  fail_read,   // a read fails (stored data untouched)
  fail_truncate,  // truncate_after fails: nothing removed (a crash before its commit)
};

class faulty_journal final : public journal_backend {
 public:
  explicit faulty_journal(std::shared_ptr<journal_backend> inner) : inner_(std::move(inner)) {}

  /// Arms `f` to fire on the nth call of its kind (appends; reads for
  /// fail_read; truncations for fail_truncate).
  void inject(fault f, uint64_t nth = 1);
  /// Disarms everything and forgets a failed fsync (as a restart would).
  void reset();
  uint64_t faults_fired() const { return fired_; }
  /// From now on appends wait (the disk stalls) until release_appends().
  void hold_appends();
  void release_appends();
  /// How many appends wait in hold_appends() now.
  size_t appends_waiting() const;

  status append_batch(std::vector<Envelope>& batch, numbering how) override;
  result<uint64_t> highest_seq() const override { return inner_->highest_seq(); }
  result<uint64_t> highest_epoch() const override { return inner_->highest_epoch(); }
  status read(seq_range range, const event_visitor& visit) const override;
  result<uint64_t> highest_stream_seq(std::string_view stream) const override {
    return inner_->highest_stream_seq(stream);
  }
  status read_stream(std::string_view stream, seq_range range,
                     const event_visitor& visit) const override;
  status delete_stream_to(std::string_view stream, uint64_t to) override {
    return inner_->delete_stream_to(stream, to);
  }
  status truncate_after(uint64_t seq) override;
  status save_snapshot(const snapshot_record& s) override { return inner_->save_snapshot(s); }
  result<std::optional<snapshot_record>> load_snapshot(
      std::string_view stream, const snapshot_criteria& c) const override {
    return inner_->load_snapshot(stream, c);
  }
  result<std::vector<uint64_t>> damaged_snapshots(std::string_view stream) const override {
    return inner_->damaged_snapshots(stream);
  }
  status delete_snapshot(std::string_view stream, uint64_t seq) override {
    return inner_->delete_snapshot(stream, seq);
  }
  status delete_snapshots(std::string_view stream, const snapshot_criteria& c) override {
    return inner_->delete_snapshots(stream, c);
  }
  uint64_t writer_id() const override { return inner_->writer_id(); }
  void release_read_cache() const override { inner_->release_read_cache(); }

 private:
  bool fires(fault f, uint64_t& countdown) const;
  status read_fault() const;

  std::shared_ptr<journal_backend> inner_;
  mutable std::mutex mutex_;
  fault armed_append_ = fault::fail_write;
  uint64_t append_countdown_ = 0;           // 0 = nothing armed
  mutable uint64_t read_countdown_ = 0;
  uint64_t truncate_countdown_ = 0;
  bool fsync_failed_ = false;
  mutable std::atomic<uint64_t> fired_{0};
  mutable std::mutex hold_mutex_;  // apart from mutex_: a held append holds no other lock
  std::condition_variable released_;
  bool holding_ = false;
  size_t waiting_ = 0;
};

}  // namespace weightd::persistence
