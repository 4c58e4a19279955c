// Tier storage: the bytes of object replicas, one file per replica.
//
// Layout of a tier directory (HOT: tmpfs such as /dev/shm/weightd-<port>;
// COLD: durable storage such as <data>/cold):
//
//   objects/<hh>/<h>   the replica of (tenant, key); h = hex(sha256(LP(tenant) ‖
//                      LP(key))), hh its first two characters. Keys may hold any
//                      bytes (also '/', '..', NUL): the name is a hash, so no key
//                      can escape the directory or collide with another.
//   tmp/<name>         a put or copy in progress; renamed into objects/ when
//                      published, removed when abandoned, cleared at startup.
//
// A COLD replica is readable only after its file and directory were fsynced
// (publish()). The object index (the journal) is the truth about which
// replicas exist; files it does not know are orphans and are deleted at startup.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "events/events.pb.h"
#include "events/state.hpp"
#include "events/status.hpp"

namespace weightd::persistence {

struct tier_options {
  events::v1::Tier tier = events::v1::TIER_HOT;
  std::filesystem::path dir;
  uint64_t capacity_bytes = 0;  // 0 = no limit but the filesystem's
  bool durable = false;         // fsync files and directories before publishing (COLD)
  /// Test hook: writes fail with ENOSPC once a file would pass this many bytes.
  uint64_t inject_enospc_after_bytes = 0;
};

/// What a blob writer measured: the bytes as they arrived.
struct blob_digest {
  uint64_t size = 0;
  std::string xxh3;    // 16 lowercase hex digits
  std::string sha256;  // 64 lowercase hex digits, or "" when not asked for
};

/// Streams bytes into a new (or freshly allocated, still empty) file, computing xxh3-64 (and sha256 when asked)
/// as they arrive. The file is closed but not fsynced by finish(): publishing
/// does that. Destroying an unfinished writer leaves the file for the caller
/// to remove (the store reclaims abandoned temp files).
class blob_writer {
 public:
  static result<std::unique_ptr<blob_writer>> create(const std::filesystem::path& path,
                                                     bool want_sha256,
                                                     uint64_t enospc_after_bytes = 0);
  ~blob_writer();
  blob_writer(const blob_writer&) = delete;
  blob_writer& operator=(const blob_writer&) = delete;

  /// Appends bytes; a full filesystem is NO_AVAILABLE_SPACE.
  status write(const void* data, size_t size);
  /// Closes the file and returns what was written.
  result<blob_digest> finish();

  struct hashing;  // xxh3 (+ sha256) state; shared with digest_file()

 private:
  blob_writer(int fd, std::filesystem::path path, std::unique_ptr<hashing> h, uint64_t limit);
  int fd_;
  std::filesystem::path path_;
  std::unique_ptr<hashing> hashing_;
  uint64_t written_ = 0;
  uint64_t enospc_after_ = 0;
};

/// How a replica file compares with what the index says.
enum class replica_check { ok, missing, wrong_size, wrong_checksum };

class tier_store {
 public:
  explicit tier_store(tier_options options) : options_(std::move(options)) {}

  /// Creates objects/ and tmp/ (and fsyncs them when durable).
  status init() const;
  const tier_options& options() const { return options_; }
  events::v1::Tier tier() const { return options_.tier; }

  std::filesystem::path object_path(const events::object_ref& ref) const;
  std::filesystem::path temp_path(const std::string& name) const;

  /// Creates the temp file `temp` of a put and has the filesystem set `bytes`
  /// aside for it, so that a full filesystem shows here, before any byte is
  /// streamed, as NO_AVAILABLE_SPACE (a filesystem without fallocate just
  /// gets the file). A file that cannot be allocated is removed.
  status allocate(const std::filesystem::path& temp, uint64_t bytes) const;

  /// Makes a finished temp file the replica of `ref`: fsync the file (when
  /// durable), rename it into objects/, fsync the directory (when durable).
  status publish(const std::filesystem::path& temp, const events::object_ref& ref) const;

  /// Removes the replica file of `ref`; a missing file is fine.
  status remove(const events::object_ref& ref) const;

  /// Removes any file (a temp file); a missing file is fine.
  static void remove_file(const std::filesystem::path& path);

  /// Copies `ref`'s replica from `source` into temp file `temp_name` of this
  /// tier, then publishes it. Returns the digest of what was copied.
  result<blob_digest> copy_from(const tier_store& source, const events::object_ref& ref,
                                const std::string& temp_name, bool want_sha256) const;

  /// Checks the replica of `ref` against the expected size and (when
  /// `checksums`) its xxh3.
  replica_check verify(const events::object_ref& ref, uint64_t size, const std::string& xxh3,
                       bool checksums) const;

  /// Every file under objects/ and tmp/ (for orphan collection at startup).
  std::vector<std::filesystem::path> list_files() const;

 private:
  tier_options options_;
};

/// Computes the digest of an existing file (for tests and verification).
result<blob_digest> digest_file(const std::filesystem::path& path, bool want_sha256);

/// Lowercase hex of xxh3-64(data) (sha256: events/digest.hpp).
std::string xxh3_hex(std::string_view data);

}  // namespace weightd::persistence
