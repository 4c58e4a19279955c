// The progress line of weightctl's transfers (SPEC §10).
#include "api/cli/progress.hpp"

#include <spdlog/fmt/fmt.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>

#include "api/cli/format.hpp"

namespace weightd::api {

namespace {

constexpr std::chrono::milliseconds kRedrawEvery{100};  // at most 10 redraws a second
// Under half a second, a rate is mostly connection setup: no ETA from it.
constexpr std::chrono::milliseconds kRateKnownAfter{500};

size_t terminal_width() {
  winsize w{};
  if (ioctl(2, TIOCGWINSZ, &w) == 0 && w.ws_col > 0) return w.ws_col;
  return 80;
}

std::string eta_text(double seconds) {
  auto s = static_cast<uint64_t>(seconds + 0.5);
  if (s >= 100 * 3600) return "--";
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, s / 60 % 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

}  // namespace

progress_line::progress_line(uint64_t total_bytes, uint64_t total_files, bool quiet)
    : total_(total_bytes), files_(total_files), quiet_(quiet), tty_(isatty(2) != 0) {}

void progress_line::show(uint64_t done, const std::string& what, uint64_t file) {
  if (quiet_) return;
  std::lock_guard lock{mutex_};
  bool new_file = what != last_what_;
  if (new_file) {
    last_what_ = what;
    ++files_seen_;
  }
  if (file == 0) file = files_seen_;
  if (!tty_) {  // a log, not an animation: one line per file, also when uploads interleave
    if (logged_.emplace(file, what).second) fmt::print(stderr, "[{}/{}] {}\n", file, files_, what);
    return;
  }
  auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < kRedrawEvery && done < total_) return;
  last_draw_ = now;
  draw(done, what, file);
}

void progress_line::draw(uint64_t done, const std::string& what, uint64_t file) {
  auto elapsed = std::chrono::steady_clock::now() - start_;
  double secs = std::chrono::duration<double>(elapsed).count();
  bool rate_known = elapsed >= kRateKnownAfter && done > 0;
  double rate = rate_known ? static_cast<double>(done) / secs : 0;
  double percent = total_ ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100;
  std::string line = fmt::format(
      "{:3.0f}% {} / {}  {}/s  ETA {}  file {}/{} ", percent, format_bytes(done),
      format_bytes(total_), rate_known ? format_bytes(static_cast<uint64_t>(rate)) : "--",
      rate_known ? eta_text(static_cast<double>(total_ - std::min(done, total_)) / rate) : "--",
      file, files_);
  size_t width = terminal_width() - 1;  // the last column would wrap on some terminals
  if (line.size() < width) {
    size_t room = width - line.size();
    line += what.size() <= room ? what : (room > 3 ? "..." + what.substr(what.size() - (room - 3)) : "");
  }
  if (line.size() > width) line.resize(width);
  // \r then clear to the end of the line: a shorter line leaves no tail.
  fmt::print(stderr, "\r{}\x1b[K", line);
  std::fflush(stderr);
  drawn_ = true;
}

void progress_line::end() {
  if (quiet_ || !tty_) return;
  std::lock_guard lock{mutex_};
  if (drawn_) fmt::print(stderr, "\n");
  drawn_ = false;
}

}  // namespace weightd::api
