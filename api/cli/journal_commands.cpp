#include "api/cli/journal_commands.hpp"
#include "events/time_text.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>

#include "api/cli/exit_codes.hpp"
#include "api/cli/format.hpp"
#include "api/common/json_output.hpp"
#include "events/event_type.hpp"
#include "persistence/lmdb_journal.hpp"

namespace weightd::api {

namespace {

result<std::unique_ptr<persistence::lmdb_journal>> open_read_only(const journal_location& where) {
  persistence::lmdb_options options;
  options.dir = where.path();
  options.read_only = true;
  return persistence::lmdb_journal::open(options);
}

int fail(std::ostream& err, const status& st) {
  err << "weightctl: " << st.to_string() << "\n";
  return exit_code(st.code());
}

/// The events of a file a standby set aside (api/server/divergence.hpp),
/// one JSON object per line, in the file's order; a line that is not an
/// event fails naming the file and the line.
status read_diverged_file(const std::string& path, const persistence::event_visitor& visit) {
  std::ifstream in(path);
  if (!in) return {errc::not_found, "cannot read " + path + ": " + std::strerror(errno)};
  std::string line;
  for (uint64_t number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    auto where = path + " line " + std::to_string(number);
    auto j = nlohmann::ordered_json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return {errc::invalid_argument, where + " is not a JSON object; is it a diverged-<epoch>.ndjson?"};
    events::v1::Envelope e;
    if (auto st = message_from_json(j, &e); !st.ok())
      return {errc::invalid_argument, where + ": " + st.message()};
    if (!visit(e)) return {};
  }
  return {};
}

}  // namespace

int journal_dump(const journal_location& where, const dump_args& args, std::ostream& out,
                 std::ostream& err) {
  if (!args.type.empty() && !events::is_event_type_name(args.type)) {
    std::string known;
    for (const auto& name : events::all_event_type_names()) known += " " + name;
    return fail(err, {errc::invalid_argument,
                      "--type '" + args.type + "' is not an event type; known:" + known});
  }
  auto print = [&](const events::v1::Envelope& e) {
    out << (args.json ? format_event_json(e) : format_event_line(e)) << "\n";
    return true;
  };
  if (!args.file.empty()) {  // the same filters, over the file's events
    uint64_t shown = 0;
    auto st = read_diverged_file(args.file, [&](const events::v1::Envelope& e) {
      if (e.global_seq() < args.from || e.global_seq() > args.to) return true;
      if (!args.stream.empty() && e.stream() != args.stream) return true;
      if (!args.type.empty() && events::event_type_name(e) != args.type) return true;
      return shown < args.limit && print(e) && ++shown < args.limit;
    });
    return st.ok() ? 0 : fail(err, st);
  }
  auto journal = open_read_only(where);
  if (!journal) return fail(err, journal.error());
  persistence::seq_range range{args.from, args.to, args.limit};
  status st;
  if (!args.stream.empty()) {
    // Stream reads are bounded by stream seq; the global seq bounds filter.
    uint64_t shown = 0;
    st = (*journal)->read_stream(args.stream, {}, [&](const events::v1::Envelope& e) {
      if (e.global_seq() < args.from) return true;
      if (e.global_seq() > args.to) return false;
      if (!args.type.empty() && events::event_type_name(e) != args.type) return true;
      return print(e) && ++shown < args.limit;
    });
  } else if (!args.type.empty()) {
    st = persistence::read_type(**journal, args.type, range, print);
  } else {
    st = (*journal)->read(range, print);
  }
  if (!st.ok()) return fail(err, st);
  return 0;
}

int journal_stats(const journal_location& where, const stats_args& args, std::ostream& out,
                  std::ostream& err) {
  auto journal = open_read_only(where);
  if (!journal) return fail(err, journal.error());
  auto stats = (*journal)->stats();
  if (!stats) return fail(err, stats.error());
  std::map<std::string, uint64_t> by_type;
  int64_t first_ms = 0, last_ms = 0;
  auto st = (*journal)->read({}, [&](const events::v1::Envelope& e) {
    ++by_type[events::event_type_name(e)];
    if (first_ms == 0) first_ms = e.timestamp_ms();
    last_ms = e.timestamp_ms();
    return true;
  });
  if (!st.ok()) return fail(err, st);

  if (args.json) {
    nlohmann::ordered_json types = nlohmann::ordered_json::object();
    for (const auto& [type, count] : by_type) types[type] = count;
    out << json_line({{"path", where.path()},
                      {"highest_seq", stats->highest_seq},
                      {"events", stats->event_count},
                      {"streams", stats->stream_count},
                      {"snapshots", stats->snapshot_count},
                      {"incarnation", stats->incarnation},
                      {"map_bytes", stats->map_bytes},
                      {"used_bytes", stats->used_bytes},
                      {"first_event_ms", first_ms},
                      {"last_event_ms", last_ms},
                      {"by_type", types}})
        << "\n";
    return 0;
  }
  out << fmt::format("journal      {}\n", where.path());
  out << fmt::format("highest seq  {}\n", stats->highest_seq);
  out << fmt::format("events       {}\n", stats->event_count);
  out << fmt::format("streams      {}\n", stats->stream_count);
  out << fmt::format("snapshots    {}\n", stats->snapshot_count);
  out << fmt::format("incarnation  {}\n", stats->incarnation);
  out << fmt::format("map          {} used of {}\n", format_bytes(stats->used_bytes),
                     format_bytes(stats->map_bytes));
  if (stats->event_count > 0)
    out << fmt::format("time span    {} .. {}\n", events::utc_text(first_ms),
                       events::utc_text(last_ms));
  for (const auto& [type, count] : by_type) out << fmt::format("  {:<24}{}\n", type, count);
  return 0;
}

}  // namespace weightd::api

