#include "events/event_type.hpp"

namespace weightd::events {

namespace {
const google::protobuf::OneofDescriptor* payload_oneof() {
  return v1::Envelope::descriptor()->FindOneofByName("payload");
}
}  // namespace

std::string event_type_name(const v1::Envelope& e) {
  const auto* field = e.GetReflection()->GetOneofFieldDescriptor(e, payload_oneof());
  return field ? field->name() : "none";
}

std::vector<std::string> all_event_type_names() {
  std::vector<std::string> names;
  const auto* oneof = payload_oneof();
  for (int i = 0; i < oneof->field_count(); ++i) names.push_back(oneof->field(i)->name());
  return names;
}

bool is_event_type_name(std::string_view name) {
  const auto* oneof = payload_oneof();
  for (int i = 0; i < oneof->field_count(); ++i)
    if (oneof->field(i)->name() == name) return true;
  return false;
}

}  // namespace weightd::events
