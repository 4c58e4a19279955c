// The daemon's flags and config file (SPEC §8 defaults, SPEC §10 units):
// parsed with the real add_daemon_options on a CLI::App, no daemon started.
#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "api/server/daemon_config.hpp"

using namespace weightd::api;
using namespace std::chrono_literals;

namespace {

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t GiB = 1ull << 30;

/// What a parse gave: the config, or CLI11's error message ("" when it parsed).
struct parsed {
  daemon_config config;
  std::string error;
};

/// Parses a command line (without the program name) as weightd would.
parsed parse(const std::string& command_line) {
  parsed out;
  CLI::App app{"weightd"};
  add_daemon_options(app, out.config);
  try {
    app.parse(command_line, false);
  } catch (const CLI::ParseError& e) {
    out.error = e.what();
    if (out.error.empty()) out.error = "(a ParseError without a message)";
  }
  return out;
}

/// A config file in the temp directory, removed at the end of the test.
class temp_config {
 public:
  explicit temp_config(const std::string& text) {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("weightd_config_test_" + std::to_string(getpid()) + "_" +
             std::to_string(counter++) + ".toml");
    std::ofstream{path_} << text;
  }
  ~temp_config() { std::filesystem::remove(path_); }
  temp_config(const temp_config&) = delete;
  temp_config& operator=(const temp_config&) = delete;
  /// "--config <file>", to put in front of a command line.
  std::string flag() const { return "--config " + path_.string() + " "; }

