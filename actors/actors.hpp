// Every actor interface of weightd, in one header: who can be told what.
//
// Conventions (CAF 0.17.6): atoms are atom_constant<atom("...")> (<= 10
// chars); domain errors travel as caf::error in the "weightd" category with
// the human message as context (errors.hpp converts both ways); every request
// made across an actor edge carries a finite timeout.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "caf/all.hpp"
#include "events/events.pb.h"
#include "events/revision_state.hpp"
#include "events/state.hpp"
#include "events/status.hpp"
#include "persistence/tier_store.hpp"

namespace weightd::actors {

// ------------------------------------------------------------------ atoms

using append_atom = caf::atom_constant<caf::atom("append")>;
using stats_atom = caf::atom_constant<caf::atom("stats")>;
using put_atom = caf::atom_constant<caf::atom("put")>;
using abort_atom = caf::atom_constant<caf::atom("abort")>;
using stat_atom = caf::atom_constant<caf::atom("stat")>;
using remove_atom = caf::atom_constant<caf::atom("remove")>;
using removeall_atom = caf::atom_constant<caf::atom("removeall")>;
using evict_atom = caf::atom_constant<caf::atom("evict")>;
using group_atom = caf::atom_constant<caf::atom("group")>;
using drop_atom = caf::atom_constant<caf::atom("drop")>;
using list_atom = caf::atom_constant<caf::atom("list")>;
using guard_atom = caf::atom_constant<caf::atom("guard")>;
using publish_atom = caf::atom_constant<caf::atom("publish")>;
using copy_atom = caf::atom_constant<caf::atom("copy")>;
using unlink_atom = caf::atom_constant<caf::atom("unlink")>;
using allocate_atom = caf::atom_constant<caf::atom("allocate")>;
using snapshot_atom = caf::atom_constant<caf::atom("snapshot")>;
using damaged_atom = caf::atom_constant<caf::atom("damaged")>;
using scrub_atom = caf::atom_constant<caf::atom("scrub")>;
using history_atom = caf::atom_constant<caf::atom("history")>;
using watch_atom = caf::atom_constant<caf::atom("watch")>;
using local_atom = caf::atom_constant<caf::atom("local")>;

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

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, journal_stats& x) {
  return f(caf::meta::type_name("journal_stats"), x.commits, x.events, x.appends,
           x.failed_appends, x.highest_seq, x.last_commit_us, x.total_commit_us,
           x.recent_batch_sizes, x.refusing_writes);
}

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

// ------------------------------------------------------------- interfaces

/// The journal writer: the only appender of the journal. Group commit: every
/// append that arrives while a transaction is in flight goes into the next
/// transaction; each appender is answered only after its commit returned.
using journal_actor = caf::typed_actor<
    // Appends the batch atomically (with whatever else is queued); replies with
    // the committed batch, or DURABILITY_FAILED / INVALID_ARGUMENT.
    caf::replies_to<append_atom, event_batch>::with<event_batch>,
    // Commits everything queued; the writer sends it to itself.
    caf::reacts_to<caf::flush_atom>,
    // Replies with the writer's counters.
    caf::replies_to<stats_atom>::with<journal_stats>>;

/// Takes whole-state snapshots: folds the journal (newest snapshot + tail) on
/// its own thread and saves the result — consistent by construction.
using snapshotter_actor = caf::typed_actor<
    // Takes a snapshot now; replies with its seq.
    caf::replies_to<snapshot_atom>::with<uint64_t>,
    // The journal writer's periodic request, sent when the journal reached
    // `seq`: skipped when a snapshot at or past `seq` was written meanwhile
    // (requests that queued behind a slow snapshot merge into one).
    caf::reacts_to<snapshot_atom, uint64_t>>;

/// Blocking file work of the tiers, off the cooperative workers (detached).
using io_actor = caf::typed_actor<
    // Publishes a finished temp file as the replica of an object in a tier
    // (fsync + rename + directory fsync for COLD).
    caf::replies_to<publish_atom, events::v1::Tier, std::string, events::object_ref>::with<bool>,
    // Copies an object's replica from the other tier into `tier` through the
    // named temp file, publishes it, and replies with the digest of the copy.
    caf::replies_to<copy_atom, events::v1::Tier, events::object_ref, std::string>::with<
        persistence::blob_digest>,
    // Creates a put's temp file in `tier` with its bytes set aside
    // (tier_store::allocate); NO_AVAILABLE_SPACE when the filesystem is full.
    caf::replies_to<allocate_atom, events::v1::Tier, std::string, uint64_t>::with<bool>,
    // Deletes files (replicas already unregistered, abandoned temp files).
    caf::reacts_to<unlink_atom, std::vector<std::string>>>;

