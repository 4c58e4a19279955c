#include "api/cli/duration_flag.hpp"

#include <cctype>
#include <limits>
#include <utility>

namespace weightd::api {

result<uint64_t> parse_duration_ms(const std::string& text, const std::string& flag) {
  auto bad = [&] {
    return status{errc::invalid_argument,
                  flag + " must be a duration like 250ms, 30s, 5m, 1h or 2d (a plain number is "
                         "milliseconds), not '" + text + "'"};
  };
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 18) return bad();
  uint64_t n = std::stoull(text.substr(0, digits));
  auto unit = text.substr(digits);
  static const std::pair<const char*, uint64_t> units[] = {
      {"", 1}, {"ms", 1}, {"s", 1000}, {"m", 60'000}, {"min", 60'000}, {"h", 3'600'000},
      {"d", 86'400'000}};
  for (const auto& [name, scale] : units)
    if (unit == name) {
      if (n > std::numeric_limits<uint64_t>::max() / scale) return bad();
      return n * scale;
    }
  return bad();
}

}  // namespace weightd::api
