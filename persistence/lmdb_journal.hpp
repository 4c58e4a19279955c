// The production journal: one LMDB environment (format in FORMAT.md).
//
// One writer per process (the journal-writer actor); readers in any thread or
// process — `weightctl journal` opens the same files read-only while the
// daemon writes. Map growth is transparent: on MDB_MAP_FULL the batch is
// aborted, the map doubled and the batch retried, up to max_map_bytes. After a
// failed commit (fsync) the journal refuses all further writes until reopened,
// because whether that batch reached the disk is known only after a restart.
#pragma once

#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <shared_mutex>

#include "persistence/journal_backend.hpp"

struct MDB_env;
struct MDB_txn;

namespace weightd::persistence {

struct lmdb_options {
  std::filesystem::path dir;                // holds data.mdb and lock.mdb
  durability mode = durability::sync;
  uint64_t initial_map_bytes = 64ull << 20; // grows by doubling
  uint64_t max_map_bytes = 1ull << 40;      // growth stops here: DURABILITY_FAILED
  bool read_only = false;                   // for weightctl: never writes, never grows
};

/// What `weightctl journal stats` and the metrics show.
struct lmdb_stats {
  uint64_t highest_seq = 0;
  uint64_t event_count = 0;
  uint64_t stream_count = 0;
  uint64_t snapshot_count = 0;
  uint64_t incarnation = 0;
  uint64_t map_bytes = 0;
  uint64_t used_bytes = 0;   // (last page + 1) * page size
  uint64_t map_growths = 0;  // doublings since open
};

class lmdb_journal final : public journal_backend {
 public:
  /// Opens (creating when writable) the journal in options.dir. A writer
  /// takes the next incarnation number.
  static result<std::unique_ptr<lmdb_journal>> open(const lmdb_options& options);
  ~lmdb_journal() override;
  lmdb_journal(const lmdb_journal&) = delete;
  lmdb_journal& operator=(const lmdb_journal&) = delete;

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
  uint64_t writer_id() const override { return incarnation_; }
  /// madvise(DONTNEED) over the read-only map: replay touched every page.
  void release_read_cache() const override;

  result<lmdb_stats> stats() const;
  const lmdb_options& options() const { return options_; }

 private:
  /// A u64 of the meta database (0 when absent).
  result<uint64_t> meta_u64(std::string_view key) const;
  explicit lmdb_journal(lmdb_options options) : options_(std::move(options)) {}
  status init();
  // Runs fn(txn) -> int (an LMDB code) in a read transaction.
  template <class Fn>
  status with_read_txn(Fn&& fn) const;
  // Runs fn(txn) -> int in a write transaction and commits it; grows the map
  // and retries on MDB_MAP_FULL. `what` names the action in errors.
  template <class Fn>
  status with_write_txn(const char* what, Fn&& fn);
  status grow_map();

  lmdb_options options_;
  MDB_env* env_ = nullptr;
  unsigned events_ = 0, streams_ = 0, stream_meta_ = 0, snapshots_ = 0, meta_ = 0;
  uint64_t incarnation_ = 0;
  uint64_t highest_ = 0;            // writer's cache of meta "highest_seq"
  uint64_t epoch_ = 0;              // writer's cache of meta "epoch"
  uint64_t map_bytes_ = 0;
  std::atomic<uint64_t> map_growths_{0};
  std::mutex write_mutex_;          // one write transaction at a time
  mutable std::shared_mutex map_mutex_;  // readers shared; map resize exclusive
  std::string poisoned_;            // non-empty after a failed commit
};

}  // namespace weightd::persistence
