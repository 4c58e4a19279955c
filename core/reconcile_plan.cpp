#include "core/reconcile_plan.hpp"

#include <algorithm>
#include <cstdio>
#include <tuple>

#include "core/revision_decide.hpp"

namespace weightd::actors {

namespace v1 = events::v1;

namespace {

std::string short_name(v1::Residency r) {
  auto name = v1::Residency_Name(r);
  return name.rfind("RESIDENCY_", 0) == 0 ? name.substr(10) : name;
}

std::string percent(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100.0 * x);
  return text;
}

uint64_t hot_bytes_of(const events::revision_record& r) {
  return static_cast<uint64_t>(r.observed_hot_ratio * static_cast<double>(r.manifest.logical_bytes));
}

/// When the revision was last used (a lease), or else created.
int64_t access_of(const events::revision_record& r) {
  return r.last_accessed_at_ms ? r.last_accessed_at_ms : r.created_at_ms;
}

bool leased(const revision_view& v, int64_t now) {
  return v.active_lease_count > 0 && v.nearest_lease_expiry_ms > now;
}

/// The maintenance a revision needs now: "" = none.
std::string maintenance(const revision_view& v, int64_t now, const reconciler_config& c,
                        std::string& reason) {
  const auto& r = v.record;
  if (r.availability == v1::IMPORTING && now - r.updated_at_ms >= c.import_abandon.count()) {
    reason = "IMPORTING with no change for " + std::to_string((now - r.updated_at_ms) / 1000) +
             " s (import abandon " + std::to_string(c.import_abandon.count() / 1000) +
             " s); aborted unless a put into its group is recent";
    return "abandon_import";
  }
  if (r.availability == v1::DELETING) {
    reason = "the revision is DELETING; its members are removed in batches of 64";
    return "continue_deletion";
  }
  if (r.draining() && (r.leases.empty() || (r.drain_deadline_ms > 0 && r.drain_deadline_ms <= now))) {
    reason = r.leases.empty() ? "its leases have drained" : "the drain deadline passed";
    return "finish_drain";
  }
  if (v.nearest_lease_expiry_ms && v.nearest_lease_expiry_ms <= now) {
    reason = "a lease is past its expiry";
    return "expire_leases";
  }
  return "";
}

/// The HOT bytes the revision's running operation frees when it ends (0 for
/// a promotion or none): all of them toward COLD, the rest of the ratio
/// toward MIXED.
double freed_by_running(const revision_view& v) {
  if (!v.operation || warmth(v.operation->target) >= warmth(v.record.residency)) return 0;
  double hot = static_cast<double>(hot_bytes_of(v.record));
  double keep = v.operation->target == v1::RESIDENCY_MIXED
                    ? v.operation->target_hot_ratio * static_cast<double>(v.record.manifest.logical_bytes)
                    : 0;
  return std::max(0.0, hot - keep);
}

/// AUTO, READY, no operation, no drain, cooldown passed: may move.
bool may_move(const revision_view& v, int64_t now, const reconciler_config& c) {
  const auto& r = v.record;
  return r.availability == v1::READY && r.policy.mode == v1::MIGRATION_AUTO && !r.operation_id &&
         !r.draining() &&
         (v.last_operation_end_ms == 0 || now - v.last_operation_end_ms >= c.auto_cooldown_ms);
}

/// A candidate with its sort keys copied out of its record, so that ordering
/// thousands of them touches a compact array, not the records.
struct ranked {
  int64_t first = 0, second = 0;
  const revision_view* view = nullptr;
};

/// Puts the `n` smallest (first, second, id) candidates in order at the front.
void first_ranked(std::vector<ranked>& order, size_t n) {
  auto less = [](const ranked& a, const ranked& b) {
    if (a.first != b.first) return a.first < b.first;
    if (a.second != b.second) return a.second < b.second;
    return a.view->record.id < b.view->record.id;
  };
  n = std::min(n, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(), less);
  order.resize(n);
}

}  // namespace

bool is_tick(const reconcile_decision& d) {
  return d.action == "continue_deletion" || d.action == "finish_drain" ||
         d.action == "expire_leases" || d.action == "abandon_import";
}

