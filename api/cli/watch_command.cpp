#include "api/cli/watch_command.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <thread>

#include "api/cli/format.hpp"
#include "api/cli/online_support.hpp"
#include "events/event_type.hpp"

namespace weightd::api {

namespace {

/// Worth reconnecting for: the daemon is away (restarting), or it cut this
/// watcher for not taking events (stdout blocked for a while).
bool resumable(const status& st) {
  return is_daemon_unreachable(st) || st.code() == errc::resource_exhausted;
}

}  // namespace

int watch_events(const online_options& o, const watch_args& args, std::ostream& out,
                 std::ostream& err) {
  for (const auto& type : args.types)
    if (!events::is_event_type_name(type))
      return fail(err, {errc::invalid_argument, "--type '" + type + "' is not an event type"});
  client c{o.connection};
  uint64_t next = args.from;
  if (next == 0) {
    // "From now" is fixed once, here: a reconnect later must not skip what
    // was committed while the daemon was away.
    auto st = c.server_status();
    if (!st) return fail(err, st.error());
    next = st->journal_seq() + 1;
  }
  uint64_t printed = 0;
  auto backoff = std::chrono::milliseconds(100);
  bool away = false;  // the last attempt failed and nothing arrived since
  for (;;) {
    v1::WatchRequest req;
    req.set_from_seq(next);
    req.set_stream_prefix(args.stream);
    for (const auto& t : args.types) req.add_types(t);
    bool got_any = false;
    auto st = c.watch(req, [&](const events::v1::Envelope& e) {
      away = false;
      out << (o.json ? format_event_json(e) : format_event_line(e)) << "\n" << std::flush;
      next = e.global_seq() + 1;
      got_any = true;
      return args.count == 0 || ++printed < args.count;
    });
    if (st.ok() && args.count != 0 && printed >= args.count) return 0;
    if (!resumable(st)) return fail(err, st);
    if (got_any || !away) {  // said once per outage, not per attempt
      backoff = std::chrono::milliseconds(100);
      err << fmt::format("weightctl: watch interrupted ({}); reconnecting from seq {}\n",
                         st.message(), next);
    }
    away = true;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(5'000));
  }
}

}  // namespace weightd::api
