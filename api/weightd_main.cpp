// weightd: the daemon. This build opens (and recovers) the journal, records
// its incarnation, and runs until SIGINT/SIGTERM; the tiers and the gRPC API
// are added by the issues that build them.
#include <spdlog/spdlog.h>

#include <csignal>
#include <thread>
#include <unistd.h>

#include "actors/errors.hpp"
#include "actors/journal_writer.hpp"
#include "api/daemon_config.hpp"
#include "persistence/lmdb_journal.hpp"
#include "persistence/replay.hpp"

namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

/// Blocks until SIGINT or SIGTERM arrives (they are blocked in every thread).
int wait_for_shutdown_signal(sigset_t& signals) {
  int signal = 0;
  sigwait(&signals, &signal);
  return signal;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace weightd;
  // Block the shutdown signals before any thread starts, so only sigwait sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  CLI::App app{"weightd — model weights as first-class citizens of a store master"};
  api::daemon_config config;
  api::add_daemon_options(app, config);
  CLI11_PARSE(app, argc, argv);

  spdlog::set_level(spdlog::level::from_str(config.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l %v", spdlog::pattern_time_type::utc);

  persistence::lmdb_options journal_options;
  journal_options.dir = config.journal_path();
  journal_options.mode = config.durability();
  journal_options.initial_map_bytes = config.journal_initial_map_bytes;
  journal_options.max_map_bytes = config.journal_max_map_bytes;
  auto opened = persistence::lmdb_journal::open(journal_options);
  if (!opened) {
    spdlog::error("journal open failed path={} error=\"{}\"", journal_options.dir.string(),
                  opened.error().to_string());
    return 1;
  }
  std::shared_ptr<persistence::lmdb_journal> journal = std::move(*opened);

  auto recovered = persistence::fold_journal(*journal);
  if (!recovered) {
    spdlog::error("journal recovery failed error=\"{}\"; keep a copy of {} and run "
                  "`weightctl journal verify`",
                  recovered.error().to_string(), journal_options.dir.string());
    return 1;
  }

  caf::actor_system_config cfg;
  actors::add_error_category(cfg);
  unsigned threads = config.threads ? config.threads : std::thread::hardware_concurrency();
  cfg.set("scheduler.max-threads", static_cast<size_t>(std::max(1u, threads)));
  // Workers wait on a condition variable instead of polling with sleeps: a
  // reply to an appender whose commit just finished runs at once
  // (bench/journal_bench: 1 appender 0.9x of raw LMDB vs 0.6x with stealing).
  cfg.set("scheduler.policy", caf::atom("sharing"));
  caf::actor_system sys{cfg};
  auto writer = actors::spawn_journal_writer(sys, journal);

  // Record this incarnation: the first event of every daemon run.
  events::v1::Envelope started;
  started.set_stream("system");
  started.set_timestamp_ms(now_ms());
  auto* payload = started.mutable_writer_started();
  payload->set_writer_id(journal->writer_id());
  payload->set_version(WEIGHTD_VERSION);
  payload->set_hostname(host_name());
  caf::scoped_actor self{sys};
  status append_result;
  uint64_t start_seq = 0;
  self->request(writer, std::chrono::seconds(30), actors::append_atom::value,
                actors::event_batch{{started}})
      .receive([&](actors::event_batch& done) { start_seq = done.events.back().global_seq(); },
               [&](caf::error& err) { append_result = actors::to_status(err); });
  if (!append_result.ok()) {
    spdlog::error("cannot record the daemon start error=\"{}\"", append_result.to_string());
    self->send_exit(writer, caf::exit_reason::user_shutdown);
    return 1;
  }

  spdlog::info("weightd ready version={} journal={} writer_id={} journal_seq={} objects={}",
               WEIGHTD_VERSION, journal_options.dir.string(), journal->writer_id(),
               start_seq, recovered->objects.objects.size());

  int signal = wait_for_shutdown_signal(signals);
  spdlog::info("weightd stopping signal={}", signal == SIGINT ? "SIGINT" : "SIGTERM");
  self->send_exit(writer, caf::exit_reason::user_shutdown);
  return 0;
}
