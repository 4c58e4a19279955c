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

/// `weightctl upsert`: the import replaces a base revision (SPEC §4 upsert).
struct upsert_args {
  std::string base;         // the revision it replaces (without #generation: the highest READY)
  bool delete_first = false;  // --mode delete-first (default put-first)
  std::string request_id;   // names the claim ("" = a new one); again with --resume
  uint64_t generation = 0;  // the target's weight_generation (0 = the lineage's highest + 1)
  bool wait = false;        // until the base is deleted and the claim COMPLETED
};

/// What `weightctl import` is asked to do.
struct import_args {
  std::string dir;      // the model directory
  std::string id;       // [tenant:]ns/resource@revision[#generation]
  policy_args policy;   // empty: the daemon's default policy
  unsigned jobs = 4;    // uploads at once (--jobs, 1..64)
  bool resume = false;  // continue an IMPORTING revision of this id (--resume)
  bool quiet = false;   // no progress on stderr
  std::optional<upsert_args> upsert;  // set: `weightctl upsert` (no `id`: the base's lineage)
};

/// Uploads a model directory as a revision (SPEC §7): every entry checked
/// first (walk_model_directory), then every file as payload objects of at most
/// 64 MiB (one affinity unit per file, written to the tier the policy gives
/// it) by `jobs` uploads at once, the manifest last, then commit; on any
/// failure the import is aborted and the uploads removed. With `resume` an
/// IMPORTING revision of the id continues: payloads already stored with the
/// same size and bytes (the stored sha256, else the store's xxh3-64) are not sent again (one that differs stops the import,
/// which is left IMPORTING for `weightctl abort`); without one it is an
/// ordinary import. With `upsert` the revision is the base's next generation,
/// begun by BeginUpsert under a claim and committed by CommitUpsert (which
/// retires the base); a failure aborts the claim (AbortUpsert), and with
/// `resume` the same request id continues the claim's upload.
int import_dir(const online_options& o, const import_args& args, std::ostream& out,
               std::ostream& err);

/// What `weightctl export` is asked to do besides the id and directory.
struct export_args {
  bool quiet = false;  // no progress on stderr
  bool local = false;  // copy from the replica files (OpenLocal) instead of Get
};

/// Downloads a revision into `dir` under a lease, verifying every file's
/// sha256; files are written under a temporary name and renamed when
/// complete. A manifest naming an unsafe path (is_safe_relative_path) is
/// refused before anything is written.
int export_dir(const online_options& o, const std::string& id, const std::string& dir,
               const export_args& args, std::ostream& out, std::ostream& err);

}  // namespace weightd::api
