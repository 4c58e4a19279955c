#include "persistence/tier_store.hpp"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "events/digest.hpp"

namespace weightd::persistence {

namespace {

constexpr size_t kCopyChunk = 4u << 20;

/// A read buffer for `fd`'s file: the file's size (4 KiB to kCopyChunk),
/// left uninitialized. The start-up check reads every replica, and a zeroed
/// 4 MiB buffer for each of 200 000 tiny ones was most of a restart's time.
struct read_buffer {
  explicit read_buffer(int fd) {
    struct stat st;
    uint64_t want = ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : kCopyChunk;
    size = static_cast<size_t>(std::clamp<uint64_t>(want, 4096, kCopyChunk));
    bytes.reset(new char[size]);
  }
  std::unique_ptr<char[]> bytes;
  size_t size = 0;
};

std::string hex64(uint64_t value) {
  unsigned char bytes[8];
  for (int i = 7; i >= 0; --i, value >>= 8) bytes[i] = static_cast<unsigned char>(value);
  return events::to_hex(bytes, 8);
}

std::string lp(const std::string& x) { return std::to_string(x.size()) + ":" + x + "\n"; }

status io_error(const std::string& what, const std::filesystem::path& path, int err) {
  if (err == ENOSPC || err == EFBIG || err == EDQUOT)
    return {errc::no_available_space,
            what + " " + path.string() + ": " + std::strerror(err) +
                "; free space in the tier or lower its configured capacity"};
  return {errc::internal, what + " " + path.string() + ": " + std::strerror(err)};
}

status fsync_path(const std::filesystem::path& path, bool directory) {
  int fd = ::open(path.c_str(), (directory ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open for fsync", path, errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  return rc == 0 ? status{} : io_error("fsync failed for", path, err);
}

}  // namespace

// ------------------------------------------------------------------ hashing

struct blob_writer::hashing {
  XXH3_state_t xxh;
  std::unique_ptr<events::sha256_stream> sha;
  explicit hashing(bool want_sha256) {
    XXH3_64bits_reset(&xxh);
    if (want_sha256) sha = std::make_unique<events::sha256_stream>();
  }
  void update(const void* data, size_t n) {
    XXH3_64bits_update(&xxh, data, n);
    if (sha) sha->update(data, n);
  }
  blob_digest digest(uint64_t size) {
    blob_digest d;
    d.size = size;
    d.xxh3 = hex64(XXH3_64bits_digest(&xxh));
    if (sha) d.sha256 = sha->hex();
    return d;
  }
};

std::string xxh3_hex(std::string_view data) { return hex64(XXH3_64bits(data.data(), data.size())); }

// ------------------------------------------------------------- blob writer

blob_writer::blob_writer(int fd, std::filesystem::path path, std::unique_ptr<hashing> h,
                         uint64_t limit)
    : fd_(fd), path_(std::move(path)), hashing_(std::move(h)), enospc_after_(limit) {}

blob_writer::~blob_writer() {
  if (fd_ >= 0) ::close(fd_);
}

result<std::unique_ptr<blob_writer>> blob_writer::create(const std::filesystem::path& path,
                                                         bool want_sha256,
                                                         uint64_t enospc_after_bytes) {
  // No O_EXCL: a put's temp file exists already (tier_store::allocate); no
  // O_TRUNC either, which would give the allocated blocks back.
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("cannot create", path, errno);
  return std::unique_ptr<blob_writer>(new blob_writer(
      fd, path, std::make_unique<hashing>(want_sha256), enospc_after_bytes));
}

status blob_writer::write(const void* data, size_t size) {
  if (fd_ < 0) return {errc::internal, "write after finish to " + path_.string()};
  if (enospc_after_ && written_ + size > enospc_after_) return io_error("cannot write", path_, ENOSPC);
  const char* p = static_cast<const char*>(data);
  for (size_t left = size; left > 0;) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error("cannot write", path_, errno);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  hashing_->update(data, size);
  written_ += size;
  return {};
}

result<blob_digest> blob_writer::finish() {
  if (fd_ < 0) return status{errc::internal, "finish called twice for " + path_.string()};
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) return io_error("cannot close", path_, errno);
  return hashing_->digest(written_);
}

// -------------------------------------------------------------- tier store

status tier_store::init() const {
  std::error_code ec;
  for (const char* sub : {"objects", "tmp"}) {
    std::filesystem::create_directories(options_.dir / sub, ec);
    if (ec)
      return {errc::internal, "cannot create the tier directory " + (options_.dir / sub).string() +
                                  ": " + ec.message() + "; check the path and permissions"};
  }
  if (options_.durable)
    for (const auto& d : {options_.dir, options_.dir / "objects", options_.dir / "tmp"})
      if (auto st = fsync_path(d, true); !st.ok()) return st;
  return {};
}

std::filesystem::path tier_store::object_path(const events::object_ref& ref) const {
  auto h = events::sha256_hex(lp(ref.tenant) + lp(ref.key));
  return options_.dir / "objects" / h.substr(0, 2) / h;
}

std::filesystem::path tier_store::temp_path(const std::string& name) const {
  return options_.dir / "tmp" / name;
}

status tier_store::allocate(const std::filesystem::path& temp, uint64_t bytes) const {
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("cannot create", temp, errno);
  int rc = bytes == 0 ? 0 : ::fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(bytes));
  int err = errno;
  ::close(fd);
  if (rc == 0 || err == EOPNOTSUPP || err == ENOSYS) return {};
  remove_file(temp);
  return io_error("cannot allocate " + std::to_string(bytes) + " bytes for", temp, err);
}

status tier_store::publish(const std::filesystem::path& temp,
                           const events::object_ref& ref) const {
  auto target = object_path(ref);
  std::error_code ec;
  bool new_shard = !std::filesystem::exists(target.parent_path(), ec);
  if (new_shard) {
    std::filesystem::create_directories(target.parent_path(), ec);
    if (ec) return io_error("cannot create", target.parent_path(), ec.value());
  }
  // Replicas are read-only (SPEC §4 Local reads): a reader that maps them
  // cannot change them by mistake; nothing writes a published replica again.
  if (::chmod(temp.c_str(), 0440) != 0) return io_error("cannot make read-only", temp, errno);
  if (options_.durable)
    if (auto st = fsync_path(temp, false); !st.ok()) return st;
  if (::rename(temp.c_str(), target.c_str()) != 0)
    return io_error("cannot rename into place", target, errno);
  if (options_.durable) {
    if (auto st = fsync_path(target.parent_path(), true); !st.ok()) return st;
    if (new_shard)
      if (auto st = fsync_path(options_.dir / "objects", true); !st.ok()) return st;
  }
  return {};
}

status tier_store::remove(const events::object_ref& ref) const {
  auto path = object_path(ref);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return io_error("cannot remove", path, errno);
  return {};
}

void tier_store::remove_file(const std::filesystem::path& path) { ::unlink(path.c_str()); }

result<blob_digest> tier_store::copy_from(const tier_store& source, const events::object_ref& ref,
                                          const std::string& temp_name, bool want_sha256) const {
  auto from = source.object_path(ref);
  int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return io_error("cannot open the source replica", from, errno);
  auto temp = temp_path(temp_name);
  auto writer = blob_writer::create(temp, want_sha256, options_.inject_enospc_after_bytes);
  if (!writer) {
    ::close(in);
    return writer.error();
  }
  read_buffer buf(in);
  status failure;
  for (;;) {
    ssize_t n = ::read(in, buf.bytes.get(), buf.size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) failure = io_error("cannot read", from, errno);
    if (n <= 0) break;
    if (failure = (*writer)->write(buf.bytes.get(), static_cast<size_t>(n)); !failure.ok()) break;
  }
  ::close(in);
  auto digest = failure.ok() ? (*writer)->finish() : result<blob_digest>{failure};
  if (digest.ok()) {
    if (auto st = publish(temp, ref); !st.ok()) digest = st;
  }
  if (!digest.ok()) remove_file(temp);
  return digest;
}

replica_check tier_store::verify(const events::object_ref& ref, uint64_t size,
                                 const std::string& xxh3, bool checksums) const {
  auto path = object_path(ref);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return replica_check::missing;
  if (static_cast<uint64_t>(st.st_size) != size) return replica_check::wrong_size;
  if (!checksums) return replica_check::ok;
  auto digest = digest_file(path, false);
  if (!digest || digest->xxh3 != xxh3) return replica_check::wrong_checksum;
  return replica_check::ok;
}

std::vector<std::filesystem::path> tier_store::list_files() const {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (const char* sub : {"objects", "tmp"}) {
    std::filesystem::recursive_directory_iterator it(options_.dir / sub, ec), end;
    for (; !ec && it != end; it.increment(ec))
      if (it->is_regular_file(ec)) out.push_back(it->path());
  }
  return out;
}

result<blob_digest> digest_file(const std::filesystem::path& path, bool want_sha256) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open", path, errno);
  blob_writer::hashing h{want_sha256};
  read_buffer buf(fd);
  uint64_t size = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf.bytes.get(), buf.size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return io_error("cannot read", path, err);
    }
    if (n == 0) break;
    h.update(buf.bytes.get(), static_cast<size_t>(n));
    size += static_cast<uint64_t>(n);
  }
  ::close(fd);
  return h.digest(size);
}

}  // namespace weightd::persistence
