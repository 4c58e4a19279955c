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
#include "core/messages.hpp"

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
    // The same for a standby's copy (SPEC §11 Bytes): not an access and no
    // read lease (store/reads.cpp).
    caf::replies_to<caf::get_atom, copy_atom, std::string, std::string>::with<read_grant>,
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
/// serves reads and listings from its index (identity -> view, per-lineage
/// order) without waking a revision actor.
using registry_actor = revision_commands::extend<
    // GetRevision from the view the revision sent before it answered its last
    // command (hidden states only with include_hidden).
    caf::replies_to<get_revision>::with<revision_view>,
    // ListRevisions from the registry's index.
    caf::replies_to<list_revisions>::with<revision_page>,
    // Revisions in each availability, live leases.
    caf::replies_to<stats_atom>::with<registry_stats>,
    // Reconcile: runs a round now, or with dry_run reports its decisions
    // (each with its reason) without taking them.
    caf::replies_to<reconcile_request>::with<reconcile_report>,
    // One reconciler round (core/reconcile_plan.hpp). The registry sends it to itself
    // every reconcile interval.
    caf::reacts_to<caf::tick_atom>,
    // Lineage commands, handed to the lineage's actor.
    caf::replies_to<begin_upsert>::with<lineage_view>,
    caf::replies_to<commit_upsert>::with<revision_view>,
    caf::replies_to<abort_upsert>::with<lineage_view>,
    caf::replies_to<get_lineage>::with<lineage_view>>::extend_with<revision_listener>;

/// The scrubber (scrubber.hpp): re-reads replicas against their checksums at
/// a bounded rate on a thread of its own.
using scrubber_actor = caf::typed_actor<
    // One round; the scrubber ticks itself (tests tick it by hand).
    caf::reacts_to<caf::tick_atom>>;

/// The watchdog (watchdog.hpp): monitors every core actor and reports the
/// first that stops while the node runs. Nobody needs to tell it anything;
/// it answers a ping so that a test (or a host) can tell it is alive.
using watchdog_actor = caf::typed_actor<
    // Replies with the number of actors it monitors.
    caf::replies_to<caf::ok_atom>::with<uint64_t>>;

}  // namespace weightd::actors

// The messages (core/messages.hpp) have no inspect(): they are local-only.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::event_batch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(weightd::actors::journal_stats)
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
