// `weightctl watch`: follows the journal live (SPEC §4 Watch), one line per
// event or NDJSON, and carries on by itself across daemon restarts.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "api/cli/online_commands.hpp"

namespace weightd::api {

struct watch_args {
  uint64_t from = 0;               // first seq to print (0 = events committed from now on)
  std::string stream;              // only streams starting with this
  std::vector<std::string> types;  // only these event types (none = all)
  uint64_t count = 0;              // stop after this many events (0 = never)
};

/// Prints events from args.from in order. When the stream breaks (the daemon
/// restarts, or cut this watcher for stalling) it reconnects from the seq
/// after the last one printed — no gap, no duplicate. Other errors end it.
int watch_events(const online_options& o, const watch_args& args, std::ostream& out,
                 std::ostream& err);

}  // namespace weightd::api
