#include "api/journal_commands.hpp"

#include <spdlog/fmt/fmt.h>

#include <map>

#include "api/exit_codes.hpp"
#include "api/format.hpp"
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

}  // namespace

int journal_dump(const journal_location& where, const dump_args& args, std::ostream& out,
                 std::ostream& err) {
  if (!args.type.empty() && !events::is_event_type_name(args.type)) {
    std::string known;
    for (const auto& name : events::all_event_type_names()) known += " " + name;
    return fail(err, {errc::invalid_argument,
                      "--type '" + args.type + "' is not an event type; known:" + known});
  }
  auto journal = open_read_only(where);
  if (!journal) return fail(err, journal.error());
  auto print = [&](const events::v1::Envelope& e) {
    out << (args.json ? format_event_json(e) : format_event_line(e)) << "\n";
    return true;
  };
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
    out << "{\"path\":" << json_string(where.path()) << ",\"highest_seq\":" << stats->highest_seq
        << ",\"events\":" << stats->event_count << ",\"streams\":" << stats->stream_count
        << ",\"snapshots\":" << stats->snapshot_count
        << ",\"incarnation\":" << stats->incarnation << ",\"map_bytes\":" << stats->map_bytes
        << ",\"used_bytes\":" << stats->used_bytes << ",\"first_event_ms\":" << first_ms
        << ",\"last_event_ms\":" << last_ms << ",\"by_type\":{";
    bool first = true;
    for (const auto& [type, count] : by_type) {
      out << (first ? "" : ",") << json_string(type) << ":" << count;
      first = false;
    }
    out << "}}\n";
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
    out << fmt::format("time span    {} .. {}\n", format_time_ms(first_ms),
                       format_time_ms(last_ms));
  for (const auto& [type, count] : by_type) out << fmt::format("  {:<24}{}\n", type, count);
  return 0;
}

}  // namespace weightd::api