/// The object store: the master's key space (SPEC §2). Owns the object index,
/// tier capacity accounting, read leases, access times and the guard.
using object_store_actor = caf::typed_actor<
    // Put, step 1: validates, reserves capacity (evicting when needed) and
    // replies with where to stream the bytes.
    caf::replies_to<put_atom, put_request>::with<put_ticket>,
    // Put, step 2: the streamed bytes' digest; verifies, publishes, journals,
    // registers. The object is visible when this replies.
    caf::replies_to<put_atom, uint64_t, persistence::blob_digest>::with<object_info>,
    // Abandons a put (the client went away): capacity returned, file deleted.
    caf::reacts_to<abort_atom, uint64_t>,
    // Get: where to read an object's bytes, granting a short read lease.
    caf::replies_to<caf::get_atom, std::string, std::string>::with<read_grant>,
    // Stat: an object's metadata (no lease, no access).
    caf::replies_to<stat_atom, std::string, std::string>::with<object_info>,
    // Remove(tenant, key, force, principal).
    caf::replies_to<remove_atom, std::string, std::string, bool, std::string>::with<object_info>,
    // BatchRemove(tenant, keys, force, principal): per-key results.
    caf::replies_to<remove_atom, std::string, std::vector<std::string>, bool,
                    std::string>::with<batch_removal>,
    // RemoveAll(tenant, prefix, all, principal): skips managed and leased objects.
    caf::replies_to<removeall_atom, std::string, std::string, bool, std::string>::with<
        removal_summary>,
    // Evict(target_ratio): frees HOT bytes down to target_ratio x capacity.
    caf::replies_to<evict_atom, double>::with<eviction_summary>,
    // Every member of a payload group (commit validation uses it), plus the
    // records of the listed keys that exist outside the group.
    caf::replies_to<group_atom, std::string, std::string, std::vector<std::string>>::with<
        group_snapshot>,
    // Lifecycle removal (a revision's abort or delete): bypasses the guard
    // and object read leases; per-key results.
    caf::replies_to<remove_atom, std::string, std::vector<std::string>,
                    events::v1::RemovalReason>::with<batch_removal>,
    // Adds a replica in a tier by copying from the other (migration).
    caf::replies_to<caf::add_atom, std::string, std::string, events::v1::Tier>::with<object_info>,
    // Drops a replica of a tier; never the last one (migration).
    caf::replies_to<drop_atom, std::string, std::string, events::v1::Tier,
                    events::v1::RemovalReason>::with<object_info>,
    // List(tenant, prefix, start_after, limit).
    caf::replies_to<list_atom, std::string, std::string, std::string, uint32_t>::with<object_page>,
    // Marks a payload group as managed by a revision (the guard).
    caf::reacts_to<guard_atom, std::string, std::string, managed_group>,
    // Forgets a managed group (its revision was deleted).
    caf::reacts_to<guard_atom, std::string, std::string>,
    // Expires abandoned puts and read leases; the store ticks itself.
    caf::reacts_to<caf::tick_atom>,
    // The scrub: the next replicas to re-read (at least one, then up to the
    // budget in bytes), and their verdicts back (scrubber.hpp).
    caf::replies_to<scrub_atom, uint64_t>::with<scrub_batch>,
    caf::reacts_to<scrub_atom, scrub_batch>,
    // Hands over the groups damaged since the last call (the registry's
    // reconciler round ticks their revisions).
    caf::replies_to<damaged_atom>::with<damaged_groups>,
    // Local reads (tenant, keys): the best replica file of each key, HOT
    // first, in the order asked; no read lease (the revision's lease protects).
    caf::replies_to<local_atom, std::string, std::vector<std::string>>::with<
        std::vector<local_file>>,
    // Usage, counters.
    caf::replies_to<stats_atom>::with<store_stats>>;

/// Reads the journal for History and Watch on a thread of its own (LMDB
/// reads never wait for the writer; they do touch the disk).
using journal_reader_actor = caf::typed_actor<
    // History: a page of the revision's stream; NOT_FOUND when it has none.
    caf::replies_to<history_atom, history_query>::with<history_page>,
    // Watch: hands the sink the next events from the position, at once when
    // the journal has them, else as soon as a commit brings some.
    caf::reacts_to<watch_atom, watch_pull>,
    // Looks for commits that parked watchers wait for; the reader ticks itself.
    caf::reacts_to<caf::tick_atom>>;

/// Whoever wants a revision's new view after every change (the registry).
using revision_listener = caf::typed_actor<
    // A revision applied events: its new view.
    caf::reacts_to<revision_view>>;

