// Every actor interface of weightd, in one header: who can be told what.
//
// Conventions (CAF 0.17.6): atoms are atom_constant<atom("...")> (<= 10
// chars); domain errors travel as caf::error in the "weightd" category with
// the human message as context (errors.hpp converts both ways); every request
// made across an actor edge carries a finite timeout.
#pragma once

#include <cstdint>
#include <vector>

#include "caf/all.hpp"
#include "events/events.pb.h"
#include "events/status.hpp"

namespace weightd::actors {

// ------------------------------------------------------------------ atoms

using append_atom = caf::atom_constant<caf::atom("append")>;
using stats_atom = caf::atom_constant<caf::atom("stats")>;

// ------------------------------------------------------------- messages

/// Events to append as one atomic unit. The reply carries the same events as
/// committed: global_seq, stream_seq, writer_id and schema_version filled in,
/// ready to be folded with evolve() exactly as replay will fold them.
struct event_batch {
  std::vector<events::v1::Envelope> events;
};

/// Counters of the journal writer (metrics, tests, benchmarks).
struct journal_stats {
  uint64_t commits = 0;          // successful transactions
  uint64_t events = 0;           // events in them
  uint64_t appends = 0;          // append requests answered with success
  uint64_t failed_appends = 0;   // append requests answered with an error
  uint64_t highest_seq = 0;
  uint64_t last_commit_us = 0;   // duration of the last commit (fsync included)
  uint64_t total_commit_us = 0;
  std::vector<uint64_t> recent_batch_sizes;  // appends per commit, newest last (<= 1024)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, journal_stats& x) {
  return f(caf::meta::type_name("journal_stats"), x.commits, x.events, x.appends,
           x.failed_appends, x.highest_seq, x.last_commit_us, x.total_commit_us,
           x.recent_batch_sizes);
}

// ------------------------------------------------------------- interfaces

/// The journal writer: the only appender of the journal. Group commit: every
/// append that arrives while a transaction is in flight goes into the next
/// transaction; each appender is answered only after its commit returned.
using journal_actor = caf::typed_actor<
    // Appends the batch atomically (with whatever else is queued); replies with
    // the committed batch, or DURABILITY_FAILED / INVALID_ARGUMENT.
    caf::replies_to<append_atom, event_batch>::with<event_batch>,
    // Commits everything queued; the writer sends it to itself.
    caf::reacts_to<caf::flush_atom>,
    // Replies with the writer's counters.
    caf::replies_to<stats_atom>::with<journal_stats>>;

}  // namespace weightd::actors

// Protobuf messages have no inspect(): event batches are local-only messages.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::event_batch)
CAF_ERROR_CODE_ENUM(weightd::errc, "weightd")
