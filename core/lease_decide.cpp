#include "core/lease_decide.hpp"

#include <algorithm>

#include "core/revision_decide.hpp"  // warmth, automatic_migration: an access promotion
#include "events/time_text.hpp"

namespace weightd::actors {

namespace v1 = events::v1;
using events::lease_record;
using events::revision_record;

namespace {

v1::Envelope lease_event(const revision_record& r, const decide_context& ctx,
                         const std::string& principal, const std::string& request_id) {
  return revision_envelope(r.id, ctx.now_ms, principal, request_id);
}

v1::Envelope revoked(const revision_record& r, uint64_t lease_id, const std::string& reason,
                     const decide_context& ctx, const std::string& principal,
                     const std::string& request_id) {
  auto e = lease_event(r, ctx, principal, request_id);
  auto* p = e.mutable_lease_revoked();
  *p->mutable_id() = r.id.to_proto();
  p->set_lease_id(lease_id);
  p->set_reason(reason);
  return e;
}

/// The delete itself: RemovalStarted without a drain (no lease may be live).
v1::Envelope start_delete(const revision_record& r, const decide_context& ctx) {
  auto e = lease_event(r, ctx, "", "");
  *e.mutable_removal_started()->mutable_id() = r.id.to_proto();
  e.mutable_removal_started()->set_request_digest(r.last_request_digest);
  return e;
}

}  // namespace

result<decision> decide_acquire(const revision_record* current, const acquire_lease& cmd,
                                const decide_context& ctx) {
  auto holder = cmd.holder;
  if (auto st = events::check_identity_part("holder", holder); !st.ok()) return st;
  auto name = "revision " + events::canonical_text(cmd.id);
  if (!current || current->availability == v1::DELETED)
    return status{errc::not_found, name + " does not exist"};
  if (current->availability != v1::READY)
    return status{errc::not_ready, name + " is " + v1::Availability_Name(current->availability) +
                                       "; leases are granted only on READY revisions"};
  if (current->retiring())
    return status{errc::not_ready, name + " retires (upsert claim '" + current->retired_by +
                                       "' replaced it with a higher generation); it grants no " +
                                       "new lease: read the new generation"};
  if (current->draining())
    return status{errc::not_ready, name + " is being removed (draining until " +
                                       events::utc_text(current->drain_deadline_ms) +
                                       "); it grants no new lease"};
  if (cmd.expected_generation && cmd.expected_generation != current->metadata_generation)
    return status{errc::stale_generation,
                  "expected_metadata_generation " + std::to_string(cmd.expected_generation) +
                      " is not current (" + name + " is at " +
                      std::to_string(current->metadata_generation) +
                      "); re-read the revision, or pass 0 for the current one"};
  decision d;
  if (const auto* held = lease_of_holder(*current, holder)) {
    if (held->live_at(ctx.now_ms)) return d;  // the holder's live lease, unchanged
    d.events.push_back(lease_expired_event(*current, held->id, ctx));
  }
  auto lease_id = ctx.next_lease_id();
  if (lease_id == 0)
    return status{errc::generation_exhausted,
                  "lease ids are exhausted: 2^64-1 were handed out and none is ever reused"};
  auto e = lease_event(*current, ctx, cmd.principal, cmd.request_id);
  auto* p = e.mutable_lease_granted();
  *p->mutable_id() = current->id.to_proto();
  p->set_lease_id(lease_id);
  p->set_holder(holder);
  p->set_expiry_ms(ctx.now_ms + static_cast<int64_t>(cmd.ttl_ms));
  d.events.push_back(std::move(e));
  // SPEC §4: a read of an AUTO revision colder than it prefers promotes it
  // (an event; the lease is granted at once and reads use whatever tier holds
  // the bytes) — when the extra hot bytes fit under the relief line; else
  // the reconciler promotes it once they do.
  const auto& policy = current->policy;
  auto logical = static_cast<double>(current->manifest.logical_bytes);
  double wanted = policy.preferred == v1::RESIDENCY_HOT ? logical : policy.mixed_hot_ratio * logical;
  double extra_hot = std::max(0.0, wanted - current->observed_hot_ratio * logical);
  if (policy.mode == v1::MIGRATION_AUTO && !current->operation_id &&
      warmth(current->residency) < warmth(policy.preferred) &&
      (policy.preferred != v1::RESIDENCY_MIXED || current->affinity_units >= 2) &&
      extra_hot <= static_cast<double>(ctx.promotion_headroom_bytes))
    if (auto e = automatic_migration(
            *current, policy.preferred, policy.mixed_hot_ratio,
            "access promotion: a lease was granted to '" + holder + "' while the revision was " +
                v1::Residency_Name(current->residency) + " and prefers " +
                v1::Residency_Name(policy.preferred),
            ctx))
      d.events.push_back(std::move(*e));
  return d;
}

result<decision> decide_renew(const revision_record& r, const renew_lease& cmd,
                              const decide_context& ctx) {
  auto it = r.leases.find(cmd.lease_id);
  if (it == r.leases.end())
    return status{errc::lease_expired,
                  lease_name(cmd.lease_id) + " has ended; acquire a new lease"};
  const auto& lease = it->second;
  if (!lease.live_at(ctx.now_ms))
    return status{errc::lease_expired, lease_name(cmd.lease_id) + " expired at " +
                                           events::utc_text(lease.expiry_ms) +
                                           "; an expired lease cannot be renewed, acquire a new one"};
  auto expiry = std::max(lease.expiry_ms, ctx.now_ms + static_cast<int64_t>(cmd.ttl_ms));
  if (expiry == lease.expiry_ms) return decision{};
  auto e = lease_event(r, ctx, cmd.principal, cmd.request_id);
  auto* p = e.mutable_lease_renewed();
  *p->mutable_id() = r.id.to_proto();
  p->set_lease_id(cmd.lease_id);
  p->set_expiry_ms(expiry);
  return decision{{std::move(e)}};
}

decision decide_release(const revision_record& r, const release_lease& cmd,
                        const decide_context& ctx) {
  if (!r.leases.count(cmd.lease_id)) return {};  // already ended: idempotent
  auto e = lease_event(r, ctx, cmd.principal, cmd.request_id);
  *e.mutable_lease_released()->mutable_id() = r.id.to_proto();
  e.mutable_lease_released()->set_lease_id(cmd.lease_id);
  return decision{{std::move(e)}};
}

result<decision> decide_revoke(const revision_record& r, const revoke_lease& cmd,
                               const decide_context& ctx) {
  if (!r.leases.count(cmd.lease_id))
    return status{errc::not_found, lease_name(cmd.lease_id) + " is not live (it has ended)"};
  auto reason = cmd.reason.empty() ? std::string{"revoked by an admin"} : cmd.reason;
  return decision{{revoked(r, cmd.lease_id, reason, ctx, cmd.principal, cmd.request_id)}};
}

decision decide_reconcile(const revision_record& r, const decide_context& ctx) {
  decision d;
  d.events = expire_lapsed(r, ctx);
  if (!r.draining()) return d;
  auto live = live_leases(r, ctx.now_ms);
  if (!live.empty()) {
    // Still draining; a retirement has no deadline: its leases renew until they end.
    if (r.drain_deadline_ms == 0 || ctx.now_ms < r.drain_deadline_ms) return d;
    for (const auto& l : live)
      d.events.push_back(revoked(r, l.id, "the drain deadline of RemoveRevision passed", ctx, "", ""));
  }
  d.events.push_back(start_delete(r, ctx));
  return d;
}

std::vector<v1::Envelope> recovery_lease_events(const events::revision_index& index,
                                                int64_t last_event_ms, int64_t now_ms,
                                                int64_t grace_ms) {
  std::vector<v1::Envelope> out;
  decide_context ctx;
  ctx.now_ms = now_ms;
  for (const auto& [id, r] : index.revisions)
    for (const auto& [lease_id, l] : r.leases) {
      if (l.expiry_ms < last_event_ms) {
        out.push_back(lease_expired_event(r, lease_id, ctx));
      } else if (l.expiry_ms < now_ms + grace_ms) {
        auto e = lease_event(r, ctx, "", "");
        auto* p = e.mutable_lease_renewed();
        *p->mutable_id() = r.id.to_proto();
        p->set_lease_id(lease_id);
        p->set_expiry_ms(now_ms + grace_ms);
        out.push_back(std::move(e));
      }
    }
  return out;
}

}  // namespace weightd::actors
