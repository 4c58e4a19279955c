// weightd: the daemon. Recovers the journal, the tiers and the revisions,
// serves the gRPC API, and on SIGINT/SIGTERM stops accepting calls, drains the
// ones in flight, and stops the actors (every acknowledged change is already
// on disk: the journal fsyncs before it answers). Under systemd (Type=notify)
// it says READY=1 once it serves and STOPPING=1 when it begins to stop;
// without NOTIFY_SOCKET those notifications do nothing.
#include <google/protobuf/stubs/logging.h>
#include <grpc/support/log.h>
#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include <csignal>
#include <optional>
#include <fstream>
#include <iostream>
#include <cstring>
#include <thread>
#include <unistd.h>

#include "api/common/transfer_buffers.hpp"
#include "actors/errors.hpp"
#include "actors/node.hpp"
#include "api/server/daemon_config.hpp"
#include "api/server/follower.hpp"
#include "api/server/replica_mirror.hpp"
#include "api/server/standby_server.hpp"
#include "api/server/metrics.hpp"
#include "api/server/server.hpp"

namespace {

/// Blocks until SIGINT, SIGTERM, SIGHUP or SIGUSR2 arrives (blocked in every thread).
int wait_for_shutdown_signal(sigset_t& signals) {
  int signal = 0;
  sigwait(&signals, &signal);
  return signal;
}

/// In-flight calls get this long to finish after SIGTERM; then they are
/// cancelled (their clients see CANCELLED and retry, every acknowledged change
/// being durable). Short, so that a supervisor's stop is quick — systemd
/// waits 90 s before SIGKILL, Kubernetes 30 s — while a unary call (a few ms)
/// still finishes; idle connections do not hold the stop at all.
constexpr std::chrono::milliseconds kShutdownDrain{500};

/// The streams' limits, the leader's and a standby's.
weightd::api::stream_limit_options stream_options(const weightd::api::daemon_config& config) {
  return {config.max_streams,         config.max_streams_per_connection,
          config.put_idle_timeout,    config.watch_stall_timeout,
          config.max_puts_per_tenant, config.get_buffer_bytes};
}

/// weightd --follow: a standby (SPEC §11) copies its leader's journal into its
/// own and folds it (follower.hpp), and answers what a standby answers
/// (standby_server.hpp) until SIGINT or SIGTERM: then the exit code. A
/// Promote (SIGUSR2 from the standby server) stops the server and the
/// follower, writes leadership_taken with the next epoch and returns nullopt:
/// main() goes on as the leader on the same journal, the ordinary startup.
std::optional<int> run_standby(const weightd::api::daemon_config& config, sigset_t& signals) {
  using namespace weightd;
  api::follower_options options;
  options.leader.address = config.follow;
  options.leader.tls_ca_file = config.follow_tls_ca_file;
  options.snapshot_every = config.snapshot_every;
  options.member = config.listen;
  options.data_dir = config.data_dir;
  if (!config.follow_token_file.empty()) {
    std::ifstream in(config.follow_token_file);
    std::string token;
    if (!in || !std::getline(in, token) || token.empty()) {
      spdlog::error("weightd cannot read --follow-token-file {}: its first line is the admin "
                    "token the leader knows", config.follow_token_file);
      return api::kConfigErrorExit;
    }
    options.leader.token = token;
  }
  api::server_options serving;
  serving.listen = config.listen;
  serving.version = WEIGHTD_VERSION;
  serving.tls_cert_file = config.tls_cert_file;
  serving.tls_key_file = config.tls_key_file;
  serving.tls_client_ca_file = config.tls_client_ca_file;
  serving.streams = stream_options(config);
  auto auth = api::authenticator::open(config.auth_tokens_file);
  if (!auth) {
    spdlog::error("weightd cannot serve error=\"{}\"", auth.error().to_string());
    return api::kConfigErrorExit;
  }
  serving.auth = *auth;
  persistence::lmdb_options journal;
  journal.dir = config.journal_path();
  journal.mode = config.durability();
  journal.initial_map_bytes = config.journal_initial_map_bytes;
  journal.max_map_bytes = config.journal_max_map_bytes;
  // One weightd per journal: a leader started by mistake on this data
  // directory is refused. A promotion lets go of it just before the
  // leader's startup takes it again.
  auto lock = persistence::directory_lock::take(journal.dir);
  if (!lock) {
    spdlog::error("weightd cannot start as a standby error=\"{}\"", lock.error().to_string());
    return 1;
  }
  std::shared_ptr<persistence::journal_backend> backend;
  {
    auto opened = persistence::lmdb_journal::open(journal);
    if (!opened) {
      spdlog::error("weightd cannot open its journal error=\"{}\"", opened.error().to_string());
      return 1;
    }
    backend = std::move(*opened);
  }
  auto standby = api::follower::start(backend, options);
  if (!standby) {
    spdlog::error("weightd cannot start as a standby error=\"{}\"", standby.error().to_string());
    return standby.error().code() == errc::invalid_argument ? api::kConfigErrorExit : 1;
  }
  // The replicas' bytes, in the tiers the leader's startup will look at
  // once this standby is promoted.
  api::mirror_options copying;
  copying.leader = options.leader;
  copying.parallelism = config.mirror_parallelism;
  copying.rate_bytes = config.mirror_rate_bytes;
  copying.checksums = config.verify_on_start == "checksum";
  actors::tiers files{
      std::make_shared<persistence::tier_store>(persistence::tier_options{
          events::v1::TIER_HOT, config.hot_path(), config.hot_capacity_bytes, false}),
      std::make_shared<persistence::tier_store>(persistence::tier_options{
          events::v1::TIER_COLD, config.cold_path(), config.cold_capacity_bytes, true})};
  auto mirror = api::replica_mirror::start(**standby, files, copying);
  if (!mirror) {
    spdlog::error("weightd cannot start as a standby error=\"{}\"; check --hot-dir and "
                  "--cold-dir", mirror.error().to_string());
    return 1;
  }
  // History and Watch read the journal through the leader's journal reader:
  // a small actor system of the standby's own, gone before a promotion
  // starts the leader's.
  caf::actor_system_config cfg;
  actors::add_error_category(cfg);
  cfg.set("scheduler.max-threads", size_t{2});
  cfg.set("scheduler.policy", caf::atom("sharing"));  // idle workers sleep, as the leader's
  caf::actor_system sys{cfg};
  auto server = api::standby_server::start(sys, **standby, **mirror, backend, config.follow,
                                           serving, [] { ::kill(::getpid(), SIGUSR2); });
  if (!server) {
    spdlog::error("weightd cannot serve error=\"{}\"", server.error().to_string());
    return server.error().code() == errc::invalid_argument ? api::kConfigErrorExit : 1;
  }
  api::metrics_server::source figures;
  figures.families = [&] {
    return api::standby_families((*standby)->status(), (*mirror)->status(), WEIGHTD_VERSION);
  };
  figures.failure = [&]() -> std::string {
    auto failure = (*standby)->status().failure;
    return failure.empty() ? "" : "the standby stopped following: " + failure;
  };
  auto metrics = api::metrics_server::start(std::move(figures), config.http_listen);
  if (!metrics) {
    spdlog::error("weightd cannot serve metrics error=\"{}\"", metrics.error().to_string());
    return 1;
  }
  spdlog::info("weightd standby ready version={} listen={} leader={} journal={} journal_seq={} "
               "epoch={}", WEIGHTD_VERSION, config.listen, config.follow, journal.dir.string(),
               (*standby)->status().durable_seq, (*standby)->status().epoch);
  sd_notifyf(0, "READY=1\nSTATUS=standby of %s", config.follow.c_str());
  int signal = wait_for_shutdown_signal(signals);
  while (signal == SIGHUP) {
    if (serving.auth->secured() && !serving.auth->reload().ok())
      spdlog::warn("tokens file not re-read, the tokens loaded before stay; fix the file and "
                   "send SIGHUP again");
    signal = wait_for_shutdown_signal(signals);
  }
  (*server)->shutdown(kShutdownDrain);  // a Promote's answer goes out first
  server->reset();
  sys.await_all_actors_done();  // the journal reader let go of the journal
  metrics->reset();
  (*mirror)->stop();  // copies in flight are cut short; their temp files go
  (*standby)->stop();
  if (signal != SIGUSR2) {
    sd_notify(0, "STOPPING=1");
    spdlog::info("weightd standby stopped journal_seq={}", (*standby)->status().durable_seq);
    return 0;
  }
  auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  auto epoch = api::take_leadership(*backend, config.listen, config.listen, now_ms);
  mirror->reset();
  standby->reset();
  if (epoch && backend.use_count() != 1) {  // a bug: two LMDB environments on one file corrupt it
    spdlog::critical("promotion: the standby's journal is still open elsewhere; weightd stops. "
                     "It is the leader at epoch {}: start it again without --follow", *epoch);
    return 70;
  }
  backend.reset();  // the leader opens the journal again: one environment per process
  if (!epoch) {
    spdlog::error("promotion failed error=\"{}\"; weightd stops, its journal is as it was",
                  epoch.error().to_string());
    return 1;
  }
  spdlog::warn("weightd promoted epoch={} previous_leader={}; starting as the leader", *epoch,
               config.follow);
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace weightd;
  api::keep_transfer_buffers();
  // Block the shutdown signals before any thread starts, so only sigwait sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);   // re-reads the tokens file
  sigaddset(&signals, SIGUSR2);  // a standby's Promote (standby_server.hpp)
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  CLI::App app{"weightd — model weights as first-class citizens of a store master"};
  api::daemon_config config;
  api::add_daemon_options(app, config, WEIGHTD_VERSION);
  // --help and --version exit 0; a configuration error exits 64 naming the flag or key.
  if (auto exit_code = api::parse_daemon_command_line(app, argc, argv, std::cout, std::cerr))
    return *exit_code;

  spdlog::set_level(spdlog::level::from_str(config.log_level));
  // A request with invalid UTF-8 in a string field is refused by gRPC; the
  // parser's own complaint is client input, not a daemon problem: debug only.
  google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char*, int,
                                     const std::string& message) {
    spdlog::debug("protobuf: {}", message);
  });
  // gRPC's own lines (a client whose TLS handshake failed, ...) are about
  // callers, not the daemon: debug, in weightd's log format.
  gpr_set_log_function([](gpr_log_func_args* args) { spdlog::debug("grpc: {}", args->message); });
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l %v", spdlog::pattern_time_type::utc);

  if (!config.follow.empty())
    if (auto exit_code = run_standby(config, signals)) return *exit_code;

  caf::actor_system_config cfg;
  actors::add_error_category(cfg);
  unsigned threads = config.threads ? config.threads : std::thread::hardware_concurrency();
  cfg.set("scheduler.max-threads", static_cast<size_t>(std::max(1u, threads)));
  // Workers wait on a condition variable instead of polling with sleeps: a
  // reply to an appender whose commit just finished runs at once
  // (bench/journal_bench: 1 appender 0.9x of raw LMDB vs 0.6x with stealing).
  cfg.set("scheduler.policy", caf::atom("sharing"));
  caf::actor_system sys{cfg};

  actors::node_config node_config;
  node_config.journal.dir = config.journal_path();
  node_config.journal.mode = config.durability();
  node_config.journal.initial_map_bytes = config.journal_initial_map_bytes;
  node_config.journal.max_map_bytes = config.journal_max_map_bytes;
  node_config.hot = {events::v1::TIER_HOT, config.hot_path(), config.hot_capacity_bytes, false};
  node_config.cold = {events::v1::TIER_COLD, config.cold_path(), config.cold_capacity_bytes, true};
  node_config.io_workers = config.io_workers;
  node_config.snapshot_every = config.snapshot_every;
  node_config.lease_recovery_grace_ms = config.lease_recovery_grace.count();
  node_config.reconciler.interval = config.reconcile_interval;
  node_config.reconciler.max_actions = config.reconcile_max_actions;
  node_config.reconciler.auto_cooldown_ms = config.auto_cooldown.count();
  node_config.reconciler.import_abandon = config.import_abandon;
  node_config.migration.round_members = config.migration_round_members;
  node_config.migration.round_bytes = config.migration_round_bytes;
  node_config.migration.rate_bytes = config.migration_rate_bytes;
  node_config.objects.read_lease = config.object_read_lease;
  node_config.objects.put_timeout = config.import_abandon;  // an abandoned put is reclaimed then
  node_config.scrub.rate_bytes = config.scrub_rate_bytes;
  node_config.objects.high_watermark = config.high_watermark;
  node_config.objects.eviction_ratio = config.eviction_ratio;
  node_config.objects.tenant_reserve_ratio = config.tenant_reserve_ratio;
  node_config.verify_checksums_on_start = config.verify_on_start == "checksum";
  node_config.version = WEIGHTD_VERSION;
  // A core actor that stopped: stop serving like on SIGTERM, then exit 70.
  node_config.on_failure = [](const std::string&) { ::kill(::getpid(), SIGTERM); };
  auto started = actors::node::start(sys, node_config);
  if (!started) {
    spdlog::error("weightd cannot start error=\"{}\"", started.error().to_string());
    return 1;
  }
  auto& node = **started;
  const auto& report = node.recovery();
  if (report.lost_replicas + report.corrupt_replicas > 0)
    spdlog::warn("replicas dropped at startup lost={} corrupt={} (their files were missing or "
                 "damaged; objects without a replica left are unreadable)",
                 report.lost_replicas, report.corrupt_replicas);
  api::server_options server_options;
  server_options.listen = config.listen;
  server_options.version = WEIGHTD_VERSION;
  server_options.metrics = std::make_shared<api::rpc_metrics>();
  server_options.streams = stream_options(config);
  server_options.local_reads = config.local_reads;
  server_options.sync = std::make_shared<api::sync_gate>(config.sync_standbys, config.sync_timeout);
  auto auth = api::authenticator::open(config.auth_tokens_file);
  if (!auth) {  // the tokens file named by the configuration: a configuration error
    spdlog::error("weightd cannot serve error=\"{}\"", auth.error().to_string());
    node.stop();
    return api::kConfigErrorExit;
  }
  server_options.auth = *auth;
  server_options.tls_cert_file = config.tls_cert_file;
  server_options.tls_key_file = config.tls_key_file;
  server_options.tls_client_ca_file = config.tls_client_ca_file;
  auto server = api::grpc_server::start(sys, node, server_options);
  if (!server) {
    spdlog::error("weightd cannot serve error=\"{}\"", server.error().to_string());
    node.stop();
    // Flags that do not go together (a public --listen without tokens and
    // TLS, a TLS file without its pair) are configuration errors; a port in
    // use is not.
    return server.error().code() == errc::invalid_argument ? api::kConfigErrorExit : 1;
  }
  auto metrics = api::metrics_server::start(sys, node, server_options.metrics, config.http_listen,
                                            WEIGHTD_VERSION);
  if (!metrics) {
    spdlog::error("weightd cannot serve metrics error=\"{}\"", metrics.error().to_string());
    server->reset();
    node.stop();
    return 1;
  }
  spdlog::info("weightd ready version={} listen={} journal={} writer_id={} journal_seq={} revisions={} "
               "objects={} hot_bytes={} cold_bytes={} orphan_files_removed={} startup_seconds={:.3f}",
               WEIGHTD_VERSION, config.listen, node_config.journal.dir.string(), node.writer_id(),
               report.applied_seq, report.revisions, report.objects, report.hot_bytes,
               report.cold_bytes, report.orphan_files,
               node.startup_seconds());
  if (int rc = sd_notifyf(0, "READY=1\nSTATUS=serving %s, metrics on %s", config.listen.c_str(),
                          config.http_listen.c_str());
      rc < 0)
    spdlog::warn("weightd cannot tell systemd it is ready (sd_notify: {})", std::strerror(-rc));

  int signal = wait_for_shutdown_signal(signals);
  for (; signal == SIGHUP || signal == SIGUSR2; signal = wait_for_shutdown_signal(signals)) {
    if (signal == SIGUSR2) continue;  // a leader has nothing to be promoted to
    if (!server_options.auth->secured()) {
      spdlog::info("SIGHUP: no --auth-tokens-file to re-read");
      continue;
    }
    if (auto st = server_options.auth->reload(); st.ok())
      spdlog::info("tokens file re-read file={}", config.auth_tokens_file);
    else
      spdlog::warn("tokens file not re-read, the tokens loaded before stay error=\"{}\"; fix "
                   "the file and send SIGHUP again", st.message());
  }
  sd_notify(0, "STOPPING=1");
  auto failure = node.health().failure();
  if (failure.empty())
    spdlog::info("weightd stopping signal={}", signal == SIGINT ? "SIGINT" : "SIGTERM");
  auto stop_started = std::chrono::steady_clock::now();
  (*server)->shutdown(kShutdownDrain);  // stop accepting, drain in-flight calls
  server->reset();
  metrics->reset();
  node.stop();
  spdlog::info("weightd stopped in {:.3f} s", std::chrono::duration<double>(
                                                 std::chrono::steady_clock::now() - stop_started)
                                                 .count());
  if (!failure.empty()) {
    spdlog::error("weightd stopped because {}; exit 70 (a supervisor restarts it)", failure);
    return 70;  // EX_SOFTWARE
  }
  return 0;
}
