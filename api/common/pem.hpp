// A PEM file (TLS certificate, key or CA) as text, for the server's and the
// client's credentials; an unreadable or empty file is an error naming `flag`.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include "events/status.hpp"

namespace weightd::api {

inline result<std::string> read_pem_file(const std::string& path, const char* flag) {
  std::ifstream in(path);
  std::stringstream text;
  if (in) text << in.rdbuf();
  if (!in || text.str().empty())
    return status{errc::invalid_argument, std::string{flag} + " " + path + " cannot be read"};
  return text.str();
}

}  // namespace weightd::api
