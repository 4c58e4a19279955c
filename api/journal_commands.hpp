// `weightctl journal ...`: offline, read-only inspection of a journal's LMDB
// files. Safe while a daemon writes them (LMDB readers never block writers).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

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
};

struct stats_args {
  bool json = false;
};

/// Each returns the process exit code and prints errors to `err`.
int journal_dump(const journal_location& where, const dump_args& args, std::ostream& out,
                 std::ostream& err);
int journal_stats(const journal_location& where, const stats_args& args, std::ostream& out,
                  std::ostream& err);

}  // namespace weightd::api
