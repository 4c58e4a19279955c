// weightctl's version: the project's (CMake's PROJECT_VERSION, given to this
// library as WEIGHTCTL_VERSION), "dev" in a build that does not pass it.
#pragma once

namespace weightd::api {

const char* weightctl_version();

}  // namespace weightd::api
