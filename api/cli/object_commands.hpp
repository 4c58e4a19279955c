// weightctl obj: the generic object key space (SPEC §2) from the shell.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "api/cli/online_commands.hpp"

namespace weightd::api {

struct obj_put_args {
  std::string key, file;
  std::string tier = "HOT";        // HOT or COLD
  std::string type = "GENERAL";    // GENERAL, WEIGHT or METADATA
  bool pin = false;
};

/// Uploads a file as one object (its xxh3 is verified by the server).
int obj_put(const online_options& o, const obj_put_args& a, std::ostream& out, std::ostream& err);
/// Downloads an object into FILE ("-" = stdout).
int obj_get(const online_options& o, const std::string& key, const std::string& file,
            std::ostream& out, std::ostream& err);
/// Removes objects (MANAGED_OBJECT for a revision's members; --force passes read leases).
int obj_rm(const online_options& o, const std::vector<std::string>& keys, bool force,
           std::ostream& out, std::ostream& err);
/// Lists objects under a prefix, page by page.
int obj_ls(const online_options& o, const std::string& prefix, std::ostream& out,
           std::ostream& err);

}  // namespace weightd::api
