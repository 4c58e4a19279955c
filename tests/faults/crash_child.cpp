// The victim of the crash test: appends batches to an LMDB journal in sync
// mode forever and prints "<last seq>\n" after each acknowledged batch. Every
// event's tag is "<batch first seq>/<index>/<batch size>" so the checker can
// tell a whole batch from a partial one.
#include <unistd.h>

#include <cstdio>
#include <random>
#include <string>

#include "persistence/lmdb_journal.hpp"

int main(int argc, char** argv) {
  using namespace weightd;
  if (argc != 3) return 2;
  persistence::lmdb_options o;
  o.dir = argv[1];
  o.initial_map_bytes = 64 << 10;  // small, so crashes also hit map growth
  auto opened = persistence::lmdb_journal::open(o);
  if (!opened) {
    std::fprintf(stderr, "%s\n", opened.error().to_string().c_str());
    return 3;
  }
  auto& journal = **opened;
  std::mt19937 rng(static_cast<unsigned>(std::stoul(argv[2])));
  for (;;) {
    size_t n = 1 + rng() % 32;
    uint64_t first = *journal.highest_seq() + 1;
    std::vector<events::v1::Envelope> batch;
    for (size_t i = 0; i < n; ++i) {
      events::v1::Envelope e;
      e.set_stream("revision|crash" + std::to_string(rng() % 5));
      e.set_timestamp_ms(1);
      e.mutable_writer_started()->set_version(std::to_string(first) + "/" + std::to_string(i) +
                                              "/" + std::to_string(n) +
                                              std::string(rng() % 512, 'x'));
      batch.push_back(std::move(e));
    }
    if (!journal.append(batch).ok()) return 4;
    auto line = std::to_string(batch.back().global_seq()) + "\n";
    if (write(1, line.data(), line.size()) != static_cast<ssize_t>(line.size())) return 5;
  }
}