 private:
  std::filesystem::path path_;
};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("daemon config: every SPEC §8 default is the flag's default") {
  auto p = parse("");
  REQUIRE(p.error == "");
  const daemon_config& c = p.config;
  // The numbers as SPEC §8 writes them.
  CHECK(c.listen == "127.0.0.1:7070");
  CHECK(c.http_listen == "127.0.0.1:7071");
  CHECK(c.data_dir == "./var");
  CHECK(c.hot_path() == "/dev/shm/weightd-7070");
  CHECK(c.cold_path() == "./var/cold");
  CHECK(c.journal_path() == "./var/journal");
  CHECK(c.hot_capacity_bytes == 1 * GiB);
  CHECK(c.cold_capacity_bytes == 0);  // unlimited
  CHECK(c.snapshot_every == 10'000);
  CHECK(c.object_read_lease == 10s);
  CHECK(c.lease_recovery_grace == 10s);
  CHECK(c.import_abandon == 5min);
  CHECK(c.reconcile_interval == 1s);
  CHECK(c.reconcile_max_actions == 64);
  CHECK(c.migration_round_members == 64);
  CHECK(c.migration_round_bytes == 1 * GiB);
  CHECK(c.auto_cooldown == 30s);
  CHECK(c.high_watermark == doctest::Approx(0.90));
  CHECK(c.eviction_ratio == doctest::Approx(0.05));
  CHECK(c.scrub_rate_bytes == 64 * MiB);
  // And a parse without flags leaves the struct's initializers as they are.
  daemon_config fresh;
  CHECK(c.import_abandon == fresh.import_abandon);
  CHECK(c.scrub_rate_bytes == fresh.scrub_rate_bytes);
  CHECK(c.journal_initial_map_bytes == fresh.journal_initial_map_bytes);
  CHECK(c.journal_max_map_bytes == fresh.journal_max_map_bytes);
}

TEST_CASE("daemon config: every SPEC §8 knob is a daemon flag") {
  auto p = parse(
      "--import-abandon 10m --reconcile-interval 2s --reconcile-max-actions 8 "
      "--migration-round-members 16 --migration-round-bytes 256MiB --auto-cooldown 1m "
      "--high-watermark 0.8 --eviction-ratio 0.1 --scrub-rate 8MiB --object-read-lease 3s "
      "--lease-recovery-grace 20s --snapshot-every 500");
  REQUIRE(p.error == "");
  const daemon_config& c = p.config;
  CHECK(c.import_abandon == 10min);
  CHECK(c.reconcile_interval == 2s);
  CHECK(c.reconcile_max_actions == 8);
  CHECK(c.migration_round_members == 16);
  CHECK(c.migration_round_bytes == 256 * MiB);
  CHECK(c.auto_cooldown == 1min);
  CHECK(c.high_watermark == doctest::Approx(0.8));
  CHECK(c.eviction_ratio == doctest::Approx(0.1));
  CHECK(c.scrub_rate_bytes == 8 * MiB);
  CHECK(c.object_read_lease == 3s);
  CHECK(c.lease_recovery_grace == 20s);
  CHECK(c.snapshot_every == 500);
}

TEST_CASE("daemon config: durations take units in flags") {
  CHECK(parse("--reconcile-interval 250ms").config.reconcile_interval == 250ms);
  CHECK(parse("--auto-cooldown 30s").config.auto_cooldown == 30s);
  CHECK(parse("--import-abandon 5m").config.import_abandon == 5min);
  CHECK(parse("--import-abandon 1h").config.import_abandon == 1h);
  CHECK(parse("--object-read-lease 1.5s").config.object_read_lease == 1500ms);
  CHECK(parse("--auto-cooldown=45s").config.auto_cooldown == 45s);
  CHECK(parse("--auto-cooldown 0").config.auto_cooldown == 0ms);  // 0 needs no unit
}

TEST_CASE("daemon config: a duration without a unit is an error naming the flag") {
  auto p = parse("--auto-cooldown 30");
  CHECK(contains(p.error, "--auto-cooldown"));
  CHECK(contains(p.error, "no unit"));
  CHECK(contains(parse("--import-abandon 5min").error, "--import-abandon"));
  CHECK(contains(parse("--import-abandon 5min").error, "unknown unit \"min\""));
  CHECK(contains(parse("--object-read-lease -1s").error, "--object-read-lease"));
}

TEST_CASE("daemon config: the -ms spellings stay as aliases taking plain milliseconds") {
  CHECK(parse("--reconcile-interval-ms 500").config.reconcile_interval == 500ms);
  CHECK(parse("--lease-recovery-grace-ms 2500").config.lease_recovery_grace == 2500ms);
  CHECK(parse("--lease-recovery-grace-ms 0").config.lease_recovery_grace == 0ms);
  // They take plain milliseconds only, and keep their old ranges.
  auto with_unit = parse("--reconcile-interval-ms 5s");
  CHECK(contains(with_unit.error, "--reconcile-interval-ms"));
  CHECK(contains(with_unit.error, "plain number of milliseconds"));
  CHECK(contains(parse("--reconcile-interval-ms 5").error, "--reconcile-interval-ms"));
  CHECK(contains(parse("--reconcile-interval-ms 60001").error, "--reconcile-interval-ms"));
  // Both spellings at once: which should win? Neither.
  auto both = parse("--reconcile-interval 2s --reconcile-interval-ms 500");
  CHECK(contains(both.error, "--reconcile-interval"));
  CHECK(contains(both.error, "excludes"));
}

TEST_CASE("daemon config: sizes take units") {
  CHECK(parse("--migration-round-bytes 8GiB").config.migration_round_bytes == 8 * GiB);
  CHECK(parse("--migration-round-bytes 1MiB").config.migration_round_bytes == 1 * MiB);
  CHECK(parse("--hot-capacity 64MiB").config.hot_capacity_bytes == 64 * MiB);
  CHECK(parse("--hot-capacity 1.5GiB").config.hot_capacity_bytes == 3 * GiB / 2);
  CHECK(parse("--cold-capacity 2TB").config.cold_capacity_bytes == 2'000'000'000'000);
  CHECK(parse("--cold-capacity 4096").config.cold_capacity_bytes == 4096);  // bare = bytes
  CHECK(parse("--journal-max-map 1TiB").config.journal_max_map_bytes == 1024 * GiB);
  // A rate: a size per second, "/s" optional, 0 = off.
  CHECK(parse("--scrub-rate 64MiB/s").config.scrub_rate_bytes == 64 * MiB);
  CHECK(parse("--scrub-rate 100MB").config.scrub_rate_bytes == 100'000'000);
  CHECK(parse("--scrub-rate 0").config.scrub_rate_bytes == 0);
  CHECK(parse("--migration-rate 200MiB/s").config.migration_rate_bytes == 200 * MiB);
  CHECK(daemon_config{}.migration_rate_bytes == 0);  // no limit unless asked
  auto bad = parse("--hot-capacity 8G");
  CHECK(contains(bad.error, "--hot-capacity"));
  CHECK(contains(bad.error, "unknown unit \"G\""));
}

TEST_CASE("daemon config: the -bytes spellings stay as aliases taking plain bytes") {
  CHECK(parse("--hot-capacity-bytes 4096").config.hot_capacity_bytes == 4096);
  CHECK(parse("--cold-capacity-bytes 0").config.cold_capacity_bytes == 0);
  CHECK(parse("--journal-initial-map-bytes 1048576").config.journal_initial_map_bytes == MiB);
  auto with_unit = parse("--hot-capacity-bytes 1GiB");
  CHECK(contains(with_unit.error, "--hot-capacity-bytes"));
  CHECK(contains(with_unit.error, "plain number of bytes"));
  CHECK(contains(parse("--hot-capacity 1GiB --hot-capacity-bytes 4096").error, "excludes"));
}

TEST_CASE("daemon config: the duration and size parsers read what operators write") {
  CHECK(*parse_duration("250ms") == 250ms);
  CHECK(*parse_duration("30s") == 30s);
  CHECK(*parse_duration("5m") == 5min);
  CHECK(*parse_duration("1h") == 1h);
  CHECK(*parse_duration("1.5s") == 1500ms);
  CHECK(*parse_duration("0.25h") == 15min);
  CHECK(*parse_duration(" 10 s ") == 10s);
  CHECK(*parse_duration("0") == 0ms);
  CHECK_FALSE(parse_duration("30").ok());       // seconds or milliseconds?
  CHECK_FALSE(parse_duration("").ok());
  CHECK_FALSE(parse_duration("s").ok());
  CHECK_FALSE(parse_duration("-5s").ok());
  CHECK_FALSE(parse_duration("1.2.3s").ok());
  CHECK_FALSE(parse_duration("1.0005s").ok());  // finer than a millisecond
  CHECK_FALSE(parse_duration("30sec").ok());
  CHECK_FALSE(parse_duration("99999999999999999999h").ok());
  CHECK(contains(parse_duration("1.0005s").error().message(), "whole number of milliseconds"));

  CHECK(*parse_size("0") == 0);
  CHECK(*parse_size("1024") == 1024);
  CHECK(*parse_size("512B") == 512);
  CHECK(*parse_size("64KiB") == 64 * 1024);
  CHECK(*parse_size("1MiB") == MiB);
  CHECK(*parse_size("8GiB") == 8 * GiB);
  CHECK(*parse_size("1TiB") == 1024 * GiB);
  CHECK(*parse_size("1kB") == 1000);
  CHECK(*parse_size("1KB") == 1000);
  CHECK(*parse_size("1MB") == 1'000'000);
  CHECK(*parse_size("1GB") == 1'000'000'000);
  CHECK(*parse_size("1.25MiB") == 1'310'720);
  CHECK(*parse_size("0.1TB") == 100'000'000'000);
  CHECK_FALSE(parse_size("1.5B").ok());    // half a byte
  CHECK_FALSE(parse_size("1.1GiB").ok());  // 1181116006.4 bytes
  CHECK_FALSE(parse_size("64mib").ok());
  CHECK_FALSE(parse_size("8G").ok());
  CHECK_FALSE(parse_size("-1").ok());
  CHECK_FALSE(parse_size("GiB").ok());
  CHECK_FALSE(parse_size("16777216TiB").ok());  // 2^64 bytes

  // The help texts' spellings read back as the same values.
  for (std::chrono::milliseconds d : {0ms, 250ms, 1500ms, 30000ms, 300000ms, 3600000ms})
    CHECK(*parse_duration(format_duration(d)) == d);
  for (uint64_t b : {uint64_t{0}, uint64_t{1000}, 64 * MiB, GiB, 1024 * GiB})
    CHECK(*parse_size(format_size(b)) == b);
  CHECK(format_duration(5min) == "5m");
  CHECK(format_duration(1500ms) == "1500ms");
  CHECK(format_size(64 * MiB) == "64MiB");
}

TEST_CASE("daemon config: out of range values are refused naming the flag") {
  CHECK(contains(parse("--reconcile-interval 5ms").error, "--reconcile-interval"));  // ≥ 10ms
  CHECK(contains(parse("--reconcile-interval 2m").error, "--reconcile-interval"));
  CHECK(contains(parse("--import-abandon 25h").error, "--import-abandon"));            // ≤ 24h
  CHECK(contains(parse("--lease-recovery-grace 25h").error, "--lease-recovery-grace"));
  CHECK(contains(parse("--migration-round-members 0").error, "--migration-round-members"));
  CHECK(contains(parse("--reconcile-max-actions 0").error, "--reconcile-max-actions"));
  CHECK(contains(parse("--migration-round-bytes 1KiB").error, "--migration-round-bytes"));
  CHECK(parse("--reconcile-interval 10ms").error == "");
  CHECK(parse("--import-abandon 24h").error == "");
}

TEST_CASE("daemon config: bad watermarks are refused") {
  for (const char* bad : {"0", "1", "1.5", "-0.1", "nan", "high"}) {
    CAPTURE(bad);
    CHECK(contains(parse(std::string{"--high-watermark "} + bad).error, "--high-watermark"));
    CHECK(contains(parse(std::string{"--eviction-ratio "} + bad).error, "--eviction-ratio"));
  }
  // The promotion line high − 2 × ratio must stay above an empty tier.
  auto too_wide = parse("--high-watermark 0.9 --eviction-ratio 0.45");
  CHECK(contains(too_wide.error, "--eviction-ratio"));
  CHECK(contains(too_wide.error, "--high-watermark"));
  CHECK(contains(parse("--high-watermark 0.2 --eviction-ratio 0.3").error, "--eviction-ratio"));
  CHECK(parse("--high-watermark 0.9 --eviction-ratio 0.44").error == "");
  CHECK(validate(daemon_config{}) == "");
}

TEST_CASE("daemon config: a config file may give durations with units") {
  temp_config file{
      "# weightd.toml\n"
      "auto-cooldown = \"45s\"\n"
      "import-abandon = 10m\n"
      "object-read-lease = 1.5s  # a comment after a value\n"
      "reconcile-interval-ms = 250\n"
      "migration-round-bytes = \"2 GiB\"\n"
      "hot-capacity = 8GiB\n"
      "scrub-rate = \"32MiB/s\"\n"
      "high-watermark = 0.8\n"
      "snapshot-every = 100\n"};
  auto p = parse(file.flag());
  REQUIRE(p.error == "");
  CHECK(p.config.auto_cooldown == 45s);
  CHECK(p.config.import_abandon == 10min);
  CHECK(p.config.object_read_lease == 1500ms);
  CHECK(p.config.reconcile_interval == 250ms);
  CHECK(p.config.migration_round_bytes == 2 * GiB);
  CHECK(p.config.hot_capacity_bytes == 8 * GiB);
  CHECK(p.config.scrub_rate_bytes == 32 * MiB);
  CHECK(p.config.high_watermark == doctest::Approx(0.8));
  CHECK(p.config.snapshot_every == 100);

  // The command line wins over the file, also under the other spelling.
  CHECK(parse(file.flag() + "--auto-cooldown 5s").config.auto_cooldown == 5s);
  CHECK(parse(file.flag() + "--reconcile-interval 2s").config.reconcile_interval == 2s);
  CHECK(parse(file.flag() + "--hot-capacity-bytes 4096").config.hot_capacity_bytes == 4096);
  // Both spellings in one file: which should win? Neither.
  temp_config both{"reconcile-interval = \"2s\"\nreconcile-interval-ms = 500\n"};
  CHECK(contains(parse(both.flag()).error, "excludes"));
  // A bad value in the file is an error naming its key.
  temp_config bad{"auto-cooldown = 30\n"};
  CHECK(contains(parse(bad.flag()).error, "--auto-cooldown"));
  CHECK(contains(parse(bad.flag()).error, "no unit"));
}

TEST_CASE("daemon config: an unknown config key is an error naming it") {
  temp_config file{"listen = \"127.0.0.1:9000\"\nretention-days = 7\n"};
  auto p = parse(file.flag());
  CHECK(contains(p.error, "unknown config key"));
  CHECK(contains(p.error, "retention-days"));
  // Watermarks in a file go through the same checks as on the command line.
  temp_config bad{"eviction-ratio = 0.6\n"};
  CHECK(contains(parse(bad.flag()).error, "--eviction-ratio"));
}

TEST_CASE("daemon config: an unknown config section is an error naming it") {
  // Keys of real flags under a section are not silently dropped.
  temp_config section{"listen = \"127.0.0.1:9000\"\n[weightd]\nauto-cooldown = \"45s\"\n"};
  auto p = parse(section.flag());
  CHECK(contains(p.error, "unknown config section [weightd]"));
  // An empty section, and a dotted key (a section in disguise).
  temp_config empty{"[tuning]\n"};
  CHECK(contains(parse(empty.flag()).error, "unknown config section [tuning]"));
  temp_config dotted{"reconciler.interval = \"2s\"\n"};
  CHECK(contains(parse(dotted.flag()).error, "unknown config section [reconciler]"));
}

TEST_CASE("daemon config: a non-loopback --http-listen needs --http-listen-public") {
  auto refused = parse("--http-listen 0.0.0.0:7071");
  CHECK(refused.error.find("--http-listen 0.0.0.0:7071 is not a loopback address") != std::string::npos);
  CHECK(refused.error.find("--http-listen-public") != std::string::npos);
  auto allowed = parse("--http-listen 0.0.0.0:7071 --http-listen-public");
  CHECK(allowed.error.empty());
  CHECK(allowed.config.http_listen_public);
  CHECK(parse("--http-listen [::1]:7071").error.empty());
}

namespace {

/// What weightd's command line parse gave: its exit code (nullopt: the daemon
/// would start) and what it printed on stdout and stderr.
struct command_line_outcome {
  std::optional<int> exit_code;
  std::string out, err;
  daemon_config config;
};

/// Runs parse_daemon_command_line, as weightd's main does, on `args`.
command_line_outcome run_command_line(std::vector<std::string> args,
                                      const std::string& version = "9.8.7") {
  command_line_outcome o;
  CLI::App app{"weightd"};
  add_daemon_options(app, o.config, version);
  args.insert(args.begin(), "weightd");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  o.exit_code = parse_daemon_command_line(app, static_cast<int>(argv.size()), argv.data(), out, err);
  o.out = out.str();
  o.err = err.str();
  return o;
}

/// The config file's path (temp_config::flag() without "--config ").
std::string path_of(const temp_config& file) {
  auto flag = file.flag();
  return flag.substr(std::string{"--config "}.size(), flag.size() - std::string{"--config "}.size() - 1);
}

}  // namespace

TEST_CASE("daemon config: --version prints weightd and its version and exits 0") {
  auto o = run_command_line({"--version"});
  REQUIRE(o.exit_code.has_value());
  CHECK(*o.exit_code == 0);
  CHECK(o.out == "weightd 9.8.7\n");
  CHECK(o.err.empty());
  // --help too is a success, and lists --version.
  auto help = run_command_line({"--help"});
  CHECK(help.exit_code == std::optional<int>{0});
  CHECK(contains(help.out, "--version"));
  CHECK(contains(help.out, "--import-abandon"));
}

TEST_CASE("daemon config: a good command line starts the daemon") {
  auto o = run_command_line({"--auto-cooldown", "45s"});
  CHECK_FALSE(o.exit_code.has_value());
  CHECK(o.out.empty());
  CHECK(o.err.empty());
  CHECK(o.config.auto_cooldown == 45s);
}

TEST_CASE("daemon config: every config error exits with the one config error code, naming the "
          "flag, key or file") {
  CHECK(kConfigErrorExit == 64);
  auto check_refused = [](const command_line_outcome& o, const std::vector<std::string>& named) {
    REQUIRE(o.exit_code.has_value());
    CHECK(*o.exit_code == kConfigErrorExit);
    CHECK(o.out.empty());
    CHECK(o.err.rfind("weightd: ", 0) == 0);
    CHECK(std::count(o.err.begin(), o.err.end(), '\n') == 1);  // one line
    for (const auto& n : named) {
      CAPTURE(n);
      CHECK(contains(o.err, n));
    }
  };
  // Bad values and combinations on the command line.
  check_refused(run_command_line({"--auto-cooldown", "30"}), {"--auto-cooldown", "no unit"});
  check_refused(run_command_line({"--no-such-flag"}), {"--no-such-flag"});
  check_refused(run_command_line({"--high-watermark", "0.9", "--eviction-ratio", "0.45"}),
                {"--eviction-ratio"});
  // In the file: a bad value names its key, an unknown key or section its
  // name, file and line.
  temp_config bad_value{"import-abandon = \"5min\"\n"};
  check_refused(run_command_line({"--config", path_of(bad_value)}),
                {"--import-abandon", "unknown unit \"min\""});
  temp_config typo{"# tuning\nlisten = \"127.0.0.1:9000\"\nreconcile-intreval = \"2s\"\n"};
  check_refused(run_command_line({"--config", path_of(typo)}),
                {path_of(typo) + ":3", "unknown config key \"reconcile-intreval\""});
  temp_config section{"listen = \"127.0.0.1:9000\"\n\n[weightd]\nauto-cooldown = \"45s\"\n"};
  check_refused(run_command_line({"--config", path_of(section)}),
                {path_of(section) + ":3", "unknown config section [weightd]"});
  // A flag that is no setting (--version) is no config key either.
  temp_config version{"version = true\n"};
  check_refused(run_command_line({"--config", path_of(version)}),
                {path_of(version) + ":1", "unknown config key \"version\""});
  // A config file that cannot be read: missing, or a directory.
  check_refused(run_command_line({"--config", "/nonexistent/weightd.toml"}),
                {"/nonexistent/weightd.toml", "not readable"});
  check_refused(run_command_line({"--config", std::filesystem::temp_directory_path().string()}),
                {std::filesystem::temp_directory_path().string()});
}

TEST_CASE("daemon config: every SPEC §8 knob is a config key, with units") {
  temp_config file{
      "import-abandon = \"10m\"\n"
      "reconcile-interval = \"250ms\"\n"
      "reconcile-max-actions = 8\n"
      "migration-round-members = 16\n"
      "migration-round-bytes = \"8GiB\"\n"
      "auto-cooldown = \"1m\"\n"
      "high-watermark = 0.8\n"
      "eviction-ratio = 0.1\n"
      "scrub-rate = \"16MiB/s\"\n"
      "object-read-lease = \"3s\"\n"
      "lease-recovery-grace = \"20s\"\n"
      "snapshot-every = 500\n"};
  auto o = run_command_line({"--config", path_of(file)});
  REQUIRE_MESSAGE(!o.exit_code.has_value(), o.err);
  const daemon_config& c = o.config;
  CHECK(c.import_abandon == 10min);
  CHECK(c.reconcile_interval == 250ms);
  CHECK(c.reconcile_max_actions == 8);
  CHECK(c.migration_round_members == 16);
  CHECK(c.migration_round_bytes == 8 * GiB);
  CHECK(c.auto_cooldown == 1min);
  CHECK(c.high_watermark == doctest::Approx(0.8));
  CHECK(c.eviction_ratio == doctest::Approx(0.1));
  CHECK(c.scrub_rate_bytes == 16 * MiB);
  CHECK(c.object_read_lease == 3s);
  CHECK(c.lease_recovery_grace == 20s);
  CHECK(c.snapshot_every == 500);
  // The old -ms spellings are config keys too, in plain milliseconds.
  temp_config old{"reconcile-interval-ms = 500\nlease-recovery-grace-ms = 2500\n"};
  auto o2 = run_command_line({"--config", path_of(old)});
  REQUIRE_MESSAGE(!o2.exit_code.has_value(), o2.err);
  CHECK(o2.config.reconcile_interval == 500ms);
  CHECK(o2.config.lease_recovery_grace == 2500ms);
}
