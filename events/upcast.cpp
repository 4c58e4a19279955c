#include "events/upcast.hpp"

#include <functional>
#include <map>
#include <string>

namespace weightd::events {
namespace {

/// One upcaster per (from_version, payload case). Empty while the schema is
/// at version 1; the lookup below is what later versions plug into.
using upcaster = std::function<void(Envelope&)>;
const std::map<std::pair<uint32_t, int>, upcaster>& upcasters() {
  static const std::map<std::pair<uint32_t, int>, upcaster> table{};
  return table;
}

}  // namespace

status upcast(Envelope& e) {
  // Version 0 means "field not set": such envelopes were written as version 1.
  if (e.schema_version() == 0) e.set_schema_version(1);
  if (e.schema_version() > kSchemaVersion)
    return {errc::internal,
            "event seq " + std::to_string(e.global_seq()) + " has schema version " +
                std::to_string(e.schema_version()) + " but this build reads up to " +
                std::to_string(kSchemaVersion) + "; upgrade weightd/weightctl"};
  while (e.schema_version() < kSchemaVersion) {
    auto it = upcasters().find({e.schema_version(), static_cast<int>(e.payload_case())});
    if (it != upcasters().end()) it->second(e);
    e.set_schema_version(e.schema_version() + 1);
  }
  return {};
}

}  // namespace weightd::events
