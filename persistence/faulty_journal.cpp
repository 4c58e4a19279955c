#include "persistence/faulty_journal.hpp"

namespace weightd::persistence {

void faulty_journal::inject(fault f, uint64_t nth) {
  std::lock_guard lock(mutex_);
  if (f == fault::fail_read) {
    read_countdown_ = nth;
  } else if (f == fault::fail_truncate) {
    truncate_countdown_ = nth;
  } else {
    armed_append_ = f;
    append_countdown_ = nth;
  }
}

void faulty_journal::reset() {
  std::lock_guard lock(mutex_);
  append_countdown_ = 0;
  read_countdown_ = 0;
  truncate_countdown_ = 0;
  fsync_failed_ = false;
}

status faulty_journal::truncate_after(uint64_t seq) {
  {
    std::lock_guard lock(mutex_);
    if (fires(fault::fail_truncate, truncate_countdown_))
      return {errc::durability_failed, "injected truncation failure: nothing removed"};
  }
  return inner_->truncate_after(seq);
}

bool faulty_journal::fires(fault, uint64_t& countdown) const {
  if (countdown == 0) return false;
  if (--countdown != 0) return false;
  ++fired_;
  return true;
}

void faulty_journal::hold_appends() {
  std::lock_guard lock(hold_mutex_);
  holding_ = true;
}

void faulty_journal::release_appends() {
  std::lock_guard lock(hold_mutex_);
  holding_ = false;
  released_.notify_all();
}

size_t faulty_journal::appends_waiting() const {
  std::lock_guard lock(hold_mutex_);
  return waiting_;
}

status faulty_journal::append_batch(std::vector<Envelope>& batch, numbering how) {
  {
    std::unique_lock held(hold_mutex_);
    if (holding_) {
      ++waiting_;
      released_.wait(held, [this] { return !holding_; });
      --waiting_;
    }
  }
  std::lock_guard lock(mutex_);
  if (fsync_failed_)
    return {errc::durability_failed,
            "the journal refuses writes since a commit failed (injected fsync failure); "
            "restart weightd, then re-read before retrying"};
  if (!fires(armed_append_, append_countdown_)) return inner_->append_batch(batch, how);
  switch (armed_append_) {
    case fault::fail_write:
      return {errc::durability_failed,
              "journal write failed (injected I/O error); nothing was written"};
    case fault::reject:
      return {errc::invalid_argument, "the batch was rejected (injected); nothing was written"};
    case fault::map_full:
      return {errc::durability_failed,
              "the journal map is full (injected); raise --journal-max-map-bytes or free disk"};
    case fault::fail_fsync: {
      // The data went out but the fsync failed: it may well be on disk.
      auto st = inner_->append_batch(batch, how);
      fsync_failed_ = true;
      if (!st.ok()) return st;
      return {errc::durability_failed,
              "journal commit failed (injected fsync failure); whether this batch reached "
              "the disk is known only after a restart: restart weightd and re-read"};
    }
    case fault::fail_read: break;
  }
  return inner_->append_batch(batch, how);
}

status faulty_journal::read_fault() const {
  return {errc::internal, "cannot read the journal (injected read failure)"};
}

status faulty_journal::read(seq_range range, const event_visitor& visit) const {
  {
    std::lock_guard lock(mutex_);
    if (fires(fault::fail_read, read_countdown_)) return read_fault();
  }
  return inner_->read(range, visit);
}

status faulty_journal::read_stream(std::string_view stream, seq_range range,
                                   const event_visitor& visit) const {
  {
    std::lock_guard lock(mutex_);
    if (fires(fault::fail_read, read_countdown_)) return read_fault();
  }
  return inner_->read_stream(stream, range, visit);
}

}  // namespace weightd::persistence
