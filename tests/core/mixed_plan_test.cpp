// The MIXED planner (SPEC §4) on its own: a pure function, so every rule is
// checked directly, plus a brute-force cross-check on small random inputs.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/mixed_plan.hpp"

using namespace weightd;
using namespace weightd::actors;

namespace {

using ids = std::vector<std::string>;

/// The HOT ids of a plan that must have succeeded.
ids hot_of(const result<mixed_plan>& plan) {
  REQUIRE(plan.ok());
  return plan->hot;
}

double distance(uint64_t hot_bytes, uint64_t total, double ratio) {
  return std::fabs(static_cast<double>(hot_bytes) - static_cast<double>(total) * ratio);
}

uint64_t total_of(const std::vector<planner_unit>& units) {
  uint64_t total = 0;
  for (const auto& u : units) total += u.bytes;
  return total;
}

/// Steps 3 to 5 of the rule alone (no improvement phase), written out again
/// from the spec so the planner is compared against something independent.
uint64_t greedy_hot_bytes(std::vector<planner_unit> units, double ratio) {
  std::sort(units.begin(), units.end(), [](const planner_unit& a, const planner_unit& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.id < b.id;
  });
  const uint64_t total = total_of(units);
  uint64_t hot = units[0].bytes;
  size_t hot_count = 1;
  for (size_t i = 1; i < units.size(); ++i)
    if (distance(hot + units[i].bytes, total, ratio) < distance(hot, total, ratio)) {
      hot += units[i].bytes;
      ++hot_count;
    }
  if (hot_count == units.size()) hot -= units.back().bytes;  // a smallest unit goes COLD
  return hot;
}

/// The smallest distance any split with at least one unit in each tier reaches.
double best_possible_distance(const std::vector<planner_unit>& units, double ratio) {
  const uint64_t total = total_of(units);
  const uint32_t all = (1u << units.size()) - 1;
  double best = std::numeric_limits<double>::infinity();
  for (uint32_t mask = 1; mask < all; ++mask) {
    uint64_t hot = 0;
    for (size_t i = 0; i < units.size(); ++i)
      if (mask & (1u << i)) hot += units[i].bytes;
    best = std::min(best, distance(hot, total, ratio));
  }
  return best;
}

/// Whether one add, remove or swap that keeps a unit in each tier would bring
/// `plan` strictly closer to the target (checked by brute force).
bool one_move_improves(const std::vector<planner_unit>& units, const mixed_plan& plan, double ratio) {
  std::vector<uint64_t> hot, cold;
  for (const auto& u : units)
    (std::binary_search(plan.hot.begin(), plan.hot.end(), u.id) ? hot : cold).push_back(u.bytes);
  const double now = distance(plan.hot_bytes, plan.total_bytes, ratio);
  auto closer = [&](uint64_t hot_after) {
    return distance(hot_after, plan.total_bytes, ratio) < now;
  };
  for (uint64_t a : cold)
    if (cold.size() >= 2 && closer(plan.hot_bytes + a)) return true;
  for (uint64_t r : hot)
    if (hot.size() >= 2 && closer(plan.hot_bytes - r)) return true;
  for (uint64_t r : hot)
    for (uint64_t a : cold)
      if (closer(plan.hot_bytes - r + a)) return true;
  return false;
}

/// What every successful plan must satisfy, whatever the input.
void check_well_formed(const std::vector<planner_unit>& units, const mixed_plan& plan) {
  CHECK(plan.total_bytes == total_of(units));
  REQUIRE(plan.hot.size() >= 1);
  CHECK(plan.hot.size() <= units.size() - 1);
  CHECK(std::is_sorted(plan.hot.begin(), plan.hot.end()));
  CHECK(std::adjacent_find(plan.hot.begin(), plan.hot.end()) == plan.hot.end());
  uint64_t hot = 0;
  for (const auto& id : plan.hot) {
    auto u = std::find_if(units.begin(), units.end(),
                          [&](const planner_unit& x) { return x.id == id; });
    REQUIRE(u != units.end());
    hot += u->bytes;
  }
  CHECK(plan.hot_bytes == hot);
}

}  // namespace

TEST_CASE("mixed planner: fewer than 2 units is POLICY_UNSATISFIABLE") {
  auto none = plan_mixed({}, 0.5);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().code() == errc::policy_unsatisfiable);

  auto one = plan_mixed({{"a", 100}}, 0.5);
  REQUIRE_FALSE(one.ok());
  CHECK(one.error().code() == errc::policy_unsatisfiable);
}

