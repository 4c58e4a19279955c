// Names of event types, as used in filters (`weightctl journal dump --type`)
// and logs: the oneof field name of the payload, e.g. "object_put".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "events/events.pb.h"

namespace weightd::events {

/// "object_put", "lease_granted", ...; "none" for an envelope without payload.
std::string event_type_name(const v1::Envelope& e);

/// Every known event type name, in field-number order.
std::vector<std::string> all_event_type_names();

/// True when `name` is a known event type name.
bool is_event_type_name(std::string_view name);

}  // namespace weightd::events