reconcile_report plan_reconcile(const std::map<events::revision_key, revision_view>& views,
                                const events::revision_key& cursor, int64_t now,
                                const hot_tier_usage& hot, const reconciler_config& c) {
  reconcile_report out;
  out.hot_used_bytes = hot.used_bytes + hot.reserved_bytes;
  out.hot_capacity_bytes = hot.capacity_bytes;
  auto full = [&] { return out.decisions.size() >= c.max_actions; };

  // One pass over the views (a round at 10 000 revisions is bound by memory
  // access): maintenance from the cursor on, wrapping around, and the
  // revisions that may move.
  std::vector<reconcile_decision> wrapped;  // maintenance before the cursor
  std::vector<const revision_view*> movable;
  double pending_frees = 0;  // HOT bytes the running demotions will free
  auto start = views.upper_bound(cursor);
  bool after_cursor = start == views.begin();
  for (auto it = views.begin(); it != views.end(); ++it) {
    if (it == start) after_cursor = true;
    auto& into = after_cursor ? out.decisions : wrapped;
    std::string reason;
    auto action = into.size() < c.max_actions ? maintenance(it->second, now, c, reason) : "";
    if (!action.empty()) into.push_back({it->first, action, v1::RESIDENCY_UNKNOWN, reason});
    if (may_move(it->second, now, c)) movable.push_back(&it->second);
    pending_frees += freed_by_running(it->second);
  }
  for (auto& d : wrapped) {
    if (full()) break;
    out.decisions.push_back(std::move(d));
  }
  if (hot.capacity_bytes == 0) return out;  // an unlimited HOT tier knows no pressure

  double capacity = static_cast<double>(hot.capacity_bytes);
  double used = static_cast<double>(out.hot_used_bytes);
  double high = c.high_watermark * capacity;
  double relief_line = (c.high_watermark - 2 * c.eviction_ratio) * capacity;
  out.pressure = used > high || hot.allocation_failed;
  out.relief = !out.pressure && used < relief_line;
  out.promotion_headroom_bytes = static_cast<int64_t>(std::max(0.0, relief_line - used));
  auto usage = "HOT tier at " + percent(used / capacity) + " of " +
               std::to_string(hot.capacity_bytes) + " bytes";

  // A revision warmer than it prefers converges (no pressure needed).
  for (const auto* v : movable) {
    if (full()) break;
    const auto& r = v->record;
    if (warmth(r.residency) > warmth(r.policy.preferred) && !leased(*v, now))
      out.decisions.push_back({r.id, "converge", r.policy.preferred,
                               "it is " + short_name(r.residency) + " but prefers " +
                                   short_name(r.policy.preferred)});
  }

  if (out.pressure) {
    double target = (c.high_watermark - c.eviction_ratio) * capacity;
    // What the running demotions will free counts already: otherwise every
    // round of a long demotion would demote one more revision.
    double to_free = used - target - pending_frees;
    if (hot.allocation_failed && pending_frees == 0)
      to_free = std::max(to_free, 1.0);  // a spill alone asks for one demotion
    std::vector<ranked> order;
    for (const auto* v : movable) {
      const auto& r = v->record;
      if (!leased(*v, now) && warmth(r.residency) > warmth(v1::RESIDENCY_COLD) &&
          warmth(r.residency) <= warmth(r.policy.preferred))
        order.push_back({access_of(r), -static_cast<int64_t>(hot_bytes_of(r)), v});
    }
    first_ranked(order, c.max_actions);  // oldest access first, then most hot bytes
    double freed = 0;
    for (const auto& [access, minus_hot, v] : order) {
      if (full() || freed >= to_free) break;
      const auto& r = v->record;
      auto hot_now = static_cast<double>(hot_bytes_of(r));
      v1::Residency step = v1::RESIDENCY_COLD;
      double frees = hot_now;
      if (r.residency == v1::RESIDENCY_HOT && r.affinity_units >= 2) {
        step = v1::RESIDENCY_MIXED;
        frees = hot_now * (1 - r.policy.mixed_hot_ratio);
      }
      freed += frees;
      out.decisions.push_back(
          {r.id, "demote", step,
           "pressure: " + usage + " (high watermark " + percent(c.high_watermark) + (hot.allocation_failed ? ", a put had to spill" : "") +
               "); least recently used (access at " + std::to_string(access_of(r)) +
               " ms) with " + std::to_string(hot_bytes_of(r)) + " hot bytes; " +
               short_name(r.residency) + " -> " + short_name(step) + " frees about " +
               std::to_string(static_cast<uint64_t>(frees)) + " bytes"});
    }
  } else if (out.relief) {
    std::vector<ranked> order;
    for (const auto* v : movable)
      if (warmth(v->record.residency) < warmth(v->record.policy.preferred))
        order.push_back({-access_of(v->record), 0, v});
    // Most recent access first. Every candidate may be needed (one that does
    // not fit is skipped), so this one sorts them all.
    first_ranked(order, order.size());
    double planned = used;
    for (const auto& [minus_access, unused, v] : order) {
      if (full()) break;
      const auto& r = v->record;
      double logical = static_cast<double>(r.manifest.logical_bytes);
      double want = r.policy.preferred == v1::RESIDENCY_HOT ? logical : r.policy.mixed_hot_ratio * logical;
      double extra = std::max(0.0, want - static_cast<double>(hot_bytes_of(r)));
      if (planned + extra > relief_line) continue;  // it would push usage past the relief line
      planned += extra;
      out.decisions.push_back(
          {r.id, "promote", r.policy.preferred,
           "relief: " + usage + ", below the relief line " +
               percent(c.high_watermark - 2 * c.eviction_ratio) + "; " +
               short_name(r.residency) + " -> " + short_name(r.policy.preferred) +
               " adds about " + std::to_string(static_cast<uint64_t>(extra)) + " hot bytes"});
    }
  }
  return out;
}

}  // namespace weightd::actors
