// weightctl's residency commands: migrate, op show|cancel|ls, reconcile.
#pragma once

#include <ostream>
#include <string>

#include "api/cli/online_commands.hpp"

namespace weightd::api {

struct migrate_args {
  std::string to;      // HOT, COLD or MIXED
  double ratio = 0;    // MIXED: the share of bytes kept HOT (0 = the policy's)
  bool wait = false;   // follow the operation to its end (progress on stderr)
};

/// Migrate: starts (or joins) the operation moving the revision; with --wait
/// follows it with GetOperation until it ends (exit 0 only when COMPLETED).
int migrate_revision(const online_options& o, const std::string& id, const migrate_args& a,
                     std::ostream& out, std::ostream& err);

/// GetOperation: one operation, terminal ones too.
int show_operation(const online_options& o, uint64_t operation_id, std::ostream& out,
                   std::ostream& err);

/// CancelOperation: the operation ends at its next unit boundary.
int cancel_operation(const online_options& o, uint64_t operation_id, std::ostream& out,
                     std::ostream& err);

/// The running operations of the namespace's revisions (from ListRevisions).
int list_operations(const online_options& o, const std::string& ns, std::ostream& out,
                    std::ostream& err);

/// Reconcile: a round now, or with dry_run the next round's decisions and why.
int reconcile(const online_options& o, bool dry_run, std::ostream& out, std::ostream& err);

}  // namespace weightd::api
