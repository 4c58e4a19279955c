#include "api/client/local_mapping.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace weightd::api {

result<local_mapping> local_mapping::open(const v1::LocalFile& file) {
  local_mapping m;
  m.file_ = file;
  int fd = ::open(file.path().c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return status{errc::not_found, "cannot open " + file.path() + " for " + file.key() + ": " +
                                       std::strerror(errno)};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return status{errc::internal, "cannot stat " + file.path() + ": " + std::strerror(e)};
  }
  uint64_t end = file.offset() + file.size();
  if (end < file.offset() || static_cast<uint64_t>(st.st_size) < end) {
    ::close(fd);
    return status{errc::data_loss, file.path() + " holds " + std::to_string(st.st_size) +
                                       " B, fewer than the " + std::to_string(end) + " of " +
                                       file.key()};
  }
  if (end > 0) {
    void* base = ::mmap(nullptr, end, PROT_READ, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return status{errc::internal, "cannot map " + file.path() + ": " + std::strerror(e)};
    }
    m.base_ = base;
    m.length_ = end;
  }
  ::close(fd);  // the mapping keeps the file
  return m;
}

local_mapping::local_mapping(local_mapping&& other) noexcept { *this = std::move(other); }

local_mapping& local_mapping::operator=(local_mapping&& other) noexcept {
  if (this != &other) {
    if (base_) ::munmap(base_, length_);
    file_ = std::move(other.file_);
    base_ = other.base_;
    length_ = other.length_;
    other.base_ = nullptr;
    other.length_ = 0;
  }
  return *this;
}

local_mapping::~local_mapping() {
  if (base_) ::munmap(base_, length_);
}

std::string_view local_mapping::bytes() const {
  if (!base_) return {};
  return {static_cast<const char*>(base_) + file_.offset(), static_cast<size_t>(file_.size())};
}

result<local_revision> map_local(client& c, const v1::OpenLocalRequest& req) {
  auto listing = c.open_local(req);
  if (!listing) return listing.error();
  local_revision r;
  r.id = listing->id();
  for (const auto& f : listing->payloads()) {
    auto m = local_mapping::open(f);
    if (!m) return m.error();
    r.payloads.push_back(std::move(*m));
  }
  auto manifest = local_mapping::open(listing->manifest());
  if (!manifest) return manifest.error();
  r.manifest.push_back(std::move(*manifest));
  return r;
}

}  // namespace weightd::api
