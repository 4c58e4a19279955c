#include "actors/validate.hpp"

namespace weightd::actors {

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
