// The journal backend interface: where events and snapshots are kept.
//
// Three implementations share it: lmdb_journal (production), memory_journal
// (fast tests) and faulty_journal (a decorator that injects failures). The
// journal-writer actor is the only appender in a process; readers may call the
// const functions from any thread at any time, also while a write is running.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "events/events.pb.h"
#include "events/status.hpp"

namespace weightd::persistence {

using Envelope = events::v1::Envelope;

inline constexpr uint64_t kMaxSeq = std::numeric_limits<uint64_t>::max();
inline constexpr int64_t kMaxTime = std::numeric_limits<int64_t>::max();

/// Called for each envelope a read yields, in order; return false to stop.
using event_visitor = std::function<bool(const Envelope&)>;

enum class durability {
  sync,    // every committed batch is on disk before append returns (default)
  nosync,  // the OS flushes when it likes: benchmarks and tests only
};

/// An inclusive range [from, to] with at most `max` results.
struct seq_range {
  uint64_t from = 1;
  uint64_t to = kMaxSeq;
  uint64_t max = kMaxSeq;
};

/// A serialized snapshot of a stream's (or the whole store's) state.
struct snapshot_record {
  std::string stream;
  uint64_t seq = 0;           // the event seq the snapshot includes
  int64_t timestamp_ms = 0;   // when it was taken
  std::string data;
};

/// Which snapshots a load or delete means (all bounds inclusive).
struct snapshot_criteria {
  uint64_t max_seq = kMaxSeq;
  int64_t max_timestamp_ms = kMaxTime;
  uint64_t min_seq = 0;
  int64_t min_timestamp_ms = 0;
  bool matches(const snapshot_record& s) const {
    return s.seq <= max_seq && s.seq >= min_seq && s.timestamp_ms <= max_timestamp_ms &&
           s.timestamp_ms >= min_timestamp_ms;
  }
};

/// Who numbers an appended batch: this journal, or the leader it copies.
enum class numbering { assign, copied };

class journal_backend {
 public:
  virtual ~journal_backend() = default;

  /// Appends `batch` atomically: all envelopes are stored or none. Assigns
  /// global_seq and stream_seq in place (and writer_id/schema_version when
  /// unset). In sync mode the batch is on disk when this returns ok.
  /// Errors: INVALID_ARGUMENT (rejected: nothing written, keep using the
  /// journal), DURABILITY_FAILED (nothing published; after a failed commit the
  /// journal refuses every further append until it is reopened).
  status append(std::vector<Envelope>& batch) { return append_batch(batch, numbering::assign); }

  /// A standby's append of its leader's envelopes (SPEC §11 Follow): they keep
  /// their seqs, writer and schema; each must be the next global seq and the
  /// next seq of its stream, else INVALID_ARGUMENT and nothing is written.
  status append_copied(std::vector<Envelope>& batch) {
    return append_batch(batch, numbering::copied);
  }

  /// Both appends: what each backend implements.
  virtual status append_batch(std::vector<Envelope>& batch, numbering how) = 0;

  /// The highest global seq ever assigned (0 for an empty journal).
  virtual result<uint64_t> highest_seq() const = 0;

  /// The highest epoch of an envelope it holds (SPEC §11; 0 = the first leader's).
  virtual result<uint64_t> highest_epoch() const = 0;

  /// Envelopes with from <= global_seq <= to, at most max, in seq order.
  virtual status read(seq_range range, const event_visitor& visit) const = 0;

  /// The highest stream_seq of `stream` ever assigned; never reset by deletion.
  virtual result<uint64_t> highest_stream_seq(std::string_view stream) const = 0;

  /// Envelopes of `stream` with from <= stream_seq <= to, at most max.
  virtual status read_stream(std::string_view stream, seq_range range,
                             const event_visitor& visit) const = 0;

  /// Permanently deletes `stream`'s events with stream_seq <= to_stream_seq.
  virtual status delete_stream_to(std::string_view stream, uint64_t to_stream_seq) = 0;

  /// A former leader's step back (SPEC §11 Divergence): removes every event
  /// with global_seq > `seq` (and their stream index entries) and every
  /// snapshot taken past it, in one transaction; highest_seq becomes `seq`
  /// and highest_epoch the epoch of the event at `seq`. The one operation
  /// that lowers highest_seq: only a standby, after it set its divergent
  /// tail aside, calls it. Nothing to do when the journal ends at `seq` or
  /// before.
  virtual status truncate_after(uint64_t seq) = 0;

  /// Saves a snapshot; one with the same (stream, seq) is overwritten.
  virtual status save_snapshot(const snapshot_record& snapshot) = 0;

  /// The newest snapshot of `stream` that matches and passes its checksum.
  virtual result<std::optional<snapshot_record>> load_snapshot(
      std::string_view stream, const snapshot_criteria& criteria) const = 0;

  /// The seqs of `stream`'s stored snapshots that fail their checksum (or
  /// decode as another stream's), oldest first. load_snapshot skips them;
  /// `journal verify` reports them.
  virtual result<std::vector<uint64_t>> damaged_snapshots(std::string_view stream) const = 0;

  /// Deletes the snapshot (stream, seq); deleting a missing one is ok.
  virtual status delete_snapshot(std::string_view stream, uint64_t seq) = 0;

  /// Deletes every snapshot of `stream` that matches.
  virtual status delete_snapshots(std::string_view stream,
                                  const snapshot_criteria& criteria) = 0;

  /// This writer's incarnation, stamped into every envelope it appends.
  virtual uint64_t writer_id() const = 0;

  /// Lets go of the read cache this process holds (after a replay read the
  /// whole journal): the pages stay in the OS page cache, not in this
  /// process's memory. Nothing to do for most backends.
  virtual void release_read_cache() const {}
};

/// Envelopes of one event type (e.g. "object_put") with global seqs in
/// `range`; `range.max` counts matching events only.
status read_type(const journal_backend& journal, std::string_view type, seq_range range,
                 const event_visitor& visit);

/// The first leadership_taken with an epoch above `epoch` (SPEC §11
/// Divergence: where a journal at `epoch` and this one part), read from the
/// system stream; nullopt when this journal holds none.
result<std::optional<events::v1::LeadershipTaken>> leadership_above(const journal_backend& journal,
                                                                    uint64_t epoch);

/// Checks a batch before it is written: every envelope needs a stream and a
/// payload, and must fit kMaxEventBytes. Shared by every backend.
status validate_batch(const std::vector<Envelope>& batch);

inline constexpr size_t kMaxEventBytes = 64u << 20;

}  // namespace weightd::persistence
