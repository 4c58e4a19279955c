// How a client's text goes into a daemon log line (the change log's and the
// object store's alike).
#pragma once

#include <string>
#include <string_view>

namespace weightd::actors {

/// A value in double quotes, `"` and `\` escaped and control characters as
/// \xNN, so that one log line stays one line and its pairs stay parseable
/// whatever a client put in a holder or a reason.
inline std::string quote_value(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace weightd::actors
