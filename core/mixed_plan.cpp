#include "core/mixed_plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <optional>

namespace weightd::actors {

namespace {

// The declaration order is the tie-break order between kinds (SPEC §4).
enum class move_kind { add, remove, swap };

/// One candidate change to the HOT set; indices are into the sorted units.
struct move {
  move_kind kind = move_kind::add;
  size_t removed = 0;  // meaningful for remove and swap
  size_t added = 0;    // meaningful for add and swap
  uint64_t hot_after = 0;
};

double distance(uint64_t hot_bytes, double target) {
  return std::fabs(static_cast<double>(hot_bytes) - target);
}

/// The planner's working state: `units` sorted by bytes descending then id,
/// `by_id` the same units' indices sorted by id (the order ties are broken in).
struct plan_state {
  const std::vector<planner_unit>& units;
  const std::vector<size_t>& by_id;
  double target;
  std::vector<bool> hot;
  uint64_t hot_bytes = 0;

  void apply(const move& m) {
    if (m.kind != move_kind::add) hot[m.removed] = false;
    if (m.kind != move_kind::remove) hot[m.added] = true;
    hot_bytes = m.hot_after;
  }

  /// The best valid single move if it is strictly closer than the current plan.
  /// Moves are visited in tie-break order (kind, removed id, added id) and only a
  /// strictly closer one replaces the best so far, so the first of equals wins.
  std::optional<move> best_improvement() const {
    std::vector<size_t> hot_ids, cold_ids;  // each in id order
    for (size_t i : by_id) (hot[i] ? hot_ids : cold_ids).push_back(i);

    std::optional<move> best;
    double best_distance = distance(hot_bytes, target);
    auto consider = [&](move m) {
      double d = distance(m.hot_after, target);
      if (d < best_distance) {
        best_distance = d;
        best = m;
      }
    };
    // Every move must leave at least one unit in each tier; a swap keeps the counts.
    if (cold_ids.size() >= 2)
      for (size_t a : cold_ids) consider({move_kind::add, 0, a, hot_bytes + units[a].bytes});
    if (hot_ids.size() >= 2)
      for (size_t r : hot_ids) consider({move_kind::remove, r, 0, hot_bytes - units[r].bytes});
    for (size_t r : hot_ids)
      for (size_t a : cold_ids)
        consider({move_kind::swap, r, a, hot_bytes - units[r].bytes + units[a].bytes});
    return best;
  }
};

}  // namespace

result<mixed_plan> plan_mixed(std::vector<planner_unit> units, double ratio) {
  // Written so that NaN fails too.
  if (!(ratio > 0 && ratio < 1)) {
    char text[64];
    std::snprintf(text, sizeof text, "%.17g", ratio);
    return {errc::invalid_argument, std::string{"mixed_hot_ratio must be within (0, 1) but is "} +
                                        text + "; choose a ratio between 0 and 1, or HOT or COLD"};
  }
  if (units.size() < 2)
    return {errc::policy_unsatisfiable,
            "policy MIXED needs at least 2 affinity units but there " +
                std::string{units.size() == 1 ? "is 1" : "are 0"} + "; choose HOT or COLD"};

  // The one order every later step walks. Ids are checked unique below, so it
  // is a total order and the input order cannot leak into the plan.
  std::sort(units.begin(), units.end(), [](const planner_unit& a, const planner_unit& b) {
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    return a.id < b.id;
  });
  std::vector<size_t> by_id(units.size());
  std::iota(by_id.begin(), by_id.end(), size_t{0});
  std::sort(by_id.begin(), by_id.end(),
            [&](size_t a, size_t b) { return units[a].id < units[b].id; });
  for (size_t k = 1; k < by_id.size(); ++k)
    if (units[by_id[k - 1]].id == units[by_id[k]].id)
      return {errc::invalid_argument, "affinity unit id \"" + units[by_id[k]].id +
                                          "\" appears more than once; each unit must be listed once"};

  uint64_t total = 0;
  for (const auto& u : units) {
    if (u.bytes > std::numeric_limits<uint64_t>::max() - total)
      return {errc::invalid_argument, "affinity unit bytes add up past 2^64"};
    total += u.bytes;
  }

  plan_state state{units, by_id, static_cast<double>(total) * ratio,
                   std::vector<bool>(units.size(), false), 0};

  // Greedy: seed with the largest, then take each unit that brings us strictly closer.
  state.hot[0] = true;
  state.hot_bytes = units[0].bytes;
  for (size_t i = 1; i < units.size(); ++i) {
    uint64_t with = state.hot_bytes + units[i].bytes;
    if (distance(with, state.target) < distance(state.hot_bytes, state.target)) {
      state.hot[i] = true;
      state.hot_bytes = with;
    }
  }

  // Greedy never leaves everything COLD (the seed is HOT), but it can make
  // everything HOT when the ratio is close to 1. Then one smallest unit goes
  // COLD: the best single removal (see the header), and among equally small
  // units the smallest id, as the improvement phase breaks ties. Sorted ties are
  // by id ascending, so that is the first unit of the last run of equal bytes.
  if (std::all_of(state.hot.begin(), state.hot.end(), [](bool h) { return h; })) {
    size_t victim = units.size() - 1;
    while (victim > 0 && units[victim - 1].bytes == units[victim].bytes) --victim;
    state.hot[victim] = false;
    state.hot_bytes -= units[victim].bytes;
  }

  // Improvement: greedy can be fooled (a large seed above the target, say);
  // a few rounds of the best single move repair most of that.
  constexpr int max_passes = 8;
  for (int pass = 0; pass < max_passes; ++pass) {
    auto m = state.best_improvement();
    if (!m) break;
    state.apply(*m);
  }

  mixed_plan plan;
  plan.hot_bytes = state.hot_bytes;
  plan.total_bytes = total;
  for (size_t i : by_id)
    if (state.hot[i]) plan.hot.push_back(units[i].id);
  return plan;
}

}  // namespace weightd::actors
