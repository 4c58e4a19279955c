#include "api/cli/cli_version.hpp"

#ifndef WEIGHTCTL_VERSION
#define WEIGHTCTL_VERSION "dev"
#endif

namespace weightd::api {

const char* weightctl_version() { return WEIGHTCTL_VERSION; }

}  // namespace weightd::api
