#include "api/common/enum_names.hpp"

namespace weightd::api {

namespace {

/// What every value of `d` begins with, up to and including an underscore
/// ("RESIDENCY_", "CHECKSUM_"); "" when the values share none (Availability).
std::string common_prefix(const google::protobuf::EnumDescriptor* d) {
  if (d->value_count() < 2) return "";
  std::string prefix = d->value(0)->name();
  for (int i = 1; i < d->value_count(); ++i) {
    const auto& name = d->value(i)->name();
    size_t n = 0;
    while (n < prefix.size() && n < name.size() && prefix[n] == name[n]) ++n;
    prefix.resize(n);
  }
  auto underscore = prefix.rfind('_');
  return underscore == std::string::npos ? "" : prefix.substr(0, underscore + 1);
}

}  // namespace

std::string short_enum_name(int value, const google::protobuf::EnumDescriptor* d) {
  const auto* v = d->FindValueByNumber(value);
  if (!v) return std::to_string(value);
  // One rule for every enum, so that no list of prefixes can miss one.
  return v->name().substr(common_prefix(d).size());
}

}  // namespace weightd::api
