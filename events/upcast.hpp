// Schema versions and upcasters (rule 2 of the evolution rules in events.proto).
//
// Every envelope is written with kSchemaVersion. When a change cannot be
// expressed by proto3 field defaults, bump kSchemaVersion and register an
// upcaster for the affected event type: a function that rewrites an envelope
// of version v into version v+1. The journal calls upcast() on everything it
// reads, so replay and live code only ever see the current schema.
#pragma once

#include <cstdint>

#include "events/events.pb.h"
#include "events/status.hpp"

namespace weightd::events {

using Envelope = v1::Envelope;

inline constexpr uint32_t kSchemaVersion = 1;

/// Brings `e` to kSchemaVersion. An envelope newer than this build is refused
/// (an older binary must not fold events it does not understand).
status upcast(Envelope& e);

}  // namespace weightd::events
