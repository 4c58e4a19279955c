#include "api/cli/format.hpp"
#include "events/time_text.hpp"

#include <google/protobuf/util/json_util.h>
#include <spdlog/fmt/chrono.h>
#include <spdlog/fmt/fmt.h>

#include <ctime>

#include "events/event_type.hpp"

namespace weightd::api {

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, units[unit]);
}

namespace {
google::protobuf::util::JsonPrintOptions json_options() {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  return options;
}
}  // namespace

std::string format_event_line(const events::v1::Envelope& e) {
  std::string payload;
  const auto* oneof = e.GetDescriptor()->FindOneofByName("payload");
  if (const auto* field = e.GetReflection()->GetOneofFieldDescriptor(e, oneof))
    google::protobuf::util::MessageToJsonString(e.GetReflection()->GetMessage(e, field),
                                                &payload, json_options());
  auto line = fmt::format("#{} {} {}#{} {} {}", e.global_seq(), events::utc_text(e.timestamp_ms()),
                          e.stream(), e.stream_seq(), events::event_type_name(e), payload);
  if (!e.principal().empty()) line += " principal=" + e.principal();
  if (!e.request_id().empty()) line += " request_id=" + e.request_id();
  return line;
}

std::string format_event_json(const events::v1::Envelope& e) {
  std::string out;
  google::protobuf::util::MessageToJsonString(e, &out, json_options());
  return out;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace weightd::api
