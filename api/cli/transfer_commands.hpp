// weightctl import and export: a model directory to a revision and back.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <optional>
#include <ostream>
#include <string>

#include "api/cli/online_commands.hpp"

namespace weightd::api {

/// Adds `import` and `export` to weightctl. After parsing, the returned
/// function runs the one given and returns its exit code (nullopt when the
/// command line named neither). `online` is read when it runs.
std::function<std::optional<int>()> add_transfer_commands(CLI::App& app,
                                                          const online_options& online);

/// Uploads a model directory as a revision: every file as payload objects of
/// at most 64 MiB (one affinity unit per file, written to the tier the
/// policy gives it), the manifest last, then commit; on any failure the
/// import is aborted and the uploads removed. `policy` empty = the daemon's
/// default policy.
int import_dir(const online_options& o, const std::string& dir, const std::string& id,
               const policy_args& policy, std::ostream& out, std::ostream& err);

/// Downloads a revision into `dir`, verifying every file's sha256; files are
/// written under a temporary name and renamed when complete.
int export_dir(const online_options& o, const std::string& id, const std::string& dir,
               std::ostream& out, std::ostream& err);

}  // namespace weightd::api
