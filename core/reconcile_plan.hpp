// The reconciler's rounds (SPEC §4 Reconciler, Pressure and relief) as a pure
// function of the registry's views, the HOT tier's usage and the clock. The
// registry runs a round every reconcile interval and carries its decisions
// out: maintenance ticks go to the revisions (they expire leases, finish
// drains, continue deletions), residency moves go to the revisions as
// auto_migrate, which re-check the rule against their current record before
// they write the OperationStarted event. `Reconcile(dry_run)` returns the
// same decisions without taking them.
//
// Pressure and relief, precisely:
//   pressure = HOT used + reserved above high_watermark x capacity, or a put
//              spilled / a HOT reservation failed since the last round;
//   relief   = no pressure and HOT used + reserved below
//              (high_watermark - 2 x eviction_ratio) x capacity (the "relief line").
// Under pressure it demotes AUTO revisions that are READY, unleased, without
// an operation and past their cooldown, one step (HOT -> MIXED -> COLD; a
// one-unit revision HOT -> COLD), oldest access first, then largest hot
// bytes, until the estimated freed bytes bring usage to
// (high_watermark - eviction_ratio) x capacity. On relief it promotes the
// ones colder than they prefer, most recent access first, each only if its
// extra hot bytes still fit under the relief line — so a promotion never
// causes the pressure that would demote it again. A revision warmer than it
// prefers (e.g. HOT preferring COLD after a cancelled operation) converges.
#pragma once

#include <chrono>
#include <map>

#include "core/messages.hpp"

namespace weightd::actors {

struct reconciler_config {
  std::chrono::milliseconds interval{1000};
  size_t max_actions = 64;
  int64_t auto_cooldown_ms = 30'000;  // since the end of the revision's last operation
  // An IMPORTING revision with no event and no put into its group this long
  // is aborted (the revision checks its group's puts before it aborts).
  std::chrono::milliseconds import_abandon{5 * 60'000};
  // The object store's watermarks (node::start copies them from
  // object_store_config, their one home); set here only by pure tests.
  double high_watermark = 0.90;
  double eviction_ratio = 0.05;
};

/// What the object store says about the HOT tier for a round.
struct hot_tier_usage {
  uint64_t used_bytes = 0, reserved_bytes = 0, capacity_bytes = 0;  // capacity 0 = unlimited
  bool allocation_failed = false;  // a put spilled or a HOT reservation failed since the last round
};

/// The decisions of one round, at most config.max_actions, starting at the
/// revision after `cursor` so that none starves.
reconcile_report plan_reconcile(const std::map<events::revision_key, revision_view>& views,
                                const events::revision_key& cursor, int64_t now_ms,
                                const hot_tier_usage& hot, const reconciler_config& config);

/// Is the decision a maintenance tick (leases, drains, deletions, abandoned imports)?
bool is_tick(const reconcile_decision& d);

}  // namespace weightd::actors
