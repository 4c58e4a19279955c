#include "core/decision.hpp"

namespace weightd::actors {

namespace v1 = events::v1;

v1::Envelope revision_envelope(const events::revision_key& id, int64_t now_ms,
                               const std::string& principal, const std::string& request_id) {
  v1::Envelope e;
  e.set_stream(events::revision_stream(id));
  e.set_timestamp_ms(now_ms);
  e.set_principal(principal);
  e.set_request_id(request_id);
  return e;
}

}  // namespace weightd::actors
