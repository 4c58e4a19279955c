#include "kill9/daemon_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <fstream>
#include <regex>
#include <thread>

#include "api/client/client.hpp"
#include "api/common/loopback.hpp"

namespace weightd::kill9 {

using namespace std::chrono_literals;

namespace {

/// Whether something accepts TCP connections on the loopback `port`.
/// (Polled before the first gRPC call: a gRPC channel that found nobody
/// listening waits out its reconnect backoff, seconds, before it tries again.)
bool accepts_connections(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

daemon_process::daemon_process(std::string weightd_path, store_dirs dirs,
                               std::vector<std::string> flags)
    : weightd_(std::move(weightd_path)), dirs_(std::move(dirs)), flags_(std::move(flags)) {}

daemon_process::~daemon_process() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

fs::path daemon_process::log_path() const {
  return dirs_.logs / ("weightd-" + std::to_string(incarnation_) + ".log");
}

status daemon_process::start() {
  if (pid_ > 0) return {errc::internal, "weightd is already running"};
  ++incarnation_;
  int port = api::free_loopback_port();
  address_ = "127.0.0.1:" + std::to_string(port);
  std::vector<std::string> args{weightd_,
                                "--data-dir", dirs_.data.string(),
                                "--hot-dir", dirs_.hot.string(),
                                "--listen", address_,
                                "--http-listen",
                                "127.0.0.1:" + std::to_string(api::free_loopback_port())};
  args.insert(args.end(), flags_.begin(), flags_.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  auto log = log_path().string();
  pid_ = ::fork();
  if (pid_ < 0) return {errc::internal, "fork failed"};
  if (pid_ == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::execv(weightd_.c_str(), argv.data());
    _exit(127);
  }
  api::client_options options;
  options.address = address_;
  options.deadline = 2s;
  options.attempts = 1;
  auto deadline = std::chrono::steady_clock::now() + 60s;
  for (;;) {
    if (accepts_connections(port) && api::client{options}.server_status().ok()) return {};
    int wstatus = 0;
    if (::waitpid(pid_, &wstatus, WNOHANG) == pid_) {
      pid_ = -1;
      return {errc::internal, "weightd exited during startup (status " +
                                  std::to_string(WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1) +
                                  "); its log ends with:\n" + log_tail()};
    }
    if (std::chrono::steady_clock::now() > deadline)
      return {errc::internal, "weightd did not answer Status within 60 s; its log ends with:\n" +
                                  log_tail()};
    std::this_thread::sleep_for(20ms);
  }
}

status daemon_process::kill_hard() {
  if (pid_ <= 0) return {errc::internal, "weightd is not running"};
  int wstatus = 0;
  bool died_before = ::waitpid(pid_, &wstatus, WNOHANG) == pid_;
  if (!died_before) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &wstatus, 0);
  }
  pid_ = -1;
  if (died_before || !WIFSIGNALED(wstatus) || WTERMSIG(wstatus) != SIGKILL)
    return {errc::internal,
            "weightd died by itself under load before the kill (" +
                std::string(WIFSIGNALED(wstatus) ? "signal " + std::to_string(WTERMSIG(wstatus))
                                                 : "exit " + std::to_string(WEXITSTATUS(wstatus))) +
                "); its log ends with:\n" + log_tail()};
  return {};
}

int daemon_process::stop() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  int wstatus = 0;
  ::waitpid(pid_, &wstatus, 0);
  pid_ = -1;
  return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
}

std::string daemon_process::log_tail(size_t lines) const {
  std::ifstream in(log_path());
  std::deque<std::string> last;
  for (std::string line; std::getline(in, line);) {
    last.push_back(line);
    if (last.size() > lines) last.pop_front();
  }
  std::string out;
  for (const auto& l : last) out += "  | " + l + "\n";
  return out.empty() ? "  | (empty)\n" : out;
}

long daemon_process::orphan_files_removed_at_start() const {
  std::ifstream in(log_path());
  static const std::regex ready{"weightd ready .* orphan_files_removed=([0-9]+)"};
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, m, ready)) return std::stol(m[1].str());
  return -1;
}

}  // namespace weightd::kill9