TEST_CASE("mixed planner: a ratio outside the open interval 0 to 1 is INVALID_ARGUMENT naming mixed_hot_ratio") {
  for (double ratio : {0.0, 1.0, -0.25, 1.5, std::numeric_limits<double>::quiet_NaN(),
                       std::numeric_limits<double>::infinity()}) {
    CAPTURE(ratio);
    auto plan = plan_mixed({{"a", 10}, {"b", 20}}, ratio);
    REQUIRE_FALSE(plan.ok());
    CHECK(plan.error().code() == errc::invalid_argument);
    CHECK(plan.error().message().find("mixed_hot_ratio") != std::string::npos);
  }
  // The ratio is an argument error even where the unit count alone would also fail.
  auto both = plan_mixed({{"a", 10}}, 2.0);
  REQUIRE_FALSE(both.ok());
  CHECK(both.error().code() == errc::invalid_argument);
}

TEST_CASE("mixed planner: a repeated unit id is INVALID_ARGUMENT") {
  auto plan = plan_mixed({{"a", 10}, {"b", 20}, {"a", 30}}, 0.5);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.error().code() == errc::invalid_argument);
  CHECK(plan.error().message().find("\"a\"") != std::string::npos);
}

TEST_CASE("mixed planner: unit bytes adding up past 2^64 are INVALID_ARGUMENT") {
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  auto plan = plan_mixed({{"a", max}, {"b", 1}}, 0.5);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.error().code() == errc::invalid_argument);
}

TEST_CASE("mixed planner: the largest unit seeds the hot set") {
  // target 6.5: the seed c overshoots by 3.5, yet nothing does better without it
  // (b alone misses by 4.5, a alone by 5.5) and c with anything is farther.
  auto plan = plan_mixed({{"a", 1}, {"b", 2}, {"c", 10}}, 0.5);
  CHECK(hot_of(plan) == ids{"c"});
  CHECK(plan->hot_bytes == 10);
  CHECK(plan->total_bytes == 13);
}

TEST_CASE("mixed planner: greedy adds a unit only when it brings hot bytes strictly closer to the target") {
  // total 15, target 9. Seed a (8, off by 1); b (12) is farther; c (10) is only
  // as close, so it is not added; d (9) is exact.
  auto plan = plan_mixed({{"c", 2}, {"a", 8}, {"d", 1}, {"b", 4}}, 0.6);
  CHECK(hot_of(plan) == ids{"a", "d"});
  CHECK(plan->hot_bytes == 9);
}

TEST_CASE("mixed planner: at least one unit stays hot and one cold even at ratio 0.99 and 0.01") {
  // 0.99 (target 11.88): greedy takes all three; one smallest goes COLD, and of
  // the two equally small b and c the smaller id, b.
  CHECK(hot_of(plan_mixed({{"a", 10}, {"b", 1}, {"c", 1}}, 0.99)) == ids{"a", "c"});
  // 0.01 (target 0.12): the seed a alone is far off; swapping it for a small
  // unit is better, and of b and c the smaller added id wins.
  CHECK(hot_of(plan_mixed({{"a", 10}, {"b", 1}, {"c", 1}}, 0.01)) == ids{"b"});
  // Two equal units at 0.99: greedy takes both, one (the smaller id) goes COLD.
  CHECK(hot_of(plan_mixed({{"a", 5}, {"b", 5}}, 0.99)) == ids{"b"});

  // Whatever the sizes, both extremes keep one unit in each tier.
  const std::vector<std::vector<planner_unit>> cases = {
      {{"a", 1}, {"b", 1}},
      {{"a", 0}, {"b", 0}, {"c", 0}},
      {{"a", 1000}, {"b", 1}},
      {{"a", 1}, {"b", 1000}, {"c", 1}, {"d", 0}},
      {{"a", 7}, {"b", 7}, {"c", 7}, {"d", 7}, {"e", 7}},
  };
  for (const auto& units : cases)
    for (double ratio : {0.99, 0.01, 0.999999, 0.000001}) {
      CAPTURE(ratio);
      auto plan = plan_mixed(units, ratio);
      REQUIRE(plan.ok());
      check_well_formed(units, *plan);
    }
}

TEST_CASE("mixed planner: a swap finds a better plan than greedy") {
  // total 15, target 3.75. Greedy keeps the seed a (8, off by 4.25) and adds
  // nothing; it cannot remove a, the only HOT unit. Swapping a for b (4) is off
  // by 0.25, and then nothing improves further.
  std::vector<planner_unit> units = {{"a", 8}, {"b", 4}, {"c", 2}, {"d", 1}};
  CHECK(greedy_hot_bytes(units, 0.25) == 8);
  auto plan = plan_mixed(units, 0.25);
  CHECK(hot_of(plan) == ids{"b"});
  CHECK(plan->hot_bytes == 4);
}

