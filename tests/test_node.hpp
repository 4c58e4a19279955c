// The node configuration most tests start from: an LMDB journal, a HOT and a
// COLD tier, all in one scratch directory.
#pragma once

#include <filesystem>

#include "actors/node.hpp"

namespace weightd::test {

inline actors::node_config node_in(const std::filesystem::path& dir, uint64_t hot_bytes) {
  actors::node_config c;
  c.journal.dir = dir / "journal";
  c.hot = {events::v1::TIER_HOT, dir / "hot", hot_bytes, false};
  c.cold = {events::v1::TIER_COLD, dir / "cold", 0, true};
  return c;
}

}  // namespace weightd::test
