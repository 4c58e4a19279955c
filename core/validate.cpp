#include "core/validate.hpp"

namespace weightd::actors {

status check_key(const char* field, const std::string& key) {
  if (key.empty()) return {errc::invalid_argument, std::string{field} + " is empty"};
  if (key.size() > kMaxKeyBytes)
    return {errc::invalid_argument, std::string{field} + " is " + std::to_string(key.size()) +
                                        " bytes; the limit is 4096"};
  return {};
}

status check_request_id(const std::string& request_id) {
  if (request_id.size() > kMaxRequestIdBytes)
    return {errc::invalid_argument, "request_id has " + std::to_string(request_id.size()) +
                                        " characters; the limit is 128"};
  for (char c : request_id)
    if (c < 0x21 || c > 0x7e)
      return {errc::invalid_argument,
              "request_id may hold only printable ASCII characters, no spaces"};
  return {};
}

status check_hex(const char* field, const std::string& value, size_t digits) {
  bool ok = value.size() == digits;
  for (char c : value) ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  if (!ok)
    return {errc::invalid_argument, std::string{field} + " must be " + std::to_string(digits) +
                                        " lowercase hex characters"};
  return {};
}

status check_ttl(uint64_t ttl_ms) {
  if (ttl_ms == 0 || ttl_ms > kMaxLeaseTtlMs)
    return {errc::invalid_argument,
            "ttl_ms must be within 1..86400000 (24 h), not " + std::to_string(ttl_ms)};
  return {};
}

}  // namespace weightd::actors
