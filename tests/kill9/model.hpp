// What the kill -9 harness knows about the store: every effect weightd
// acknowledged (an OK reply), and what was in flight when it was killed.
//
// Each load client owns its own revisions, leases and objects (nobody else
// touches them), so one client's model is a sequential history: the state of
// an entity is known exactly, or — after a call whose reply never came — one
// of two states (before or after that call). The checks after a restart
// accept either of the two and then record which one it was, so the model is
// exact again for the next cycle.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/weightd.pb.h"
#include "events/identity.hpp"
#include "events/status.hpp"

namespace weightd::kill9 {

namespace v1 = weightd::v1;
namespace ev1 = weightd::events::v1;

// ------------------------------------------------------------------- bytes

/// An object's bytes, as a recipe: `size` bytes from the generator seeded
/// with `seed` (the harness never keeps the bytes themselves), or `literal`
/// (a manifest). sha256 is what the bytes hash to.
struct blob {
  uint64_t size = 0;
  uint64_t seed = 0;
  std::string literal;
  std::string sha256;
};

blob generated_blob(uint64_t size, uint64_t seed);
blob literal_blob(std::string bytes);
/// The bytes the recipe stands for.
std::string bytes_of(const blob& b);

// ------------------------------------------------------------- the replies

/// How a reply counts: acknowledged (OK: the effect must survive), rejected
/// (weightd answered with a domain error: no effect), or unknown (no answer
/// from weightd — transport failure, deadline, DURABILITY_FAILED, INTERNAL:
/// the effect may or may not have happened).
enum class reply { acknowledged, rejected, unknown };
reply classify(const status& st);

/// Tallies of operations by kind ("put_object", "acquire_lease", ...).
struct op_tally {
  std::map<std::string, uint64_t> acknowledged, rejected, unknown_while_alive, in_flight_at_kill;
  void merge(const op_tally& other);
  static uint64_t total(const std::map<std::string, uint64_t>& by_kind);
};

/// "put_object 12, acquire_lease 3" (kinds with a count only).
std::string format_counts(const std::map<std::string, uint64_t>& by_kind);

// --------------------------------------------------------------- entities

/// A put of one object, as far as the harness knows.
enum class put_state { not_sent, in_flight, acknowledged };

/// A member of a revision's payload group: a payload or the manifest.
struct member {
  std::string key;
  std::string affinity;  // "" for the manifest
  blob bytes;
  put_state state = put_state::not_sent;
};

enum class revision_stage {
  begin_in_flight,   // BeginImport sent, no reply: absent or IMPORTING
  importing,         // BeginImport acknowledged
  commit_in_flight,  // IMPORTING or READY
  ready,             // CommitImport acknowledged
  remove_in_flight,  // READY or DELETING/DELETED
  abort_in_flight,   // IMPORTING or DELETING/DELETED
  deleting,          // RemoveRevision or AbortImport acknowledged: DELETING or DELETED
};
const char* stage_name(revision_stage s);

struct revision_model {
  events::revision_key id;
  std::string text;  // canonical text, the key everything else uses
  revision_stage stage = revision_stage::begin_in_flight;
  std::vector<member> payloads;
  member manifest;
  uint64_t generation = 0;  // the highest metadata_generation weightd acknowledged or showed
  ev1::Policy policy;       // as the last acknowledged BeginImport/UpdatePolicy left it
  std::optional<ev1::Policy> policy_in_flight;  // an UpdatePolicy without a reply
  bool requested_policy = false;                // BeginImport named a policy
  bool interrupted = false;                     // was IMPORTING when weightd was killed

  bool live() const { return stage != revision_stage::deleting; }
  bool settled() const {  // no call without a reply: the client may use it
    if (policy_in_flight) return false;
    for (const auto& m : payloads)
      if (m.state == put_state::in_flight) return false;
    return manifest.state != put_state::in_flight && stage != revision_stage::begin_in_flight &&
           stage != revision_stage::commit_in_flight && stage != revision_stage::remove_in_flight &&
           stage != revision_stage::abort_in_flight;
  }
  uint64_t logical_bytes() const;
};

enum class lease_stage {
  acquire_in_flight,  // no id known: found again by its holder (unique per acquire)
  live,               // acknowledged; expiry_ms from the last acknowledged acquire/renew
  release_in_flight,  // live or gone
};

struct lease_model {
  uint64_t id = 0;
  std::string holder;
  std::string revision;  // canonical text
  lease_stage stage = lease_stage::live;
  int64_t expiry_ms = 0;
};

enum class object_stage {
  put_in_flight,     // absent or present with these bytes
  present,           // Put acknowledged
  remove_in_flight,  // present or absent
  removed,           // Remove acknowledged: must stay absent
};

/// An ordinary (unmanaged) object. HOT ones are hard-pinned and COLD ones
/// have no HOT replica, so eviction (which deletes an unpinned HOT-only
/// object by design, SPEC §2) never removes one behind the harness's back.
struct plain_object {
  std::string key;
  blob bytes;
  ev1::Tier tier = ev1::TIER_HOT;
  object_stage stage = object_stage::put_in_flight;
};

/// Everything one load client did that the daemon must remember.
struct client_model {
  int index = 0;
  uint64_t next_name = 0;  // for unique resource names, keys and lease holders
  // Lists: the load keeps references to entries while it adds others.
  std::list<revision_model> revisions;
  std::list<lease_model> leases;
  std::list<plain_object> objects;
  op_tally tally;
  std::vector<std::string> violations;

  revision_model* find_revision(const std::string& text);
};

/// Namespace of every revision the harness imports, prefix of its objects.
inline constexpr const char* kNamespace = "kill9";
inline constexpr const char* kPlainPrefix = "plain/";
inline constexpr const char* kTenant = "default";

}  // namespace weightd::kill9