// ----------------------------------------------------- replay, verify, history

#include <google/protobuf/util/json_util.h>

#include <ctime>

#include "events/evolve.hpp"
#include "events/identity.hpp"
#include "events/state_codec.hpp"
#include "persistence/replay.hpp"

namespace weightd::api {

namespace v1 = events::v1;

result<point_in_history> parse_until(const std::string& text) {
  point_in_history p;
  if (text.empty()) return p;
  if (std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (text.size() > 19) return status{errc::invalid_argument, "--until seq is too large"};
    p.seq = std::stoull(text);
    return p;
  }
  std::tm tm{};
  int millis = 0;
  const char* rest = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest && *rest == '.') {
    char* end = nullptr;
    millis = static_cast<int>(std::strtol(rest + 1, &end, 10));
    rest = end;
  }
  if (!rest || std::string(rest) != "Z")
    return status{errc::invalid_argument, "--until '" + text +
                                              "' is neither a seq nor a UTC time like "
                                              "2026-12-02T10:34:20Z"};
  p.ms = static_cast<int64_t>(timegm(&tm)) * 1000 + millis;
  return p;
}

namespace {

std::string state_json(const events::store_state& state) {
  v1::StateSnapshot snap;
  snap.ParseFromString(events::encode_state(state));
  return json_line(message_json(snap));
}

void print_state(const events::store_state& s, std::ostream& out) {
  out << fmt::format("state at seq {} ({})\n", s.applied_seq,
                     s.last_event_ms ? events::utc_text(s.last_event_ms) : "empty journal");
  out << fmt::format("\nrevisions ({})\n", s.revisions.revisions.size());
  for (const auto& [id, r] : s.revisions.revisions) {
    out << fmt::format("  {:<40} {:<10} {:<16} gen {:<4} policy {}/{}", events::canonical_text(id),
                       short_enum_name(r.availability, v1::Availability_descriptor()),
                       short_enum_name(r.residency, v1::Residency_descriptor()), r.metadata_generation,
                       short_enum_name(r.policy.preferred, v1::Residency_descriptor()),
                       short_enum_name(r.policy.mode, v1::MigrationMode_descriptor()));
    if (r.operation_id) out << fmt::format(" operation {}", r.operation_id);
    if (!r.payload_keys.empty())
      out << fmt::format(" payloads {} ({})", r.payload_keys.size(),
                         format_bytes(r.manifest.logical_bytes));
    out << "\n";
  }
  out << fmt::format("\nobjects ({}; HOT {}, COLD {})\n", s.objects.objects.size(),
                     format_bytes(s.objects.hot_bytes), format_bytes(s.objects.cold_bytes));
  for (const auto& [ref, o] : s.objects.objects)
    out << fmt::format("  {:<56} {:>10} {}{}{}{}\n", ref.key, format_bytes(o.size),
                       o.hot ? "HOT" : "", o.hot && o.cold ? "+" : "", o.cold ? "COLD" : "",
                       ref.tenant == "default" ? "" : "  tenant " + ref.tenant);
}

}  // namespace

