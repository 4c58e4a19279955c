// What a record's leases say now (SPEC §4 Leases): which are live, who
// holds them, the BUSY text naming them, and the events that end the lapsed
// ones. Read by the lease decisions (lease_decide.hpp) and by those of the
// revision and the upsert that a live lease blocks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/decision.hpp"
#include "events/revision_fold.hpp"

namespace weightd::actors {

/// "lease 7".
std::string lease_name(uint64_t id);

/// The holder's lease in the fold (live or lapsed), or null.
const events::lease_record* lease_of_holder(const events::revision_record& r,
                                            const std::string& holder);

/// Leases live at now_ms, by id.
std::vector<events::lease_record> live_leases(const events::revision_record& r, int64_t now_ms);

/// LeaseExpired events for every lapsed lease of the record.
std::vector<events::v1::Envelope> expire_lapsed(const events::revision_record& r,
                                                const decide_context& ctx);

/// What BUSY says about the leases that block a removal: holders, ids and
/// the nearest expiry.
std::string lease_blockers(const events::revision_record& r, int64_t now_ms);

/// The LeaseExpired event of one lease.
events::v1::Envelope lease_expired_event(const events::revision_record& r, uint64_t lease_id,
                                         const decide_context& ctx);

}  // namespace weightd::actors
