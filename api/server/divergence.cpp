#include "api/server/divergence.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "api/common/json_output.hpp"

namespace weightd::api {

namespace {

status os_error(const std::string& what, const std::filesystem::path& path) {
  return {errc::internal, what + " " + path.string() + ": " + std::strerror(errno) +
                              "; free space or fix permissions in the data directory"};
}

/// Writes all of `bytes` to `fd`.
bool write_all(int fd, const std::string& bytes) {
  for (size_t done = 0; done < bytes.size();) {
    auto n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

bool fsync_path(const std::filesystem::path& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

std::filesystem::path diverged_file(const std::filesystem::path& data_dir,
                                    const v1::Divergence& divergence) {
  return data_dir / ("diverged-" + std::to_string(divergence.epoch()) + ".ndjson");
}

result<uint64_t> set_aside_diverged(persistence::journal_backend& journal,
                                    const v1::Divergence& divergence,
                                    const std::filesystem::path& data_dir) {
  auto file = diverged_file(data_dir, divergence);
  auto partial = file;
  partial += ".partial";
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return os_error("cannot create", partial);
  uint64_t count = 0;
  bool written = true;
  std::string lines;
  auto st = journal.read({divergence.last_common_seq() + 1, persistence::kMaxSeq,
                          persistence::kMaxSeq},
                         [&](const events::v1::Envelope& e) {
                           lines += json_line(message_json(e));
                           lines += '\n';
                           ++count;
                           if (lines.size() >= (1u << 20)) {
                             written = write_all(fd, lines);
                             lines.clear();
                           }
                           return written;
                         });
  written = written && write_all(fd, lines) && ::fsync(fd) == 0;
  ::close(fd);
  if (!written || !st.ok() || ::rename(partial.c_str(), file.c_str()) != 0) {
    auto failed = st.ok() ? os_error(written ? "cannot rename" : "cannot write", partial) : st;
    ::unlink(partial.c_str());
    return failed;
  }
  if (!fsync_path(data_dir, O_RDONLY | O_DIRECTORY)) return os_error("cannot fsync", data_dir);
  if (auto cut = journal.truncate_after(divergence.last_common_seq()); !cut.ok()) return cut;
  return count;
}

}  // namespace weightd::api
