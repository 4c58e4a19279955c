#include "api/cli/progress.hpp"

#include <spdlog/fmt/fmt.h>
#include <unistd.h>

#include <cstdio>

#include "api/cli/format.hpp"

namespace weightd::api {

progress_line::progress_line(uint64_t total_bytes) : total(total_bytes), tty(isatty(2)) {}

void progress_line::show(uint64_t done, const std::string& what) {
  if (!tty) return;
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
  double eta = rate > 0 ? static_cast<double>(total - done) / rate : 0;
  fmt::print(stderr, "\r{:>10} / {:<10} {:>10}/s  ETA {:>4.0f}s  {:<40.40}", format_bytes(done),
             format_bytes(total), format_bytes(static_cast<uint64_t>(rate)), eta, what);
}

void progress_line::end() {
  if (tty) fmt::print(stderr, "\n");
}

}  // namespace weightd::api
