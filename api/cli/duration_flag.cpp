#include "api/cli/duration_flag.hpp"

#include "api/common/units.hpp"

namespace weightd::api {

result<uint64_t> parse_duration_ms(const std::string& text, const std::string& flag) {
  auto d = parse_duration(text);
  if (!d) return status{errc::invalid_argument, flag + " " + d.error().message()};
  return static_cast<uint64_t>(d->count());
}

}  // namespace weightd::api
