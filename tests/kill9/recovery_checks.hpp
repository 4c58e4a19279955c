// The checks after a restart: everything weightd acknowledged before the
// kill is there, nothing it acknowledged as gone came back, every call in
// flight at the kill went one way or the other (and the model now records
// which), lease ids keep growing, and no file in the tiers is unaccounted for.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "api/client/client.hpp"
#include "kill9/daemon_process.hpp"
#include "kill9/model.hpp"

namespace weightd::kill9 {

struct check_inputs {
  int64_t kill_ms = 0;                // wall clock when the SIGKILL was sent
  uint64_t highest_lease_id = 0;      // the highest lease id any reply showed so far
  store_dirs dirs;
  size_t read_back = 8;               // acknowledged objects read back in full, besides the in-flight ones
  std::string probe_holder;           // the holder of the lease the checks acquire
  uint64_t seed = 0;
};

struct check_report {
  std::vector<std::string> violations;
  uint64_t highest_lease_id = 0;  // including the leases found again and the probe's
  size_t revisions = 0, objects = 0, leases = 0, read_back = 0, tier_files = 0;
  size_t deleting = 0;  // revisions still DELETING (a removal the reconciler finishes)
  v1::StatusResponse status;  // weightd's Status after the checks (tier usage)
  /// How the calls in flight at the kill turned out: "landed" or "did not land", by kind.
  std::map<std::string, uint64_t> landed, not_landed;
};

/// Runs every check against the restarted daemon; updates `clients` (the
/// in-flight outcomes found, renewed leases, objects and revisions now
/// gone) and `tombstones` (revisions seen DELETED: they must stay so).
check_report check_after_restart(api::client& client, std::vector<client_model>& clients,
                                 std::set<std::string>& tombstones, const check_inputs& in);

}  // namespace weightd::kill9
