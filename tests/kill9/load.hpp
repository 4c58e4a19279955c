// The mixed load: one thread per load client, each driving its own
// revisions (import: BeginImport, payload Puts, manifest Put, CommitImport;
// AbortImport; leases; UpdatePolicy; Migrate; RemoveRevision) and its own
// ordinary objects (Put, Get, Remove) until told to stop, recording in its
// client_model every effect weightd acknowledged.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "kill9/model.hpp"

namespace weightd::kill9 {

/// What every load client of one cycle shares.
struct load_context {
  std::string address;
  std::atomic<bool> stop{false};  // set just before the SIGKILL
  /// The highest lease id seen before this incarnation of weightd started:
  /// every lease it grants must have a higher one (ids are never reused).
  uint64_t lease_id_floor = 0;
  std::atomic<uint64_t> highest_lease_id{0};
  uint64_t seed = 0;
};

/// Limits that keep the store's size bounded over any number of cycles.
struct load_limits {
  size_t live_revisions = 6;  // per client
  size_t objects = 12;        // per client
  size_t leases = 4;          // per client
};

/// Runs one client's load until ctx.stop; returns when its last call has an
/// answer (or failed because weightd is gone).
void run_load_client(client_model& model, load_context& ctx, const load_limits& limits,
                     uint64_t cycle);

/// Builds the payloads and manifest of a new revision (sizes from `rng_seed`).
revision_model plan_revision(client_model& model, uint64_t rng_seed);

}  // namespace weightd::kill9
