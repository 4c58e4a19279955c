// Enum values by the SPEC's short names, for every surface that prints them
// (weightctl's text and JSON, the daemon's metric labels).
#pragma once

#include <google/protobuf/descriptor.h>

#include <string>

namespace weightd::api {

/// The SPEC's short name of an enum value: "HOT" for RESIDENCY_HOT, "AUTO"
/// for MIGRATION_AUTO, "READY" for READY.
std::string short_enum_name(int value, const google::protobuf::EnumDescriptor* descriptor);

}  // namespace weightd::api
