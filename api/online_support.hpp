// What every online weightctl command shares: error reporting with exit
// codes, JSON output, resolving "ns/resource@revision" to a generation, and
// the progress line of transfers.
#pragma once

#include <chrono>
#include <ostream>
#include <string>

#include <google/protobuf/message.h>

#include "api/client.hpp"
#include "events/identity.hpp"

namespace weightd::api {

/// Prints "weightctl: CODE: message[; next]" and returns the exit code of the class.
int fail(std::ostream& err, const status& st, const std::string& next = "");

/// The message as JSON with the proto field names.
std::string to_json(const google::protobuf::Message& m, bool pretty = false);

/// "ns/resource@revision" without #generation -> the highest generation among
/// READY/DEGRADED revisions (every state unless ready_only); 0 if none.
result<events::revision_key> resolve(client& c, const std::string& text, bool ready_only);

/// A revision as the daemon has it now: its id resolved, its current view
/// (the generation a mutation must name).
struct current_revision {
  events::revision_key id;
  v1::RevisionView view;
};
/// resolve() + GetRevision; hidden states too unless ready_only.
result<current_revision> read_revision(client& c, const std::string& text, bool ready_only);

/// The enum value a user typed ("cold", "HOT") with the proto's prefix
/// ("RESIDENCY_"); -1 when it names none.
int parse_enum_name(const std::string& text, const std::string& prefix,
                    const google::protobuf::EnumDescriptor* descriptor);

/// --preferred/--to as a residency: HOT, COLD or MIXED, else INVALID_ARGUMENT naming `flag`.
result<events::v1::Residency> parse_residency(const std::string& text, const std::string& flag);

/// Progress on stderr when it is a terminal: bytes, rate, ETA.
struct progress_line {
  uint64_t total;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  bool tty;
  explicit progress_line(uint64_t total_bytes);
  void show(uint64_t done, const std::string& what);
  void end();
};

}  // namespace weightd::api