TEST_CASE("mixed planner: equally good moves are broken by the removed id then the added id") {
  // total 18, target 9; greedy ends with the 6 and the 5 (11). Two swaps reach 9
  // exactly: drop the 6 for the 4, or drop the 5 for the 3. The smaller removed
  // id wins, so which one depends only on the names.
  CHECK(hot_of(plan_mixed({{"a", 6}, {"b", 5}, {"c", 4}, {"d", 3}}, 0.5)) == ids{"b", "c"});
  CHECK(hot_of(plan_mixed({{"b", 6}, {"a", 5}, {"c", 4}, {"d", 3}}, 0.5)) == ids{"b", "d"});
  // Same removed id, two equally good added units: the smaller added id wins.
  CHECK(hot_of(plan_mixed({{"a", 10}, {"y", 1}, {"x", 1}}, 0.01)) == ids{"x"});
}

TEST_CASE("mixed planner: of equal units the smaller id seeds the hot set") {
  // target 5: either unit alone is exact, so the sort's id tie-break decides.
  CHECK(hot_of(plan_mixed({{"b", 5}, {"a", 5}}, 0.5)) == ids{"a"});
  CHECK(hot_of(plan_mixed({{"a", 5}, {"b", 5}}, 0.5)) == ids{"a"});
}

TEST_CASE("mixed planner: the plan is the same for every permutation of the input") {
  // Equal sizes on purpose, so only the id tie-breaks can make the order irrelevant.
  const std::vector<planner_unit> units = {{"a", 7}, {"b", 5}, {"c", 5}, {"d", 3}, {"e", 2}, {"f", 2}};
  for (double ratio : {0.1, 0.4, 0.5, 0.77}) {
    CAPTURE(ratio);
    auto first = plan_mixed(units, ratio);
    REQUIRE(first.ok());
    std::vector<size_t> order(units.size());
    std::iota(order.begin(), order.end(), size_t{0});
    int permutations = 0;
    do {
      std::vector<planner_unit> input;
      for (size_t i : order) input.push_back(units[i]);
      auto plan = plan_mixed(input, ratio);
      REQUIRE(plan.ok());
      CHECK(plan->hot == first->hot);
      CHECK(plan->hot_bytes == first->hot_bytes);
      ++permutations;
    } while (std::next_permutation(order.begin(), order.end()));
    CHECK(permutations == 720);
  }
}

TEST_CASE("mixed planner: on random small inputs the plan is never worse than greedy and keeps a unit in each tier") {
  // std::mt19937's output is fixed by the standard, and only its raw output is
  // used, so these inputs are the same with every standard library.
  std::mt19937 rng(20240611);
  const double ratios[] = {0.01, 0.1, 0.25, 1.0 / 3, 0.5, 0.6, 0.75, 0.9, 0.99};
  int reached_best = 0;
  const int rounds = 3000;
  for (int round = 0; round < rounds; ++round) {
    const size_t n = 2 + rng() % 7;  // 2..8
    std::vector<planner_unit> units;
    for (size_t i = 0; i < n; ++i)  // small sizes, so equal sizes and 0 bytes are common
      units.push_back({"u" + std::to_string(i), static_cast<uint64_t>(rng() % 21)});
    const double ratio = ratios[rng() % std::size(ratios)];
    CAPTURE(round);
    CAPTURE(ratio);

    auto plan = plan_mixed(units, ratio);
    REQUIRE(plan.ok());
    check_well_formed(units, *plan);
    const double got = distance(plan->hot_bytes, plan->total_bytes, ratio);
    CHECK(got <= distance(greedy_hot_bytes(units, ratio), plan->total_bytes, ratio));
    const double best = best_possible_distance(units, ratio);
    CHECK(got >= best);
    if (got == best) ++reached_best;
    // These inputs settle within 3 passes, well under the cap of 8, so the
    // planner stopped because nothing improved: no single move may be closer.
    CHECK_FALSE(one_move_improves(units, *plan, ratio));

    // Shuffling the input changes nothing.
    std::shuffle(units.begin(), units.end(), rng);
    auto again = plan_mixed(units, ratio);
    REQUIRE(again.ok());
    CHECK(again->hot == plan->hot);
  }
  // Not a promise of optimality, only a guard against an improvement phase that
  // silently does nothing: local moves reach the best split in most cases
  // (about 90% of these rounds, against about 40% for greedy alone).
  CHECK(reached_best > rounds * 8 / 10);
}

TEST_CASE("mixed planner: 2000 units are planned fast") {
  std::vector<planner_unit> units;
  uint64_t x = 88172645463325252ull;  // xorshift64: model-like sizes from 1 byte to ~1 GiB
  for (int i = 0; i < 2000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    units.push_back({"layer." + std::to_string(i) + ".weight", 1 + (x >> 34)});
  }
  const auto start = std::chrono::steady_clock::now();
  auto plan = plan_mixed(units, 0.37);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  REQUIRE(plan.ok());
  check_well_formed(units, *plan);
  CHECK(distance(plan->hot_bytes, plan->total_bytes, 0.37) <=
        distance(greedy_hot_bytes(units, 0.37), plan->total_bytes, 0.37));
  // Generous: a pass is at most hot x cold = 10^6 moves, and there are 8 passes.
  CHECK(elapsed < std::chrono::seconds(5));
}
