// An in-memory journal backend with the same semantics as lmdb_journal,
// including record encoding and checksums (so every stored event really is
// serialized and parsed back). For tests and embedders that need no durability.
#pragma once

#include <map>
#include <shared_mutex>

#include "persistence/journal_backend.hpp"

namespace weightd::persistence {

class memory_journal final : public journal_backend {
 public:
  explicit memory_journal(uint64_t writer_id = 1) : writer_id_(writer_id) {}

  status append_batch(std::vector<Envelope>& batch, numbering how) override;
  result<uint64_t> highest_seq() const override;
  result<uint64_t> highest_epoch() const override;
  status read(seq_range range, const event_visitor& visit) const override;
  result<uint64_t> highest_stream_seq(std::string_view stream) const override;
  status read_stream(std::string_view stream, seq_range range,
                     const event_visitor& visit) const override;
  status truncate_after(uint64_t seq) override;
  status delete_stream_to(std::string_view stream, uint64_t to_stream_seq) override;
  status save_snapshot(const snapshot_record& snapshot) override;
  result<std::optional<snapshot_record>> load_snapshot(
      std::string_view stream, const snapshot_criteria& criteria) const override;
  result<std::vector<uint64_t>> damaged_snapshots(std::string_view stream) const override;
  status delete_snapshot(std::string_view stream, uint64_t seq) override;
  status delete_snapshots(std::string_view stream, const snapshot_criteria& criteria) override;
  uint64_t writer_id() const override { return writer_id_; }

  /// Test hook: flips a byte of the stored record of `seq`.
  void corrupt_event_for_testing(uint64_t seq);
  /// Test hook: flips a byte of the stored snapshot (stream, seq).
  void corrupt_snapshot_for_testing(std::string_view stream, uint64_t seq);

 private:
  struct stream_info {
    uint64_t highest = 0;
    uint64_t deleted_to = 0;
    std::map<uint64_t, uint64_t> index;  // stream_seq -> global_seq
  };

  mutable std::shared_mutex mutex_;
  uint64_t writer_id_;
  uint64_t highest_ = 0;
  uint64_t epoch_ = 0;
  std::map<uint64_t, std::string> events_;  // global_seq -> record
  std::map<std::string, stream_info, std::less<>> streams_;
  std::map<std::pair<std::string, uint64_t>, std::string> snapshots_;  // -> record
};

}  // namespace weightd::persistence
