#include "api/cli/format.hpp"

#include <algorithm>
#include "events/time_text.hpp"

#include <google/protobuf/util/json_util.h>
#include <spdlog/fmt/chrono.h>
#include <spdlog/fmt/fmt.h>

#include <chrono>
#include <ctime>

#include "api/common/json_output.hpp"

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

size_t column_width(size_t minimum, const std::vector<std::string>& cells) {
  size_t width = minimum;
  for (const auto& c : cells) width = std::max(width, c.size());
  return width;
}

std::string count_of(uint64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

int64_t now_epoch_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string format_span(int64_t ms) {
  uint64_t s = static_cast<uint64_t>(ms < 0 ? -ms : ms) / 1000;
  if (s < 120) return fmt::format("{} s", s);
  if (s < 120 * 60) return fmt::format("{} min", s / 60);
  if (s < 48 * 3600) return fmt::format("{} h", s / 3600);
  return fmt::format("{} d", s / 86400);
}

std::string format_time(int64_t ms, int64_t now_ms) {
  if (now_ms == 0) now_ms = now_epoch_ms();
  std::time_t seconds = static_cast<std::time_t>((ms >= 0 ? ms : ms - 999) / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char utc[32];
  std::strftime(utc, sizeof utc, "%Y-%m-%dT%H:%M:%SZ", &tm);
  int64_t delta = ms - now_ms;
  if (delta > -1000 && delta < 1000) return fmt::format("{} (now)", utc);
  return delta > 0 ? fmt::format("{} (in {})", utc, format_span(delta))
                   : fmt::format("{} ({} ago)", utc, format_span(delta));
}


std::string format_event_line(const events::v1::Envelope& e) {
  std::string payload;
  const auto* oneof = e.GetDescriptor()->FindOneofByName("payload");
  if (const auto* field = e.GetReflection()->GetOneofFieldDescriptor(e, oneof))
    payload = json_line(message_json(e.GetReflection()->GetMessage(e, field)));
  auto line = fmt::format("#{} {} {}#{} {} {}", e.global_seq(), events::utc_text(e.timestamp_ms()),
                          e.stream(), e.stream_seq(), events::event_type_name(e), payload);
  if (!e.principal().empty()) line += " principal=" + e.principal();
  if (!e.request_id().empty()) line += " request_id=" + e.request_id();
  return line;
}

std::string format_event_json(const events::v1::Envelope& e) {
  return json_line(message_json(e));
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
