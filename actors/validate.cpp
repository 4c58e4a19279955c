#include "actors/validate.hpp"

namespace weightd::actors {

status check_identity_part(const char* field, std::string& value, const char* fallback) {
  if (value.empty() && fallback) value = fallback;
  if (value.empty()) return {errc::invalid_argument, std::string{field} + " is empty"};
  if (value.size() > kMaxIdentityPartBytes)
    return {errc::invalid_argument, std::string{field} + " is " + std::to_string(value.size()) +
                                        " bytes; the limit is 1024"};
  for (unsigned char c : value)
    if (c < 0x20 || c == 0x7f)
      return {errc::invalid_argument, std::string{field} + " contains a control character"};
  return {};
}

status check_key(const char* field, const std::string& key) {
  if (key.empty()) return {errc::invalid_argument, std::string{field} + " is empty"};
  if (key.size() > kMaxKeyBytes)
    return {errc::invalid_argument, std::string{field} + " is " + std::to_string(key.size()) +
                                        " bytes; the limit is 4096"};
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

}  // namespace weightd::actors
