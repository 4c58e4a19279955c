// What every decide function shares: the context it decides in and the
// decision it returns (events to persist, or none: reply as is).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "events/events.pb.h"
#include "events/identity.hpp"
#include "events/revision_fold.hpp"

namespace weightd::actors {

struct decide_context {
  int64_t now_ms = 0;
  events::policy default_policy;            // when a BeginImport names none
  std::function<uint64_t()> next_operation_id;  // monotonic, never reused; 0 = exhausted
  std::function<uint64_t()> next_lease_id;      // monotonic, never reused; 0 = exhausted
  // Hot bytes an access promotion may add (SPEC §4: it starts only when its
  // extra hot bytes fit under the relief line); INT64_MAX: no limit known.
  int64_t promotion_headroom_bytes = INT64_MAX;
};

/// What a command decided: events to persist (all or none), or none at all —
/// then the reply is the current record unchanged (an idempotent retry).
struct decision {
  std::vector<events::v1::Envelope> events;
  bool changes() const { return !events.empty(); }
};

/// The envelope of an event of revision `id`, stamped with the request.
events::v1::Envelope revision_envelope(const events::revision_key& id, int64_t now_ms,
                                       const std::string& principal,
                                       const std::string& request_id);

}  // namespace weightd::actors
