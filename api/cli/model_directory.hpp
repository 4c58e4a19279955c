// What `weightctl import` reads from a model directory and what `export` may
// write back: the walk that checks every entry before anything is uploaded,
// and the one rule for a safe relative path.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "events/status.hpp"

namespace weightd::api {

/// One file of a model directory as the manifest records it.
struct model_file {
  std::string path;              // relative to DIR, '/'-separated, as the user sees it
  std::filesystem::path source;  // what is read (a symlink is read through)
  uint64_t size = 0;
};

/// Every file under `dir`, in path order. A symlink is recorded under its
/// own path with its target's bytes. Any entry that cannot be read (a
/// dangling symlink, an unreadable directory or file, a name that is not
/// UTF-8, a socket or device) fails the whole walk naming the path and the
/// OS error, so that nothing is uploaded from a directory half read.
result<std::vector<model_file>> walk_model_directory(const std::filesystem::path& dir);

/// True when `path` is relative and none of its '/'-separated segments is
/// empty, "." or ".." (a ".." inside a segment, as in weights..v2.bin, is fine).
bool is_safe_relative_path(std::string_view path);

/// `name` with every byte that is not printable ASCII or part of valid UTF-8
/// written as \xHH, for error messages.
std::string escape_name(std::string_view name);

}  // namespace weightd::api