int journal_replay(const journal_location& where, const replay_args& args, std::ostream& out,
                   std::ostream& err) {
  auto until = parse_until(args.until);
  if (!until) return fail(err, until.error());
  auto journal = open_read_only(where);
  if (!journal) return fail(err, journal.error());
  persistence::fold_options o;
  o.until_seq = until->seq;
  o.until_ms = until->ms;
  auto state = persistence::fold_journal(**journal, o);
  if (!state) return fail(err, state.error());
  if (args.json) out << state_json(*state) << "\n";
  else print_state(*state, out);
  return 0;
}

int journal_verify(const journal_location& where, const verify_args& args, std::ostream& out,
                   std::ostream& err) {
  auto journal = open_read_only(where);
  if (!journal) return fail(err, journal.error());
  uint64_t events = 0;
  persistence::fold_options o;
  o.use_snapshots = false;
  o.after_each = [&](const events::store_state& s, const v1::Envelope& e) -> status {
    ++events;
    auto st = events::check_touched(s, e);
    if (st.ok()) return st;
    return {st.code(), "seq " + std::to_string(e.global_seq()) + ": " + st.message()};
  };
  auto state = persistence::fold_journal(**journal, o);
  status verdict = state.ok() ? status{} : state.error();
  // The folded whole must hold what a snapshot must: every id allocator above
  // the ids in use, operations that agree with their revisions, byte sums.
  if (verdict.ok())
    if (auto st = events::check_snapshot(*state); !st.ok())
      verdict = {st.code(), "the state after the last event: " + st.message()};
  // Every snapshot must pass its checksum (recovery skips one that does not,
  // and so loses the reason to keep the events before it) ...
  if (verdict.ok()) {
    auto damaged = (*journal)->damaged_snapshots(events::kStateSnapshotStream);
    if (!damaged.ok()) verdict = damaged.error();
    else if (!damaged->empty())
      verdict = {errc::data_loss, "the snapshot at seq " + std::to_string(damaged->back()) +
                                      " fails its checksum (" + std::to_string(damaged->size()) +
                                      " damaged in all); weightd skips it and rebuilds from an "
                                      "older snapshot or the events"};
  }
  // ... and equal the fold at its own seq.
  uint64_t snapshots = 0;
  persistence::snapshot_criteria c;
  while (verdict.ok()) {
    auto snap = (*journal)->load_snapshot(events::kStateSnapshotStream, c);
    if (!snap.ok() || !*snap) break;
    ++snapshots;
    auto decoded = events::decode_state((*snap)->data);
    persistence::fold_options at;
    at.use_snapshots = false;
    at.until_seq = (*snap)->seq;
    auto folded = persistence::fold_journal(**journal, at);
    if (!decoded.ok() || !folded.ok() || !(*decoded == *folded))
      verdict = {errc::data_loss, "the snapshot at seq " + std::to_string((*snap)->seq) +
                                      " differs from the fold of the journal up to it"};
    if ((*snap)->seq == 0) break;
    c.max_seq = (*snap)->seq - 1;
  }
  if (args.json) {
    // Every field present: "error" is "" when the journal is sound.
    out << json_line({{"ok", verdict.ok()},
                      {"events", events},
                      {"snapshots", snapshots},
                      {"error", verdict.ok() ? "" : verdict.to_string()}})
        << "\n";
  } else if (verdict.ok()) {
    out << fmt::format("ok: {} events folded, every invariant holds; {} snapshots match the "
                       "fold\n",
                       events, snapshots);
  }
  if (!verdict.ok()) return fail(err, verdict);
  return 0;
}