/// The revision commands both the registry and each revision actor accept.
using revision_commands = caf::typed_actor<
    // BeginImport: a new IMPORTING revision (or the same one again).
    caf::replies_to<begin_import>::with<revision_view>,
    // CommitImport: validates the group, then READY + HOT.
    caf::replies_to<commit_import>::with<revision_view>,
    // AbortImport: DELETING, members and keys_to_remove removed, DELETED.
    caf::replies_to<abort_import>::with<removal_result>,
    // UpdatePolicy on READY/DEGRADED.
    caf::replies_to<update_policy>::with<revision_view>,
    // Retires the base of a committed upsert (idempotent for the same claim).
    caf::replies_to<retire_revision>::with<revision_view>,
    // RemoveRevision: DELETING, payloads then manifest removed, DELETED.
    caf::replies_to<remove_revision>::with<removal_result>,
    // GetRevision (hidden states only with include_hidden).
    caf::replies_to<get_revision>::with<revision_view>,
    // AcquireLease on READY: the holder's live lease, or a new one.
    caf::replies_to<acquire_lease>::with<lease_view>,
    // RenewLease: expiry = max(current, now + ttl); LEASE_EXPIRED once ended.
    caf::replies_to<renew_lease>::with<lease_view>,
    // ReleaseLease: idempotent; replies with the lease as it was.
    caf::replies_to<release_lease>::with<lease_view>,
    // RevokeLease (admin): ends a live lease now.
    caf::replies_to<revoke_lease>::with<lease_view>,
    // ListLeases: the revision's live leases.
    caf::replies_to<list_leases>::with<lease_list>,
    // OpenLocal: the replica files of a READY/DEGRADED revision, only under
    // one of its live leases (SPEC §4 Local reads).
    caf::replies_to<open_local>::with<local_listing>,
    // Migrate: starts (or returns) the operation moving the revision to a target.
    caf::replies_to<migrate_revision>::with<events::operation_record>,
    // GetOperation: an operation of the revision, terminal ones too.
    caf::replies_to<get_operation>::with<events::operation_record>,
    // CancelOperation: ends the running operation at the unit boundary (CANCELLED).
    caf::replies_to<cancel_operation>::with<events::operation_record>,
    // The reconciler's move (pressure, relief): started only if the rule
    // still holds against the revision's current record; replies with the
    // revision's newest operation either way.
    caf::replies_to<auto_migrate>::with<events::operation_record>>;

/// One revision: decides its commands against its record, persists the
/// events, applies them, replies — one command after another (decisions
/// that queue behind a write go to the journal together in the next one).
using revision_actor = revision_commands::extend<
    // Reconciles: expires leases past their expiry, finishes a drain (or
    // revokes at its deadline), continues an interrupted deletion, runs the
    // next round of its active operation.
    caf::reacts_to<caf::tick_atom>>;

/// One lineage (SPEC §4 upsert): owns its watermark and claim, drives a claim
/// through its phases with the revisions' own commands, one command at a time.
using lineage_actor = caf::typed_actor<
    // BeginUpsert: a new claim (or the same one again); PUT_FIRST begins the
    // target's import, DELETE_FIRST deletes the base first.
    caf::replies_to<begin_upsert>::with<lineage_view>,
    // CommitUpsert: commits the target; the base retires. Again: the state.
    caf::replies_to<commit_upsert>::with<revision_view>,
    // AbortUpsert: ends an uncommitted claim (its target's import aborted).
    caf::replies_to<abort_upsert>::with<lineage_view>,
    // GetLineage.
    caf::replies_to<get_lineage>::with<lineage_view>,
    // A revision of the lineage changed (the registry forwards): the
    // watermark, and the claim's next step.
    caf::reacts_to<revision_view>,
    // Takes the claim's next step (after a restart).
    caf::reacts_to<caf::tick_atom>>;

/// The registry: routes each command to the one actor of its identity and
/// serves listings from its index (identity -> view, per-lineage order).
using registry_actor = revision_commands::extend<
    // ListRevisions from the registry's index.
    caf::replies_to<list_revisions>::with<revision_page>,
    // Revisions in each availability, live leases.
    caf::replies_to<stats_atom>::with<registry_stats>,
    // Reconcile: runs a round now, or with dry_run reports its decisions
    // (each with its reason) without taking them.
    caf::replies_to<reconcile_request>::with<reconcile_report>,
    // One reconciler round (reconciler.hpp). The registry sends it to itself
    // every reconcile interval.
    caf::reacts_to<caf::tick_atom>,
    // Lineage commands, handed to the lineage's actor.
    caf::replies_to<begin_upsert>::with<lineage_view>,
    caf::replies_to<commit_upsert>::with<revision_view>,
    caf::replies_to<abort_upsert>::with<lineage_view>,
    caf::replies_to<get_lineage>::with<lineage_view>>::extend_with<revision_listener>;

}  // namespace weightd::actors

// Protobuf messages have no inspect(): event batches are local-only messages.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::event_batch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::put_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::put_ticket)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::object_info)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::read_grant)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::batch_removal)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::removal_summary)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::eviction_summary)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::group_snapshot)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::object_page)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::managed_group)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::store_stats)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::damaged_groups)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::scrub_batch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::events::object_ref)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::persistence::blob_digest)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::events::v1::Tier)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::events::v1::RemovalReason)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::begin_import)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::commit_import)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::abort_import)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::update_policy)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::remove_revision)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::retire_revision)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::begin_upsert)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::commit_upsert)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::abort_upsert)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::get_lineage)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::lineage_view)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::get_revision)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::list_revisions)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::revision_view)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::removal_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::revision_page)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::registry_stats)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::acquire_lease)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::renew_lease)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::release_lease)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::revoke_lease)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::list_leases)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::lease_view)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::lease_list)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::history_query)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::history_page)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::open_local)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::local_listing)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::watch_pull)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<weightd::actors::local_file>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::migrate_revision)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::get_operation)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::cancel_operation)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::auto_migrate)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::reconcile_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::reconcile_report)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::events::operation_record)
CAF_ERROR_CODE_ENUM(weightd::errc, "weightd")
