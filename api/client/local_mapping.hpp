// Local reads for the C++ client (SPEC §4 Local reads): a reader on the
// daemon's host maps a leased revision's replica files read-only instead of
// streaming their bytes over gRPC. The mappings stay valid while the lease
// lives: the daemon replaces a replica file only by publishing a new one and
// unlinking the old (a mapped file's pages outlive its name), and removes a
// revision only once its leases are gone.
#pragma once

#include <string_view>
#include <vector>

#include "api/client/client.hpp"

namespace weightd::api {

/// One replica file mapped PROT_READ (move-only; unmapped when destroyed).
class local_mapping {
 public:
  /// Maps `file.path` and checks that it holds file.offset + file.size bytes.
  static result<local_mapping> open(const v1::LocalFile& file);

  local_mapping(local_mapping&& other) noexcept;
  local_mapping& operator=(local_mapping&& other) noexcept;
  local_mapping(const local_mapping&) = delete;
  local_mapping& operator=(const local_mapping&) = delete;
  ~local_mapping();

  /// The object's bytes: file.size of them from file.offset.
  std::string_view bytes() const;
  const v1::LocalFile& file() const { return file_; }

 private:
  local_mapping() = default;
  v1::LocalFile file_;
  void* base_ = nullptr;  // the whole file's mapping (null for an empty object)
  size_t length_ = 0;
};

/// A revision's objects, mapped: payloads in the revision's key order.
struct local_revision {
  events::v1::RevisionId id;  // with its weight generation
  std::vector<local_mapping> payloads;
  std::vector<local_mapping> manifest;  // one mapping (a vector: mappings have no default)
};

/// OpenLocal under `lease_id`, then maps every file. The caller keeps the
/// lease alive (renews it) while it reads from the mappings.
result<local_revision> map_local(client& c, const v1::OpenLocalRequest& req);

}  // namespace weightd::api
