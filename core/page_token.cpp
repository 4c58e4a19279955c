#include "core/page_token.hpp"

#include <vector>

namespace weightd::actors {

std::string page_token(const events::revision_key& k) {
  auto raw = events::length_prefixed(k.resource) + events::length_prefixed(k.revision) +
             events::length_prefixed(std::to_string(k.generation));
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : raw) {
    hex += digits[c >> 4];
    hex += digits[c & 0xf];
  }
  return hex;
}

result<events::revision_key> parse_page_token(const std::string& token, events::revision_key base) {
  auto bad = status{errc::invalid_argument, "page_token is not one this server handed out"};
  if (token.size() % 2) return bad;
  std::string raw;
  for (size_t i = 0; i < token.size(); i += 2) {
    auto nibble = [](char c) {
      return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    };
    int hi = nibble(token[i]), lo = nibble(token[i + 1]);
    if (hi < 0 || lo < 0) return bad;
    raw += static_cast<char>(hi * 16 + lo);
  }
  std::vector<std::string> parts;
  for (size_t at = 0; at < raw.size() && parts.size() < 3;) {
    auto colon = raw.find(':', at);
    if (colon == std::string::npos) return bad;
    auto len = events::parse_decimal(raw.substr(at, colon - at));
    if (!len || *len > raw.size() || colon + 1 + *len + 1 > raw.size()) return bad;
    parts.push_back(raw.substr(colon + 1, *len));
    at = colon + 1 + *len + 1;
  }
  if (parts.size() != 3) return bad;
  base.resource = parts[0];
  base.revision = parts[1];
  auto generation = events::parse_decimal(parts[2]);
  if (!generation) return bad;
  base.generation = *generation;
  return base;
}

}  // namespace weightd::actors
