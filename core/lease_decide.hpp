// Leases (SPEC §4) as decisions: pure functions of (record, command, now),
// like core/revision_decide.hpp. A lease is *live* while it is in the fold and
// its expiry lies ahead; one past its expiry protects nothing even before
// the reconciler writes its LeaseExpired event. The command's fields were
// checked at the boundary (validate.hpp's check_command: ttl_ms).
#pragma once

#include "core/decision.hpp"
#include "core/lease_facts.hpp"
#include "core/messages.hpp"

namespace weightd::actors {

/// AcquireLease: the holder's live lease comes back unchanged (no events);
/// otherwise a grant, preceded by the expiry of the holder's lapsed lease.
result<decision> decide_acquire(const events::revision_record* current, const acquire_lease& cmd,
                                const decide_context& ctx);

/// RenewLease: expiry = max(current, now + ttl); a lapsed lease is LEASE_EXPIRED.
result<decision> decide_renew(const events::revision_record& r, const renew_lease& cmd,
                              const decide_context& ctx);

/// ReleaseLease: idempotent; an ended lease needs no event.
decision decide_release(const events::revision_record& r, const release_lease& cmd,
                        const decide_context& ctx);

/// RevokeLease: ends a lease now; NOT_FOUND when it is not in the fold.
result<decision> decide_revoke(const events::revision_record& r, const revoke_lease& cmd,
                               const decide_context& ctx);

/// One reconciler step for one revision: lapsed leases expire; a drain whose
/// leases are gone starts the delete, and at its deadline the remaining
/// leases are revoked first.
decision decide_reconcile(const events::revision_record& r, const decide_context& ctx);

/// At startup (SPEC §6): a lease that was live at the crash — its expiry not
/// before the last event the old incarnation wrote — is extended to at least
/// now + grace so its holder can renew; one that had lapsed before expires.
std::vector<events::v1::Envelope> recovery_lease_events(const events::revision_index& index,
                                                        int64_t last_event_ms, int64_t now_ms,
                                                        int64_t grace_ms);

}  // namespace weightd::actors
