// Helpers shared by the test suites: temporary directories, journal backends
// to run one behaviour spec against, and envelope builders.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "events/events.pb.h"
#include "persistence/lmdb_journal.hpp"
#include "persistence/memory_journal.hpp"

namespace weightd::test {

/// A fresh directory under $TMPDIR, removed with everything in it at scope end.
class temp_dir {
 public:
  temp_dir() {
    auto base = std::filesystem::temp_directory_path() / "weightd-test-XXXXXX";
    std::string buf = base.string();
    if (!mkdtemp(buf.data())) std::abort();
    path_ = buf;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// An event of `stream` with a payload that says which test wrote it.
inline events::v1::Envelope make_event(const std::string& stream, const std::string& tag = "e",
                                       int64_t timestamp_ms = 1000) {
  events::v1::Envelope e;
  e.set_stream(stream);
  e.set_timestamp_ms(timestamp_ms);
  auto* p = e.mutable_writer_started();
  p->set_version(tag);
  return e;
}

/// The tags of the events a read yields (see make_event).
inline std::string tag_of(const events::v1::Envelope& e) { return e.writer_started().version(); }

/// A journal backend to run behaviour specs against (doctest template types).
struct lmdb_backend {
  static constexpr const char* name = "lmdb";
  temp_dir dir;
  std::unique_ptr<persistence::lmdb_journal> journal;
  lmdb_backend() { reopen(); }
  void reopen() {
    journal.reset();
    persistence::lmdb_options options;
    options.dir = dir.path() / "journal";
    options.mode = persistence::durability::nosync;  // specs are about semantics
    options.initial_map_bytes = 1 << 20;
    auto opened = persistence::lmdb_journal::open(options);
    if (!opened) throw std::runtime_error(opened.error().to_string());
    journal = std::move(*opened);
  }
  persistence::journal_backend& backend() { return *journal; }
};

struct memory_backend {
  static constexpr const char* name = "memory";
  persistence::memory_journal journal;
  persistence::journal_backend& backend() { return journal; }
};

/// All envelopes of a global-seq range.
inline std::vector<events::v1::Envelope> read_all(const persistence::journal_backend& j,
                                                  persistence::seq_range range = {}) {
  std::vector<events::v1::Envelope> out;
  auto st = j.read(range, [&](const events::v1::Envelope& e) {
    out.push_back(e);
    return true;
  });
  if (!st.ok()) throw std::runtime_error(st.to_string());
  return out;
}

/// The stream seqs a read_stream yields.
inline std::vector<uint64_t> stream_seqs(const persistence::journal_backend& j,
                                         const std::string& stream,
                                         persistence::seq_range range = {}) {
  std::vector<uint64_t> out;
  auto st = j.read_stream(stream, range, [&](const events::v1::Envelope& e) {
    out.push_back(e.stream_seq());
    return true;
  });
  if (!st.ok()) throw std::runtime_error(st.to_string());
  return out;
}

/// Whether an error's message says `text`.
inline bool mentions(const status& st, const std::string& text) {
  return st.message().find(text) != std::string::npos;
}

/// Whether a command's output says `text`.
inline bool mentions(const std::string& output, const std::string& text) {
  return output.find(text) != std::string::npos;
}

/// `n` bytes of a deterministic pattern (different for each seed).
inline std::string pattern(size_t n, unsigned seed = 1) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 2654435761u + seed) >> 13);
  return s;
}

/// Writes `bytes` to `path`, creating its directories.
inline void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

/// The whole file ("" when it cannot be read).
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

/// What a shell command printed (stdout and stderr) and its exit code.
struct run_result {
  int exit_code = -1;
  std::string output;
};

inline run_result run_command(const std::string& command) {
  run_result r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), pipe)) > 0;) r.output.append(buf.data(), n);
  int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace weightd::test
