// weightctl: the command-line tool. Online commands talk to a daemon over
// gRPC (--address); `journal` and `history` read the journal files offline.
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "api/common/transfer_buffers.hpp"
#include "api/cli/cli_version.hpp"
#include "api/cli/duration_flag.hpp"
#include "api/cli/exit_codes.hpp"
#include "api/cli/online_support.hpp"
#include "api/cli/journal_commands.hpp"
#include "api/cli/lease_commands.hpp"
#include "api/cli/object_commands.hpp"
#include "api/cli/online_commands.hpp"
#include "api/cli/operation_commands.hpp"
#include "api/cli/output_file.hpp"
#include "api/cli/transfer_commands.hpp"
#include "api/cli/watch_command.hpp"

namespace {

int run(int argc, char** argv) {
  using namespace weightd::api;
  keep_transfer_buffers();
  CLI::App app{"weightctl — inspect and operate a weightd store"};
  app.require_subcommand(1);
  app.fallthrough();  // global options may follow the subcommands

  online_options online;
  bool json = false;
  app.set_version_flag("--version", std::string{"weightctl "} + weightctl_version());
  auto* address_opt = app.add_option("--address", online.connection.address, "The daemon's gRPC address")
      ->envname("WEIGHTD_ADDRESS")
      ->capture_default_str();
  app.add_option("--tenant", online.tenant, "Tenant of objects, listings and ids that name none (with a token: its own)")->envname("WEIGHTD_TENANT")->capture_default_str();
  std::string token_file;
  app.add_option("--token", online.connection.token,
                 "Bearer token for a daemon with --auth-tokens-file (prefer WEIGHTD_TOKEN or "
                 "--token-file: a flag shows in ps)");
  app.add_option("--token-file", token_file, "A file holding the bearer token");
  app.add_option("--tls-ca-file", online.connection.tls_ca_file,
                 "PEM CA that signed the daemon's certificate: connect with TLS");
  app.add_option("--tls-cert-file", online.connection.tls_cert_file,
                 "PEM client certificate (mutual TLS)");
  app.add_option("--tls-key-file", online.connection.tls_key_file, "PEM key of --tls-cert-file");
  app.add_flag("--json", json, "Print JSON");
  app.add_option("--request-id", online.connection.request_id,
                 "The id the daemon logs and records in the journal for this command's changes "
                 "(default: weightctl-<16 random hex digits>)");

  // import, export (api/cli/transfer_commands.cpp)
  auto run_transfer = add_transfer_commands(app, online);
  std::string id;
  std::string ns = "default", resource;
  bool all_states = false, all_namespaces = false;
  auto* ls_cmd = app.add_subcommand("ls", "List revisions (READY and DEGRADED unless --all)");
  ls_cmd->add_option("--ns", ns, "Namespace")->capture_default_str();
  ls_cmd->add_option("--resource", resource, "Only this resource");
  ls_cmd->add_flag("--all", all_states, "Every state, tombstones too");
  ls_cmd->add_flag("-A,--all-namespaces", all_namespaces,
                   "Every namespace of the tenant (instead of --ns)");
  auto* show_cmd = app.add_subcommand("show", "Show one revision (hidden states too)");
  show_cmd->add_option("ID", id, "The revision")->required();
  auto* rm_cmd = app.add_subcommand("rm", "Remove a revision: payloads, then the manifest");
  rm_cmd->add_option("ID", id, "The revision")->required();
  std::string drain_timeout;
  rm_cmd->add_option("--drain-timeout", drain_timeout,
                     "With live leases: refuse new ones, delete when they are released, and "
                     "revoke what is left after this long, e.g. 30s or 5m "
                     "(default: fail with BUSY)");
  policy_args policy;
  auto* policy_cmd = app.add_subcommand("policy", "Change a revision's policy (the parts given)");
  policy_cmd->add_option("ID", id, "The revision")->required();
  policy_cmd->add_option("--preferred", policy.preferred, "Preferred residency: HOT, COLD or MIXED");
  policy_cmd->add_option("--ratio", policy.mixed_hot_ratio, "MIXED: the share of bytes kept HOT, in (0,1)");
  policy_cmd->add_option("--mode", policy.mode, "Migration mode: AUTO, MANUAL or PINNED");
  migrate_args migrate;
  auto* migrate_cmd = app.add_subcommand(
      "migrate", "Move a revision between memory and disk as whole units (an operation)");
  migrate_cmd->add_option("ID", id, "The revision (without #generation: the highest READY)")->required();
  migrate_cmd->add_option("--to", migrate.to, "Target residency: HOT, COLD or MIXED")->required();
  migrate_cmd->add_option("--ratio", migrate.ratio,
                          "MIXED: the share of bytes kept HOT, in (0,1) (default: the policy's)");
  migrate_cmd->add_flag("--wait", migrate.wait, "Follow the operation until it ends");
  auto* op_cmd = app.add_subcommand("op", "Operations (migrations): show, cancel, list");
  op_cmd->require_subcommand(1);
  uint64_t operation_id = 0;
  auto* op_show_cmd = op_cmd->add_subcommand("show", "One operation, finished ones too");
  op_show_cmd->add_option("OPERATION_ID", operation_id, "The operation")->required();
  auto* op_cancel_cmd = op_cmd->add_subcommand(
      "cancel", "Stop an operation at its next unit boundary (every unit stays whole)");
  op_cancel_cmd->add_option("OPERATION_ID", operation_id, "The operation")->required();
  auto* op_ls_cmd = op_cmd->add_subcommand("ls", "Running operations of a namespace");
  op_ls_cmd->add_option("--ns", ns, "Namespace")->capture_default_str();
  bool dry_run = false;
  auto* reconcile_cmd = app.add_subcommand(
      "reconcile", "Run a reconciler round now (with --dry-run: what it would decide and why)");
  reconcile_cmd->add_flag("--dry-run", dry_run, "Report the next round's decisions, take none");
  std::vector<std::string> keys;
  auto* abort_cmd = app.add_subcommand(
      "abort", "Abort an IMPORTING revision: remove its group and the keys given");
  abort_cmd->add_option("ID", id, "The revision (without #generation: the highest)")->required();
  abort_cmd->add_option("--remove", keys, "Also remove these ungrouped keys (repeatable)");

  std::string abort_claim;
  auto* lineage_cmd = app.add_subcommand(
      "lineage", "A lineage's watermark (highest committed generation) and upsert claim");
  lineage_cmd->add_option("ID", id, "[tenant:]ns/resource@revision (a #generation is ignored)")
      ->required();
  lineage_cmd->add_option("--abort", abort_claim,
                          "AbortUpsert this claim first (only before its target is committed)");

  // lease acquire|renew|release|ls|revoke
  auto* lease_cmd = app.add_subcommand("lease", "Revision leases: a live lease blocks removal");
  lease_cmd->require_subcommand(1);
  std::string holder, reason;
  std::string ttl = "60s";
  uint64_t lease_id = 0;
  auto* acquire_cmd = lease_cmd->add_subcommand("acquire", "Take a lease on a READY revision");
  acquire_cmd->add_option("ID", id, "The revision (without #generation: the highest READY)")->required();
  acquire_cmd->add_option("--holder", holder, "Who holds it (default: weightctl-lease@host:pid)");
  acquire_cmd->add_option("--ttl", ttl, "Lifetime, 1ms..24h, e.g. 30s or 10m (a unit is required)")
      ->capture_default_str();
  auto* renew_cmd = lease_cmd->add_subcommand("renew", "Extend a lease to at least now + ttl");
  renew_cmd->add_option("LEASE_ID", lease_id, "The lease")->required();
  renew_cmd->add_option("--ttl", ttl, "Lifetime from now, e.g. 30s (a unit is required)")
      ->capture_default_str();
  auto* release_cmd = lease_cmd->add_subcommand("release", "End a lease (idempotent)");
  release_cmd->add_option("LEASE_ID", lease_id, "The lease")->required();
  auto* leases_cmd = lease_cmd->add_subcommand("ls", "List a revision's live leases");
  leases_cmd->add_option("ID", id, "The revision")->required();
  auto* revoke_cmd = lease_cmd->add_subcommand("revoke", "End someone's lease now (admin)");
  revoke_cmd->add_option("LEASE_ID", lease_id, "The lease")->required();
  revoke_cmd->add_option("--reason", reason, "Recorded in the journal");

  // obj put|get|rm|ls
  auto* obj_cmd = app.add_subcommand("obj", "Generic objects of the store's key space");
  obj_cmd->require_subcommand(1);
  obj_put_args put;
  auto* put_cmd = obj_cmd->add_subcommand("put", "Upload a file as an object");
  put_cmd->add_option("KEY", put.key, "The object's key")->required();
  put_cmd->add_option("FILE", put.file, "The file to upload")->required();
  put_cmd->add_option("--tier", put.tier, "HOT or COLD")->capture_default_str();
  put_cmd->add_option("--type", put.type, "GENERAL, WEIGHT or METADATA")->capture_default_str();
  put_cmd->add_flag("--pin", put.pin, "Hard-pin: never evicted");
  std::string key, file;
  auto* get_cmd = obj_cmd->add_subcommand("get", "Download an object");
  get_cmd->add_option("KEY", key, "The object's key")->required();
  get_cmd->add_option("FILE", file, "Where to write it ('-' = stdout)")->required();
  bool force = false;
  auto* obj_rm_cmd = obj_cmd->add_subcommand("rm", "Remove objects (not a revision's members)");
  obj_rm_cmd->add_option("KEY", keys, "Keys to remove")->required();
  obj_rm_cmd->add_flag("--force", force, "Also while a reader holds the object's read lease");
  std::string prefix;
  auto* obj_ls_cmd = obj_cmd->add_subcommand("ls", "List objects");
  obj_ls_cmd->add_option("PREFIX", prefix, "Only keys starting with this");
  auto* status_cmd = app.add_subcommand("status", "The daemon's role, tiers, journal and counters");
  auto* admin_cmd = app.add_subcommand("admin", "High availability (SPEC §11)");
  admin_cmd->require_subcommand(1);
  bool promote_force = false;
  auto* promote_cmd = admin_cmd->add_subcommand(
      "promote", "Make the standby at --address the leader (its leader must be gone)");
  promote_cmd->add_flag("--force", promote_force,
                        "Also while its leader still streams to it (only when that leader is cut "
                        "off and cannot take writes)");
  watch_args watch;
  auto* watch_cmd = app.add_subcommand(
      "watch", "Follow the journal live, one line per event (NDJSON with --json); reconnects "
               "by itself from the last seq shown");
  watch_cmd->add_option("--from", watch.from, "First seq to show (default: events from now on)");
  watch_cmd->add_option("--stream", watch.stream,
                        "Only streams starting with this, e.g. 'revision|default/llama'");
  watch_cmd->add_option("--type", watch.types, "Only this event type (repeatable), e.g. lease_granted");
  watch_cmd->add_option("--count", watch.count, "Stop after this many events");

  journal_location where;
  app.add_option("--data-dir", where.data_dir, "weightd's data directory (offline commands)")
      ->capture_default_str();
  app.add_option("--journal-dir", where.journal_dir,
                 "The journal directory (default: <data-dir>/journal)");
  auto* journal = app.add_subcommand(
      "journal", "Offline, read-only tools on the journal's LMDB files (safe while weightd runs)");
  journal->require_subcommand(1);

  dump_args dump;
  auto* dump_cmd = journal->add_subcommand("dump", "Print events in seq order");
  dump_cmd->add_option("--from", dump.from, "First seq to print")->capture_default_str();
  dump_cmd->add_option("--to", dump.to, "Last seq to print");
  dump_cmd->add_option("--limit", dump.limit, "Print at most this many events");
  dump_cmd->add_option("--stream", dump.stream,
                       "Only this stream, e.g. 'system' or 'object|default/key'");
  dump_cmd->add_option("--type", dump.type, "Only this event type, e.g. object_put");
  dump_cmd->add_flag("--json", dump.json, "One JSON object per line");
  dump_cmd->add_option("--file", dump.file,
                       "Read the events a standby set aside (<data>/diverged-<epoch>.ndjson) "
                       "instead of the journal");

  stats_args stats;
  auto* stats_cmd = journal->add_subcommand("stats", "Summarize the journal");
  stats_cmd->add_flag("--json", stats.json, "Print JSON");

  replay_args replay;
  auto* replay_cmd = journal->add_subcommand(
      "replay", "Print the state as it was at a seq or time (the daemon's own fold)");
  replay_cmd->add_option("--until", replay.until,
                         "A seq (e.g. 1200) or a UTC time (e.g. 2026-12-02T10:34:20Z); "
                         "default: the end");
  replay_cmd->add_flag("--json", replay.json, "Print the state as JSON");

  verify_args verify;
  auto* verify_cmd = journal->add_subcommand(
      "verify", "Fold every event, check every invariant and snapshot; report the first "
                "violation with its seq");
  verify_cmd->add_flag("--json", verify.json, "Print JSON");

  history_args history;
  auto* history_cmd = app.add_subcommand(
      "history", "One revision's timeline: from the journal files (offline, read-only), or "
                 "from the daemon with --address / WEIGHTD_ADDRESS");
  history_cmd->add_option("id", history.id,
                          "[tenant:]ns/resource@revision[#generation]; without #generation the "
                          "highest live one")
      ->required();
  history_cmd->add_flag("--json", history.json,
                        "Print one JSON document: {\"items\": [one object per event]}");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kExitUsage;
  }
  online.json = json;
  // A flag beats the environment (SPEC §10): --token, then --token-file,
  // then WEIGHTD_TOKEN.
  if (token_file.empty() && online.connection.token.empty())
    if (const char* env = std::getenv("WEIGHTD_TOKEN")) online.connection.token = env;
  if (!token_file.empty() && app.get_option("--token")->count() == 0) {
    std::ifstream in(token_file);
    std::string token;
    if (!in || !std::getline(in, token) || token.empty())
      return fail(std::cerr, {weightd::errc::invalid_argument, "--token-file " + token_file +
                                                          " cannot be read or is empty"});
    while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
    online.connection.token = token;
  }
  // With a token the daemon knows the caller's tenant: a request naming none
  // is the credential's (SPEC §9), unless --tenant names one.
  if (!online.connection.token.empty() && app.get_option("--tenant")->count() == 0) {
    online.tenant = "";  // the daemon fills in the credential's
    auto probe = online.connection;  // one quick try: an offline command needs no daemon
    probe.attempts = 1;
    probe.deadline = std::chrono::milliseconds(2000);
    client c{probe};
    if (auto me = c.server_status()) online.tenant = me->caller_tenant();
  }
  set_id_tenant(online.tenant);
  if (online.connection.request_id.empty())
    online.connection.request_id = new_request_id("weightctl");
  name_daemon_address(online.connection.address);
  uint64_t ttl_ms = 0, drain_ms = 0;
  if (*acquire_cmd || *renew_cmd) {
    auto parsed = parse_duration_ms(ttl, "--ttl");
    if (!parsed) return fail(std::cerr, parsed.error());
    ttl_ms = *parsed;
  }
  if (*rm_cmd && !drain_timeout.empty()) {
    auto parsed = parse_duration_ms(drain_timeout, "--drain-timeout");
    if (!parsed) return fail(std::cerr, parsed.error());
    drain_ms = *parsed;
  }
  dump.json = dump.json || json;
  stats.json = stats.json || json;
  replay.json = replay.json || json;
  verify.json = verify.json || json;
  history.json = history.json || json;
  if (auto rc = run_transfer()) return *rc;
  if (*migrate_cmd) return migrate_revision(online, id, migrate, std::cout, std::cerr);
  if (*op_show_cmd) return show_operation(online, operation_id, std::cout, std::cerr);
  if (*op_cancel_cmd) return cancel_operation(online, operation_id, std::cout, std::cerr);
  if (*op_ls_cmd) return list_operations(online, ns, std::cout, std::cerr);
  if (*reconcile_cmd) return reconcile(online, dry_run, std::cout, std::cerr);
  if (*ls_cmd)
    return list_revisions(online, ns, resource, all_states, all_namespaces, std::cout, std::cerr);
  if (*show_cmd) return show_revision(online, id, std::cout, std::cerr);
  if (*rm_cmd) return remove_revision(online, id, drain_ms, std::cout, std::cerr);
  if (*policy_cmd) return update_policy(online, id, policy, std::cout, std::cerr);
  if (*abort_cmd) return abort_import(online, id, keys, std::cout, std::cerr);
  if (*lineage_cmd) return show_lineage(online, id, abort_claim, std::cout, std::cerr);
  if (*acquire_cmd) return lease_acquire(online, id, holder, ttl_ms, std::cout, std::cerr);
  if (*renew_cmd) return lease_renew(online, lease_id, ttl_ms, std::cout, std::cerr);
  if (*release_cmd) return lease_release(online, lease_id, std::cout, std::cerr);
  if (*leases_cmd) return lease_list(online, id, std::cout, std::cerr);
  if (*revoke_cmd) return lease_revoke(online, lease_id, reason, std::cout, std::cerr);
  if (*put_cmd) return obj_put(online, put, std::cout, std::cerr);
  if (*get_cmd) return obj_get(online, key, file, std::cout, std::cerr);
  if (*obj_rm_cmd) return obj_rm(online, keys, force, std::cout, std::cerr);
  if (*obj_ls_cmd) return obj_ls(online, prefix, std::cout, std::cerr);
  if (*status_cmd) return show_status(online, std::cout, std::cerr);
  if (*promote_cmd) return promote_standby(online, promote_force, std::cout, std::cerr);
  if (*watch_cmd) return watch_events(online, watch, std::cout, std::cerr);
  if (*dump_cmd) return journal_dump(where, dump, std::cout, std::cerr);
  if (*stats_cmd) return journal_stats(where, stats, std::cout, std::cerr);
  if (*replay_cmd) return journal_replay(where, replay, std::cout, std::cerr);
  if (*verify_cmd) return journal_verify(where, verify, std::cout, std::cerr);
  if (*history_cmd) {
    // Online when the daemon's address is named and the journal's files are not.
    bool files_named = app.get_option("--data-dir")->count() > 0 ||
                       app.get_option("--journal-dir")->count() > 0;
    if (address_opt->count() > 0 && !files_named) {
      online.json = history.json;
      return online_history(online, history.id, std::cout, std::cerr);
    }
    return revision_history(where, history, std::cout, std::cerr);
  }
  return kExitUsage;
}

}  // namespace

// No exception leaves main (SPEC §10): a stray one is reported and exits with
// its class, after the stack unwound (which releases every lease a command
// holds); a failed write of standard output exits non-zero too.
int main(int argc, char** argv) {
  using namespace weightd::api;
  std::signal(SIGPIPE, SIG_IGN);  // a closed pipe is EPIPE, reported, not a silent death
  int rc = 0;
  try {
    rc = run(argc, argv);
  } catch (const std::filesystem::filesystem_error& e) {
    std::cout.flush();
    rc = fail_local(std::cerr, "cannot use '" + e.path1().string() + "': " + e.code().message());
  } catch (const std::exception& e) {
    std::cout.flush();
    rc = fail(std::cerr, {weightd::errc::internal, std::string{"unexpected error: "} + e.what()},
              "please report it");
  }
  int out_rc = check_stdout(std::cerr);
  return rc != 0 ? rc : out_rc;
}
