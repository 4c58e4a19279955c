#include "events/time_text.hpp"

#include <cstdio>
#include <ctime>

namespace weightd::events {

std::string utc_text(int64_t ms) {
  std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &utc);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", date, static_cast<int>(ms % 1000));
  return out;
}

}  // namespace weightd::events
