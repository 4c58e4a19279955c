#include "kill9/model.hpp"

#include <cstring>

#include "events/digest.hpp"

namespace weightd::kill9 {

namespace {

/// splitmix64: fast, and every seed gives a different stream.
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::string generate(uint64_t size, uint64_t seed) {
  std::string out(size, '\0');
  uint64_t state = seed;
  for (size_t at = 0; at < size; at += 8) {
    uint64_t word = next_random(state);
    std::memcpy(out.data() + at, &word, std::min<size_t>(8, size - at));
  }
  return out;
}

}  // namespace

blob generated_blob(uint64_t size, uint64_t seed) {
  blob b;
  b.size = size;
  b.seed = seed;
  b.sha256 = events::sha256_hex(generate(size, seed));
  return b;
}

blob literal_blob(std::string bytes) {
  blob b;
  b.size = bytes.size();
  b.sha256 = events::sha256_hex(bytes);
  b.literal = std::move(bytes);
  return b;
}

std::string bytes_of(const blob& b) {
  return b.literal.empty() ? generate(b.size, b.seed) : b.literal;
}

reply classify(const status& st) {
  if (st.ok()) return reply::acknowledged;
  switch (st.code()) {
    case errc::durability_failed:  // whether the batch reached the disk is known at restart
    case errc::internal:           // a gRPC error without a weightd code (e.g. cancelled)
    case errc::data_loss:
      return reply::unknown;
    case errc::busy:
      // api::client maps a transport failure (unreachable daemon, deadline)
      // to BUSY with this message; weightd's own BUSY names its blockers.
      return st.message().rfind("weightd is unreachable", 0) == 0 ? reply::unknown
                                                                   : reply::rejected;
    default:
      return reply::rejected;
  }
}

void op_tally::merge(const op_tally& other) {
  auto add = [](std::map<std::string, uint64_t>& to, const std::map<std::string, uint64_t>& from) {
    for (const auto& [kind, n] : from) to[kind] += n;
  };
  add(acknowledged, other.acknowledged);
  add(rejected, other.rejected);
  add(unknown_while_alive, other.unknown_while_alive);
  add(in_flight_at_kill, other.in_flight_at_kill);
}

uint64_t op_tally::total(const std::map<std::string, uint64_t>& by_kind) {
  uint64_t sum = 0;
  for (const auto& [kind, n] : by_kind) sum += n;
  return sum;
}

std::string format_counts(const std::map<std::string, uint64_t>& by_kind) {
  std::string out;
  for (const auto& [kind, n] : by_kind) {
    if (n == 0) continue;
    if (!out.empty()) out += ", ";
    out += kind + " " + std::to_string(n);
  }
  return out.empty() ? "none" : out;
}

const char* stage_name(revision_stage s) {
  switch (s) {
    case revision_stage::begin_in_flight: return "BeginImport in flight";
    case revision_stage::importing: return "IMPORTING (BeginImport acknowledged)";
    case revision_stage::commit_in_flight: return "CommitImport in flight";
    case revision_stage::ready: return "READY (CommitImport acknowledged)";
    case revision_stage::remove_in_flight: return "RemoveRevision in flight";
    case revision_stage::abort_in_flight: return "AbortImport in flight";
    case revision_stage::deleting: return "removed (RemoveRevision/AbortImport acknowledged)";
  }
  return "?";
}

uint64_t revision_model::logical_bytes() const {
  uint64_t sum = 0;
  for (const auto& m : payloads) sum += m.bytes.size;
  return sum;
}

revision_model* client_model::find_revision(const std::string& text) {
  for (auto& r : revisions)
    if (r.text == text) return &r;
  return nullptr;
}

}  // namespace weightd::kill9
