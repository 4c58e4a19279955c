#include "api/common/enum_names.hpp"

namespace weightd::api {

std::string short_enum_name(int value, const google::protobuf::EnumDescriptor* d) {
  const auto* v = d->FindValueByNumber(value);
  if (!v) return std::to_string(value);
  auto name = v->name();
  for (const char* prefix : {"RESIDENCY_", "MIGRATION_", "TIER_", "DATA_TYPE_"})
    if (name.rfind(prefix, 0) == 0) return name.substr(std::string(prefix).size());
  return name;
}

}  // namespace weightd::api
