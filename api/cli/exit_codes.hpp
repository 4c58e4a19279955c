// weightctl's exit codes: 0 success, 1 usage error, and 1 + the errc value for
// each domain error class, so scripts can tell them apart:
//   2 INVALID_ARGUMENT  3 NOT_FOUND  4 CONFLICT  5 STALE_GENERATION  6 NOT_READY
//   7 BUSY  8 LEASE_EXPIRED  9 POLICY_UNSATISFIABLE  10 GENERATION_EXHAUSTED
//   11 DURABILITY_FAILED  12 MANAGED_OBJECT  13 OBJECT_HAS_LEASE
//   14 OBJECT_ALREADY_EXISTS  15 NO_AVAILABLE_SPACE  16 UNAUTHENTICATED
//   17 PERMISSION_DENIED  18 DATA_LOSS  19 INTERNAL  20 RESOURCE_EXHAUSTED
//   21 UNIMPLEMENTED  22 NOT_LEADER
// and, outside the error classes a daemon answers with:
//   69 the daemon is unreachable (nothing listens at --address/WEIGHTD_ADDRESS,
//      or it did not answer in time): sysexits' EX_UNAVAILABLE, far from the
//      classes so that a new class never takes it.
//   74 a local file weightctl was told to write could not be written (the
//      message names the path and the OS's error): sysexits' EX_IOERR.
//  130 interrupted (SIGINT, SIGTERM) during a transfer or migrate --wait.
// The README's exit-code table lists the same.
#pragma once

#include "events/status.hpp"

namespace weightd::api {

inline constexpr int kExitUsage = 1;
inline constexpr int kExitDaemonUnreachable = 69;
inline constexpr int kExitLocalFile = 74;
inline constexpr int kExitInterrupted = 130;  // 128 + SIGINT, as shells do

inline int exit_code(errc code) {
  return code == errc::ok ? 0 : 1 + static_cast<int>(code);
}

}  // namespace weightd::api
