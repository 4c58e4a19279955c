// What every online weightctl command shares: error reporting with exit
// codes, JSON output, resolving "ns/resource@revision" to a generation.
#pragma once

#include <chrono>
#include <ostream>
#include <string>

#include <google/protobuf/message.h>

#include "api/client/client.hpp"
#include "events/identity.hpp"

namespace weightd::api {

/// Prints "weightctl: CODE: message[; next]" in weightctl's words (cli_words.hpp)
/// and returns the exit code of the class; a daemon that cannot be reached is
/// "weightctl: daemon unreachable at ADDRESS ..." and kExitDaemonUnreachable.
int fail(std::ostream& err, const status& st, const std::string& next = "");

/// The address weightctl talks to, for fail()'s "daemon unreachable" message.
void name_daemon_address(const std::string& address);

/// True for the client's status of a daemon that did not answer at all (no
/// weightd error code: nothing listens, or no answer before the deadline).
bool is_daemon_unreachable(const status& st);

/// The message as JSON (json_output.hpp's rules): one line, or indented when pretty.
std::string to_json(const google::protobuf::Message& m, bool pretty = false);

/// "ns/resource@revision" without #generation -> the highest generation among
/// READY/DEGRADED revisions (every state unless ready_only); 0 if none.
result<events::revision_key> resolve(client& c, const std::string& text, bool ready_only);

/// The tenant of ids that name none (`ns/resource@revision`): --tenant, or the
/// credential's with a token; "default" unless set.
void set_id_tenant(const std::string& tenant);
/// parse_canonical_text with that tenant for ids that name none.
result<events::revision_key> parse_id(const std::string& text);

/// A revision as the daemon has it now: its id resolved, its current view
/// (the generation a mutation must name).
struct current_revision {
  events::revision_key id;
  v1::RevisionView view;
};
/// resolve() + GetRevision; hidden states too unless ready_only. Without
/// #generation and no such revision: NOT_FOUND naming it.
result<current_revision> read_revision(client& c, const std::string& text, bool ready_only);

/// The enum value a user typed ("cold", "HOT") with the proto's prefix
/// ("RESIDENCY_"); -1 when it names none.
int parse_enum_name(const std::string& text, const std::string& prefix,
                    const google::protobuf::EnumDescriptor* descriptor);

/// --preferred/--to as a residency: HOT, COLD or MIXED, else INVALID_ARGUMENT naming `flag`.
result<events::v1::Residency> parse_residency(const std::string& text, const std::string& flag);

}  // namespace weightd::api
