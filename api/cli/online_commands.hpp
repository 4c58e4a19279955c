// weightctl's commands that talk to a running daemon over gRPC.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "api/client/client.hpp"

namespace weightd::api {

struct online_options {
  client_options connection;
  bool json = false;
  std::string tenant = "default";
};


/// One table (or one JSON list) of the revisions of `ns`, or of every
/// namespace of the tenant with all_namespaces.
int list_revisions(const online_options& o, const std::string& ns, const std::string& resource,
                   bool all_states, bool all_namespaces, std::ostream& out, std::ostream& err);
int show_revision(const online_options& o, const std::string& id, std::ostream& out,
                  std::ostream& err);
/// `history --address`: the revision's timeline through History, printed
/// as the offline form prints it from the journal files.
int online_history(const online_options& o, const std::string& id, std::ostream& out,
                   std::ostream& err);
/// Removes a READY revision; drain_timeout_ms > 0 waits for its leases to
/// drain (revoking them at the deadline) instead of failing with BUSY.
int remove_revision(const online_options& o, const std::string& id, uint64_t drain_timeout_ms,
                    std::ostream& out, std::ostream& err);

struct policy_args {
  std::string preferred;  // HOT, COLD, MIXED ("" = keep)
  double mixed_hot_ratio = 0;  // 0 = keep
  std::string mode;       // AUTO, MANUAL, PINNED ("" = keep)
};
/// UpdatePolicy: changes the named parts of the revision's policy.
int update_policy(const online_options& o, const std::string& id, const policy_args& a,
                  std::ostream& out, std::ostream& err);

/// GetLineage: the watermark and the newest upsert claim with its phase; with
/// `abort_request_id`, AbortUpsert of that claim first.
int show_lineage(const online_options& o, const std::string& id,
                 const std::string& abort_request_id, std::ostream& out, std::ostream& err);

/// AbortImport of an IMPORTING revision, also removing `keys`.
int abort_import(const online_options& o, const std::string& id,
                 const std::vector<std::string>& keys, std::ostream& out, std::ostream& err);
int show_status(const online_options& o, std::ostream& out, std::ostream& err);

/// `weightctl admin promote [--force]` (SPEC §11): the standby at --address
/// becomes the leader; waits until it serves as one and prints its epoch.
int promote_standby(const online_options& o, bool force, std::ostream& out, std::ostream& err);

}  // namespace weightd::api
