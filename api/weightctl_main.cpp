// weightctl: the command-line tool. This build has the offline journal tools;
// the gRPC commands come with the API.
#include <CLI/CLI.hpp>

#include <iostream>

#include "api/exit_codes.hpp"
#include "api/journal_commands.hpp"

int main(int argc, char** argv) {
  using namespace weightd::api;
  CLI::App app{"weightctl — inspect and operate a weightd store"};
  app.require_subcommand(1);
  app.fallthrough();  // global options may follow the subcommands

  journal_location where;
  app.add_option("--data-dir", where.data_dir, "weightd's data directory")
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
      "history", "One revision's timeline from the journal (offline, read-only)");
  history_cmd->add_option("id", history.id,
                          "[tenant:]ns/resource@revision[#generation]; without #generation the "
                          "highest live one")
      ->required();
  history_cmd->add_flag("--json", history.json, "One JSON object per event");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kExitUsage;
  }
  if (*dump_cmd) return journal_dump(where, dump, std::cout, std::cerr);
  if (*stats_cmd) return journal_stats(where, stats, std::cout, std::cerr);
  if (*replay_cmd) return journal_replay(where, replay, std::cout, std::cerr);
  if (*verify_cmd) return journal_verify(where, verify, std::cout, std::cerr);
  if (*history_cmd) return revision_history(where, history, std::cout, std::cerr);
  return kExitUsage;
}
