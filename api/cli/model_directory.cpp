// The walk of a model directory for `weightctl import` (SPEC §7).
#include "api/cli/model_directory.hpp"

#include <fcntl.h>
#include <spdlog/fmt/fmt.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace weightd::api {

namespace fs = std::filesystem;

namespace {

// Length of the valid UTF-8 sequence starting at s[i], 0 when it is not one
// (overlong forms, surrogates and code points past U+10FFFF included).
size_t utf8_sequence(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
  if (n == 0 || c > 0xF4 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((b(i + k) & 0xC0) != 0x80) return 0;
  if (c == 0xE0 && b(i + 1) < 0xA0) return 0;  // overlong
  if (c == 0xED && b(i + 1) >= 0xA0) return 0;  // surrogate
  if (c == 0xF0 && b(i + 1) < 0x90) return 0;  // overlong
  if (c == 0xF4 && b(i + 1) >= 0x90) return 0;  // past U+10FFFF
  return n;
}

bool is_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_sequence(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

status os_error(const std::string& what, const std::string& path, int error) {
  return {errc::invalid_argument,
          fmt::format("cannot import: {} '{}': {}", what, escape_name(path), std::strerror(error))};
}

// Walks `abs` (shown to the user as `rel`) depth first into `out`.
status walk(const fs::path& abs, const std::string& rel, std::vector<model_file>& out) {
  std::error_code ec;
  fs::directory_iterator it(abs, ec);
  if (ec) return os_error("cannot read directory", abs.string(), ec.value());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    const auto& entry = it->path();
    std::string name = entry.filename().string();
    std::string path = rel.empty() ? name : rel + "/" + name;
    if (!is_utf8(name))
      return {errc::invalid_argument,
              fmt::format("cannot import '{}': the file name is not UTF-8 (the bytes shown as \\xHH); "
                          "rename it",
                          escape_name(entry.string()))};
    struct stat link {};
    if (lstat(entry.c_str(), &link) != 0) return os_error("cannot stat", entry.string(), errno);
    struct stat target = link;
    if (S_ISLNK(link.st_mode) && stat(entry.c_str(), &target) != 0)
      return os_error("dangling symlink", entry.string(), errno);
    if (S_ISDIR(target.st_mode)) {
      if (S_ISLNK(link.st_mode))
        return {errc::invalid_argument,
                fmt::format("cannot import '{}': a symlink to a directory is not followed; "
                            "link the files instead",
                            escape_name(entry.string()))};
      if (auto st = walk(entry, path, out); !st.ok()) return st;
      continue;
    }
    if (!S_ISREG(target.st_mode))
      return {errc::invalid_argument,
              fmt::format("cannot import '{}': not a regular file, directory or symlink to a file",
                          escape_name(entry.string()))};
    int fd = ::open(entry.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return os_error("cannot open", entry.string(), errno);
    ::close(fd);
    out.push_back({path, entry, static_cast<uint64_t>(target.st_size)});
  }
  if (ec) return os_error("cannot read directory", abs.string(), ec.value());
  return {};
}

}  // namespace

result<std::vector<model_file>> walk_model_directory(const fs::path& dir) {
  std::vector<model_file> files;
  if (auto st = walk(dir, "", files); !st.ok()) return st;
  std::sort(files.begin(), files.end(),
            [](const model_file& a, const model_file& b) { return a.path < b.path; });
  return files;
}

bool is_safe_relative_path(std::string_view path) {
  if (path.empty()) return false;
  size_t start = 0;
  while (true) {
    size_t slash = path.find('/', start);
    auto segment = path.substr(start, slash == std::string_view::npos ? path.npos : slash - start);
    if (segment.empty() || segment == "." || segment == "..") return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

std::string escape_name(std::string_view name) {
  std::string out;
  for (size_t i = 0; i < name.size();) {
    size_t n = utf8_sequence(name, i);
    auto c = static_cast<unsigned char>(name[i]);
    if (n > 1 || (n == 1 && c >= 0x20 && c != 0x7F)) {
      out.append(name.substr(i, n));
      i += n;
    } else {
      out += fmt::format("\\x{:02X}", c);
      ++i;
    }
  }
  return out;
}

}  // namespace weightd::api
