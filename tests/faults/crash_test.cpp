// Crash consistency: a child appends with fsync and is killed with SIGKILL at
// random moments, 20 times. After each kill the journal must open clean, hold
// every acknowledged seq, have no gap, no damaged record and no partial batch.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <random>

#include "persistence/lmdb_journal.hpp"
#include "support.hpp"

using namespace weightd;
using namespace weightd::test;

namespace {

/// Runs the child until a random moment, kills it, returns the highest seq it
/// acknowledged (everything it printed before dying). The delay counts from
/// the child's first acknowledgement (slow sanitizer builds start slowly),
/// or from its start when `during_startup`.
uint64_t run_and_kill(const std::filesystem::path& dir, unsigned seed, int kill_after_ms,
                      bool during_startup) {
  int out[2];
  REQUIRE(pipe(out) == 0);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    execl(WEIGHTD_CRASH_CHILD, WEIGHTD_CRASH_CHILD, dir.c_str(), std::to_string(seed).c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  std::string acks;
  char buf[4096];
  auto now = std::chrono::steady_clock::now;
  auto delay = std::chrono::milliseconds(kill_after_ms);
  auto deadline = during_startup ? now() + delay : now() + std::chrono::seconds(30);
  while (now() < deadline) {
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, 1) > 0) {
      ssize_t n = read(out[0], buf, sizeof buf);
      if (n <= 0) break;  // the child died on its own: the checks below tell why
      if (acks.empty() && !during_startup) deadline = now() + delay;
      acks.append(buf, static_cast<size_t>(n));
    }
  }
  kill(child, SIGKILL);
  int wstatus = 0;
  waitpid(child, &wstatus, 0);
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;) acks.append(buf, static_cast<size_t>(n));
  close(out[0]);
  CHECK_MESSAGE(WIFSIGNALED(wstatus), "the child exited by itself with status "
                                          << (WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1));
  uint64_t highest_ack = 0;
  size_t start = 0;
  for (size_t nl; (nl = acks.find('\n', start)) != std::string::npos; start = nl + 1)
    highest_ack = std::stoull(acks.substr(start, nl - start));
  return highest_ack;
}

}  // namespace

TEST_CASE("crash: SIGKILL at random moments never loses an acknowledged event or splits a batch") {
  temp_dir dir;
  std::mt19937 rng(20261202);
  uint64_t total_acknowledged = 0;
  uint64_t last_writer_id = 0;
  for (int round = 1; round <= 20; ++round) {
    CAPTURE(round);
    bool during_startup = round % 5 == 0;
    int kill_after = during_startup ? static_cast<int>(rng() % 20) : static_cast<int>(rng() % 120);
    uint64_t acknowledged = run_and_kill(dir.path(), rng(), kill_after, during_startup);

    persistence::lmdb_options o;
    o.dir = dir.path();
    auto opened = persistence::lmdb_journal::open(o);
    REQUIRE_MESSAGE(opened.ok(), opened.error().to_string());
    auto& j = **opened;
    // Each open takes a new incarnation (the child may die before it opens).
    CHECK(j.writer_id() > last_writer_id);
    last_writer_id = j.writer_id();
    uint64_t highest = *j.highest_seq();
    CHECK(highest >= acknowledged);

    uint64_t expected = 1;
    std::map<uint64_t, std::pair<uint64_t, uint64_t>> batches;  // first seq -> (seen, size)
    std::map<std::string, uint64_t> stream_seq;
    auto st = j.read({}, [&](const events::v1::Envelope& e) {
      CHECK(e.global_seq() == expected);
      ++expected;
      CHECK(e.stream_seq() == ++stream_seq[e.stream()]);
      auto tag = e.writer_started().version();
      auto s1 = tag.find('/'), s2 = tag.find('/', s1 + 1);
      auto first = std::stoull(tag.substr(0, s1));
      auto size = std::stoull(tag.substr(s2 + 1));
      auto& b = batches[first];
      ++b.first;
      b.second = size;
      return true;
    });
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    CHECK(expected - 1 == highest);
    for (const auto& batch : batches) {
      CAPTURE(batch.first);  // (doctest's CAPTURE is a lambda: clang refuses a structured binding)
      CHECK(batch.second.first == batch.second.second);  // whole batches only
    }
    total_acknowledged = acknowledged;
  }
  MESSAGE("the last child had acknowledged up to seq " << total_acknowledged);
}
