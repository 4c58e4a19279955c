// `weightctl journal ...`: offline, read-only inspection of a journal's LMDB
// files. Safe while a daemon writes them (LMDB readers never block writers).
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

#include "events/identity.hpp"
#include "persistence/journal_backend.hpp"

namespace weightd::api {

struct journal_location {
  std::string data_dir = "./var";
  std::string journal_dir;  // default: <data_dir>/journal
  std::string path() const { return journal_dir.empty() ? data_dir + "/journal" : journal_dir; }
};

struct dump_args {
  uint64_t from = 1;
  uint64_t to = persistence::kMaxSeq;
  uint64_t limit = persistence::kMaxSeq;
  std::string stream;  // only this stream
  std::string type;    // only this event type, e.g. "object_put"
  bool json = false;   // one JSON object per line
  std::string file;    // read this diverged-<epoch>.ndjson instead of the journal
};

struct stats_args {
  bool json = false;
};

struct replay_args {
  std::string until;  // a seq, or a UTC time 2026-12-02T10:34:20[.123]Z; "" = everything
  bool json = false;
};

struct verify_args {
  bool json = false;
};

struct history_args {
  std::string id;  // [tenant:]ns/resource@revision[#generation]
  bool json = false;
};

/// Each returns the process exit code and prints errors to `err`.
int journal_dump(const journal_location& where, const dump_args& args, std::ostream& out,
                 std::ostream& err);
int journal_stats(const journal_location& where, const stats_args& args, std::ostream& out,
                  std::ostream& err);

/// The state as it was at a seq or time: the same fold the daemon runs.
int journal_replay(const journal_location& where, const replay_args& args, std::ostream& out,
                   std::ostream& err);

/// Folds every event (no snapshot), checks every invariant, checks each
/// snapshot against the fold at its seq; reports the first violation.
int journal_verify(const journal_location& where, const verify_args& args, std::ostream& out,
                   std::ostream& err);

/// One revision's timeline: seq, time, event, generation after it, the lease
/// or operation it concerns, principal, request id.
int revision_history(const journal_location& where, const history_args& args, std::ostream& out,
                     std::ostream& err);

/// Reads a revision's events in order, calling the function for each.
using history_source =
    std::function<status(const std::function<void(const events::v1::Envelope&)>&)>;
/// The timeline printer both forms share (offline from the journal files,
/// online through History): the same columns, the same fold.
int print_history(const events::revision_key& id, const history_source& read, bool json,
                  std::ostream& out, std::ostream& err);

/// "123" -> seq 123; "2026-12-02T10:34:20.123Z" -> a time. Errors name --until.
struct point_in_history {
  uint64_t seq = persistence::kMaxSeq;
  int64_t ms = persistence::kMaxTime;
};
result<point_in_history> parse_until(const std::string& text);

}  // namespace weightd::api
