// weightctl's commands that talk to a running daemon over gRPC.
#pragma once

#include <ostream>
#include <string>

#include "api/client.hpp"

namespace weightd::api {

struct online_options {
  client_options connection;
  bool json = false;
  std::string tenant = "default";
};

/// Uploads a model directory as a revision: every file as payload objects of
/// at most 64 MiB (one affinity unit per file), the manifest last, then
/// commit; on any failure the import is aborted and the uploads removed.
int import_dir(const online_options& o, const std::string& dir, const std::string& id,
               std::ostream& out, std::ostream& err);

/// Downloads a revision into `dir`, verifying every file's sha256; files are
/// written under a temporary name and renamed when complete.
int export_dir(const online_options& o, const std::string& id, const std::string& dir,
               std::ostream& out, std::ostream& err);

int list_revisions(const online_options& o, const std::string& ns, const std::string& resource,
                   bool all_states, std::ostream& out, std::ostream& err);
int show_revision(const online_options& o, const std::string& id, std::ostream& out,
                  std::ostream& err);
int remove_revision(const online_options& o, const std::string& id, std::ostream& out,
                    std::ostream& err);
int show_status(const online_options& o, std::ostream& out, std::ostream& err);

}  // namespace weightd::api