namespace {

/// What an event was about besides the revision: "lease 12 trainer-3",
/// "op 4 MIGRATE", or "-". Lease events after the grant name only the id;
/// the holder is remembered from the grant in the same timeline.
std::string event_detail(const v1::Envelope& e, std::map<uint64_t, std::string>& holders) {
  const auto* payload_field = v1::Envelope::descriptor()->FindOneofByName("payload");
  const auto* set = e.GetReflection()->GetOneofFieldDescriptor(e, payload_field);
  if (!set || set->type() != google::protobuf::FieldDescriptor::TYPE_MESSAGE) return "-";
  const auto& payload = e.GetReflection()->GetMessage(e, set);
  const auto* reflection = payload.GetReflection();
  const auto* d = payload.GetDescriptor();
  if (const auto* lease = d->FindFieldByName("lease_id")) {
    uint64_t id = reflection->GetUInt64(payload, lease);
    if (const auto* holder = d->FindFieldByName("holder"))
      holders[id] = reflection->GetString(payload, holder);
    auto it = holders.find(id);
    return fmt::format("lease {} {}", id, it == holders.end() ? "" : it->second);
  }
  if (e.has_upsert_claimed()) {
    const auto& p = e.upsert_claimed();
    return fmt::format("claim {} {} -> #{}", p.request_id(), events::mode_name(p.mode()),
                       p.target_generation());
  }
  if (e.has_claim_phase_changed())
    return fmt::format("claim {} {}", e.claim_phase_changed().request_id(),
                       events::phase_name(e.claim_phase_changed().phase()));
  if (e.has_retirement_started())
    return fmt::format("claim {} -> #{}", e.retirement_started().upsert_request_id(),
                       e.retirement_started().target_generation());
  if (const auto* op = d->FindFieldByName("operation_id")) {
    std::string kind;
    if (e.has_operation_started())
      kind = " " + v1::OperationKind_Name(e.operation_started().kind());
    return fmt::format("op {}{}", reflection->GetUInt64(payload, op), kind);
  }
  return "-";
}

}  // namespace

int print_history(const events::revision_key& id, const history_source& read, bool json,
                  std::ostream& out, std::ostream& err) {
  events::revision_index index;
  std::map<uint64_t, std::string> holders;
  uint64_t shown = 0;
  auto items = nlohmann::ordered_json::array();  // --json: one list document
  auto st = read([&](const v1::Envelope& e) {
    // An upsert's claim events live in its base's stream; the lineage folds them.
    auto applied = events::is_lineage_event(e) ? status{} : events::evolve_revisions(index, e);
    const auto* r = index.find(id);
    uint64_t generation = r ? r->metadata_generation : 0;
    auto detail = event_detail(e, holders);
    ++shown;
    if (json) {
      // The envelope's own names, as `watch` and `journal dump` print them.
      items.push_back({{"global_seq", e.global_seq()},
                       {"timestamp_ms", e.timestamp_ms()},
                       {"event", events::event_type_name(e)},
                       {"metadata_generation", generation},
                       {"detail", detail == "-" ? "" : detail},
                       {"principal", e.principal()},
                       {"request_id", e.request_id()}});
    } else {
      if (shown == 1)
        out << fmt::format("{:<9} {:<24}  {:<22} {:<8} {:<22} {:<22} {}\n", "SEQ", "TIME",
                           "EVENT", "GEN", "DETAIL", "PRINCIPAL", "REQUEST");
      out << fmt::format("#{:<8} {}  {:<22} gen {:<4} {:<22} {:<22} {}{}\n", e.global_seq(),
                         events::utc_text(e.timestamp_ms()), events::event_type_name(e), generation,
                         detail, e.principal().empty() ? "-" : e.principal(),
                         e.request_id().empty() ? "-" : e.request_id(),
                         applied.ok() ? "" : "  (" + applied.message() + ")");
    }
  });
  if (!st.ok()) return fail(err, st);
  if (shown == 0)
    return fail(err, {errc::not_found, "no events for revision " +
                                           events::canonical_text(id) + " in the journal"});
  if (json) out << json_line(list_document(std::move(items))) << "\n";
  return 0;
}

int revision_history(const journal_location& where, const history_args& args, std::ostream& out,
                     std::ostream& err) {
  auto id = events::parse_canonical_text(args.id);
  if (!id) return fail(err, id.error());
  auto journal = open_read_only(where);
  if (!journal) return fail(err, journal.error());
  if (id->generation == 0) {  // the highest live generation (else the highest at all)
    auto state = persistence::fold_journal(**journal);
    if (!state) return fail(err, state.error());
    uint64_t live = 0, any = 0;
    for (const auto& [k, r] : state->revisions.revisions)
      if (k.same_lineage(*id)) {
        any = std::max(any, k.generation);
        if (r.availability != v1::DELETED) live = std::max(live, k.generation);
      }
    id->generation = live ? live : any;
    if (!id->generation)
      return fail(err, {errc::not_found, "no revision " + args.id + " in the journal"});
  }
  return print_history(
      *id,
      [&](const std::function<void(const v1::Envelope&)>& each) {
        return (*journal)->read_stream(events::revision_stream(*id), {},
                                       [&](const v1::Envelope& e) {
                                         each(e);
                                         return true;
                                       });
      },
      args.json, out, err);
}

}  // namespace weightd::api
