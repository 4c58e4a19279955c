// What weightd's components tell each other: the commands, replies and
// views that cross an actor edge, as plain structs without CAF (the typed
// interfaces that carry them are in actors/actors.hpp). The decisions of
// core/ take and return these; weightctl and the embedding facade use them
// without an actor system.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "events/events.pb.h"
#include "events/revision_fold.hpp"
#include "events/state.hpp"
#include "events/status.hpp"
#include "persistence/tier_store.hpp"

namespace weightd::actors {

// ------------------------------------------------------------- messages

/// Events to append as one atomic unit. The reply carries the same events as
/// committed: global_seq, stream_seq, writer_id and schema_version filled in,
/// ready to be folded with evolve() exactly as replay will fold them.
struct event_batch {
  std::vector<events::v1::Envelope> events;
};

/// Counters of the journal writer (metrics, tests, benchmarks).
struct journal_stats {
  uint64_t commits = 0;          // successful transactions
  uint64_t events = 0;           // events in them
  uint64_t appends = 0;          // append requests answered with success
  uint64_t failed_appends = 0;   // append requests answered with an error
  uint64_t highest_seq = 0;
  uint64_t last_commit_us = 0;   // duration of the last commit (fsync included)
  uint64_t total_commit_us = 0;
  std::vector<uint64_t> recent_batch_sizes;  // appends per commit, newest last (<= 1024)
  std::string refusing_writes;   // why the journal refuses writes until a restart ("" = it does not)
};

/// Begins a put: what the client announces before streaming bytes.
struct put_request {
  std::string tenant;  // "" = "default"
  std::string key;     // 1..4096 bytes, any bytes
  events::v1::DataType data_type = events::v1::DATA_TYPE_GENERAL;
  std::string group_id;
  std::string affinity_id;
  uint64_t size = 0;
  events::v1::Tier tier = events::v1::TIER_UNSPECIFIED;  // = HOT
  bool hard_pin = false;
  /// The client's checksum of the bytes (lowercase hex), verified at the end.
  std::string expected_checksum;
  events::v1::ChecksumAlgorithm expected_algorithm = events::v1::CHECKSUM_XXH3_64;
  bool want_sha256 = false;  // always computed for METADATA objects
  std::string principal;
};

/// Where to stream a put's bytes; hand the digest back with the put id.
struct put_ticket {
  uint64_t put_id = 0;
  std::string temp_path;
  bool want_sha256 = false;
  uint64_t enospc_after_bytes = 0;  // test hook of the tier (0 = off)
};

/// An object's metadata plus what only memory knows.
struct object_info {
  events::object_record record;
  int64_t last_access_ms = 0;
  int64_t read_lease_expiry_ms = 0;  // 0 = no live read lease
  std::string managed_by;            // the owning revision, "" = not managed
};

/// A read: where the bytes are (HOT preferred) under a short read lease.
struct read_grant {
  object_info info;
  events::v1::Tier tier = events::v1::TIER_HOT;
  std::string path;
};

struct remove_outcome {
  std::string key;
  status result;
};

struct batch_removal {
  std::vector<remove_outcome> results;  // in request order, duplicates dropped
};

struct removal_summary {
  std::vector<std::string> removed_keys;
  uint64_t skipped_managed = 0;
  uint64_t skipped_leased = 0;
  uint64_t skipped_busy = 0;
};

struct eviction_summary {
  uint64_t evicted_objects = 0;
  uint64_t freed_bytes = 0;
  uint64_t skipped_managed = 0;
  uint64_t skipped_pinned = 0;
  uint64_t skipped_leased = 0;
  uint64_t hot_used_bytes = 0;  // after the eviction
};

/// Every member of a payload group as the index knows it, plus the records of
/// asked-for keys that exist outside the group.
struct group_snapshot {
  std::string tenant;
  std::string group_id;
  std::vector<events::object_record> members;  // ordered by key
  std::map<std::string, events::object_record> outside;
  int64_t last_put_ms = 0;  // the newest member's creation, or now while a put into the group runs
};

struct object_page {
  std::vector<object_info> objects;
  std::string next_start_after;  // "" at the end
};

/// The guard's view of a payload group owned by a weight revision.
struct managed_group {
  std::string owner;       // canonical revision id, for messages
  bool importing = false;  // generic removal of members is allowed while importing
  /// The owner's preferred residency: while it imports, a member put without
  /// a tier lands in COLD when this is COLD (SPEC §2 Spill).
  events::v1::Residency preferred = events::v1::RESIDENCY_HOT;
};

struct tier_usage {
  uint64_t used_bytes = 0;      // committed replicas
  uint64_t reserved_bytes = 0;  // puts and copies in flight
  uint64_t capacity_bytes = 0;  // 0 = unlimited
};

/// Payload groups that lost a replica (LOST at a restart, CORRUPT by the
/// scrub): their revisions look at their replicas again.
struct damaged_groups {
  std::vector<events::group_ref> groups;
};

/// A replica the scrub reads next, and then its verdict.
struct scrub_item {
  events::object_ref ref;
  events::v1::Tier tier = events::v1::TIER_HOT;
  uint64_t size = 0;
  std::string checksum;  // xxh3 as the index has it
  bool missing = false, corrupt = false;  // the verdict (filled by the scrubber)
};
struct scrub_batch {
  std::vector<scrub_item> items;
};

struct store_stats {
  tier_usage hot;
  tier_usage cold;
  uint64_t objects = 0;
  std::map<std::string, uint64_t> guard_skips;  // by operation: evict, remove_all
  uint64_t evicted_objects = 0;
  uint64_t evicted_bytes = 0;
  uint64_t reclaimed_puts = 0;
  uint64_t spills = 0;                   // puts of importing members written to COLD (SPEC §2)
  uint64_t hot_allocation_failures = 0;  // HOT reservations refused even after eviction
  uint64_t copied_to_hot_bytes = 0;      // replica copies (migrations, repairs) into HOT
  uint64_t copied_to_cold_bytes = 0;     // ... and into COLD
  uint64_t scrub_bytes = 0;              // bytes the scrub re-read (SPEC §4 Scrub)
  uint64_t scrub_corrupt = 0;            // replicas it dropped as CORRUPT or LOST
};

// ------------------------------------------------------- revision commands
// Every mutation carries expected_generation (SPEC §4), the principal and the
// client's request id (both recorded in the journal envelope).

struct begin_import {
  events::revision_key id;
  std::string payload_group_id;  // "" = the server fills the canonical one
  uint64_t expected_payload_count = 0;
  uint64_t expected_logical_bytes = 0;
  bool has_policy = false;
  events::policy policy;
  uint64_t affinity_count = 0;  // 0 = not given
  std::string principal, request_id;
  /// An upsert's claim events, committed in the same transaction as the
  /// import's own (never without them: a no-op begin is CONFLICT then).
  std::vector<events::v1::Envelope> along = {};
};

struct commit_import {
  events::revision_key id;
  uint64_t expected_generation = 0;
  events::manifest_ref manifest;
  std::vector<std::string> payload_keys;
  std::string principal, request_id;
  std::vector<events::v1::Envelope> along = {};  // as for begin_import
};

struct abort_import {
  events::revision_key id;
  uint64_t expected_generation = 0;
  std::vector<std::string> keys_to_remove;
  std::string principal, request_id;
};

struct update_policy {
  events::revision_key id;
  uint64_t expected_generation = 0;
  events::policy policy;
  std::string principal, request_id;
};

struct remove_revision {
  events::revision_key id;
  uint64_t expected_generation = 0;
  int64_t drain_timeout_ms = 0;
  std::string principal, request_id;
};

/// An upsert's claim retires its base (SPEC §4 Lineage replacement): no new
/// leases, UpdatePolicy/Migrate BUSY, deleted once its leases end. A running
/// operation is cancelled (the revision is going away).
struct retire_revision {
  events::revision_key id;
  std::string upsert_request_id;  // the claim
  uint64_t target_generation = 0;
  std::string principal, request_id;
};

struct get_revision {
  events::revision_key id;
  bool include_hidden = false;
};

struct list_revisions {
  std::string tenant = "default";
  std::string ns = "default";
  std::string resource;  // "" = every resource
  std::vector<events::v1::Availability> states;  // empty = READY and DEGRADED
  std::string page_token;
  uint32_t limit = 0;  // 0 = 100, at most 1000
};

/// RevisionView (SPEC §3): the record plus lease facts.
struct revision_view {
  events::revision_record record;
  uint32_t active_lease_count = 0;
  int64_t nearest_lease_expiry_ms = 0;
  // The active one. Shared, not inline: the registry holds a view of every
  // revision, and few have an operation (an inline optional cost ~300 bytes
  // a revision at 100 000 revisions).
  std::shared_ptr<const events::operation_record> operation;
  int64_t last_operation_end_ms = 0;  // when its last operation ended (the AUTO cooldown)
  // Only in the reply to a command that carried lineage events `along`:
  // those events as the journal committed them (the lineage folds these).
  std::vector<events::v1::Envelope> committed_along;
};

struct refused_key {
  std::string key;
  std::string reason;
};

/// What AbortImport and RemoveRevision return.
struct removal_result {
  revision_view view;
  std::vector<std::string> removed_keys;  // removed or already absent, manifest last
  std::vector<refused_key> refused_keys;
};

struct revision_page {
  std::vector<revision_view> revisions;
  std::string next_page_token;  // "" at the end
};

/// The registry's counters (metrics).
struct registry_stats {
  std::map<std::string, uint64_t> revisions;  // by availability: "READY" -> n
  std::map<std::string, uint64_t> residency;  // of READY/DEGRADED revisions: "HOT" -> n
  std::map<std::string, uint64_t> operations; // by state: "RUNNING" -> n
  int64_t oldest_running_operation_ms = 0;    // started_at of the oldest RUNNING one (0 = none)
  uint64_t live_leases = 0;                   // leases in the fold, over every revision
};

// ------------------------------------------------------ lineage commands
// SPEC §4 Lineage replacement (upsert): the lineage's actor runs them one
// after another (lineage.hpp).

struct begin_upsert {
  events::revision_key base;
  uint64_t expected_generation = 0;  // the base's metadata generation
  uint64_t target_generation = 0;
  events::v1::UpsertMode mode = events::v1::UPSERT_PUT_FIRST;
  begin_import target;  // the target's import parameters (its id: base's lineage, target generation)
  std::string principal, request_id;
};

struct commit_upsert {
  commit_import commit;  // the target's CommitImport (its id names the target)
  std::string principal, request_id;
};

struct abort_upsert {
  events::revision_key base;
  std::string principal, request_id;
};

struct get_lineage {
  events::revision_key lineage;  // generation ignored
};

/// GetLineage: the watermark and the newest claim.
struct lineage_view {
  events::revision_key lineage;
  uint64_t watermark = 0;
  std::optional<events::upsert_claim> claim;
};

// ------------------------------------------------------ residency commands
// SPEC §4 Migrate, GetOperation, CancelOperation, Reconciler.

struct migrate_revision {
  events::revision_key id;
  uint64_t expected_generation = 0;
  events::v1::Residency target = events::v1::RESIDENCY_UNKNOWN;  // HOT, COLD or MIXED
  double mixed_hot_ratio = 0;  // MIXED: 0 = the policy's ratio
  std::string principal, request_id;
};

struct get_operation {
  uint64_t operation_id = 0;
  std::string caller_tenant = "";  // set: a lease or operation of another tenant is NOT_FOUND
};

struct cancel_operation {
  uint64_t operation_id = 0;
  std::string principal, request_id;
  std::string caller_tenant = "";  // set: a lease or operation of another tenant is NOT_FOUND
};

/// The reconciler's decision for one revision, taken by the revision itself
/// after it re-checked the rule against its current record.
struct auto_migrate {
  events::revision_key id;
  events::v1::Residency target = events::v1::RESIDENCY_UNKNOWN;
  double mixed_hot_ratio = 0;
  std::string reason;  // recorded in the OperationStarted event
};

struct reconcile_request {
  bool dry_run = false;  // report the next round's decisions without taking them
};

/// One decision of a reconciler round and why (which rule, which numbers).
struct reconcile_decision {
  events::revision_key id;
  std::string action;  // expire_leases, finish_drain, continue_deletion, run_operation,
                       // abort_abandoned, demote, promote, converge
  events::v1::Residency target = events::v1::RESIDENCY_UNKNOWN;
  std::string reason;
};

struct reconcile_report {
  std::vector<reconcile_decision> decisions;
  bool pressure = false, relief = false;
  uint64_t hot_used_bytes = 0, hot_capacity_bytes = 0;
  // What an access promotion may add to HOT now: the relief line minus HOT
  // used and reserved (0 when at or past it); INT64_MAX for an unlimited tier.
  int64_t promotion_headroom_bytes = INT64_MAX;
};

// ---------------------------------------------------------- lease commands
// SPEC §4 Leases. Renew, release and revoke name only the lease id: the
// registry knows which revision holds it and routes them there.

struct acquire_lease {
  events::revision_key id;
  uint64_t expected_generation = 0;  // 0 = current
  std::string holder;                // 1..1024 bytes, no control characters
  uint64_t ttl_ms = 0;               // 1..86 400 000
  std::string principal, request_id;
};

struct renew_lease {
  uint64_t lease_id = 0;
  uint64_t ttl_ms = 0;
  std::string principal, request_id;
  std::string caller_tenant = "";  // set: a lease or operation of another tenant is NOT_FOUND
};

struct release_lease {
  uint64_t lease_id = 0;
  std::string principal, request_id;
  std::string caller_tenant = "";  // set: a lease or operation of another tenant is NOT_FOUND
};

struct revoke_lease {
  uint64_t lease_id = 0;
  std::string reason;  // recorded in the event
  std::string principal, request_id;
  std::string caller_tenant = "";  // set: a lease or operation of another tenant is NOT_FOUND
};

struct list_leases {
  events::revision_key id;
};

/// A lease and the revision it protects.
struct lease_view {
  events::revision_key id;
  events::lease_record lease;
};

struct lease_list {
  std::vector<lease_view> leases;  // live ones, by id
};

// ------------------------------------------------ history, watch, local reads
// SPEC §4 History, Watch, Local reads.

/// History: a page of one revision's events, from its stream.
struct history_query {
  events::revision_key id;
  uint64_t after_stream_seq = 0;  // 0 = from its first event
  uint32_t limit = 0;             // 0 = 100, at most 1000
};

struct history_page {
  std::vector<events::v1::Envelope> events;
  uint64_t next_after = 0;  // the last stream seq shown; 0 after the last event
};

/// OpenLocal: the revision's replica files, under a live lease of it.
struct open_local {
  events::revision_key id;
  uint64_t lease_id = 0;
};

/// Where one object's bytes are on this host (the best replica: HOT first).
struct local_file {
  std::string key;
  std::string path;
  uint64_t size = 0;
  events::v1::ChecksumAlgorithm checksum_algorithm = events::v1::CHECKSUM_XXH3_64;
  std::string checksum, sha256;
  events::v1::Tier tier = events::v1::TIER_HOT;
};

struct local_listing {
  events::revision_key id;
  std::vector<local_file> payloads;  // in the revision's payload key order
  local_file manifest;
};

/// A watcher as the journal reader sees it (the gRPC stream implements it):
/// the reader hands it the next events matching its filter, and the watcher
/// asks for more (watch_atom) only once it has written them — so a slow
/// watcher holds one batch, never more, and never holds up a writer.
class watch_sink {
 public:
  virtual ~watch_sink() = default;
  /// Events in seq order, all with global_seq >= the position asked for.
  /// Called on the reader's thread; returns false when the watcher is gone.
  virtual bool deliver(std::vector<events::v1::Envelope> batch) = 0;
  /// The watch cannot go on (its position is no longer retained, the journal
  /// cannot be read); the stream ends with this error.
  virtual void fail(const status& why) = 0;
};

struct watch_filter {
  std::string tenant;              // set: only this tenant's events (SPEC §9); "" = all
  std::string stream_prefix;       // "" = every stream
  std::vector<std::string> types;  // catalog names (event_type.hpp); empty = all
};

/// One pull of a watcher: the next events from `from_seq` (inclusive).
struct watch_pull {
  std::shared_ptr<watch_sink> sink;
  uint64_t from_seq = 1;
  watch_filter filter;
};

}  // namespace weightd::actors
