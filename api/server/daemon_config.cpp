#include "api/server/daemon_config.hpp"

#include "api/server/server.hpp"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <sstream>

namespace weightd::api {

namespace {

using std::chrono::milliseconds;

constexpr milliseconds kDay{24 * 3'600'000};

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

std::string in_quotes(std::string_view s) { return "\"" + std::string{s} + "\""; }

bool is_plain_count(std::string_view text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos;
}

std::string format_number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// ---------------------------------------------------------------------------
// CLI11 glue. A validator returns "" or what is wrong; CLI11 reports the
// latter as "--flag: <message>". The transforms below rewrite a value with
// units as a plain count ("30s" → "30000"), which CLI11 then stores into the
// field: milliseconds into a std::chrono::milliseconds, bytes into a uint64_t.

std::string to_milliseconds(std::string& text, milliseconds min, milliseconds max) {
  auto d = parse_duration(text);
  if (!d) return d.error().message();
  if (*d < min || *d > max)
    return text + " is not between " + format_duration(min) + " and " + format_duration(max);
  text = std::to_string(d->count());
  return "";
}

std::string to_bytes(std::string& text, uint64_t min) {
  auto bytes = parse_size(text);
  if (!bytes) return bytes.error().message();
  if (*bytes < min) return text + " is less than " + format_size(min);
  text = std::to_string(*bytes);
  return "";
}

std::string range_text(const std::string& min, const std::string& max) {
  return "in [" + min + ", " + max + "]";
}

/// --name DURATION into `field`; the help ends with the field's default.
CLI::Option* add_duration(CLI::App& app, const std::string& name, milliseconds& field,
                          milliseconds min, milliseconds max, const std::string& help) {
  CLI::Validator check(
      [min, max](std::string& text) { return to_milliseconds(text, min, max); },
      range_text(format_duration(min), format_duration(max)));
  return app.add_option(name, field, help + " (default " + format_duration(field) + ")")
      ->transform(check)
      ->type_name("DURATION");
}

/// The older --name-ms spelling of a duration flag: plain milliseconds, same
/// field, same range. Both spellings on the command line (or both in the file)
/// are an error: which one would win? (strict_config lets the command line's
/// spelling win over the file's other one.)
void add_milliseconds_alias(CLI::App& app, CLI::Option* flag, const std::string& name,
                            milliseconds& field, milliseconds min, milliseconds max) {
  CLI::Validator check(
      [min, max, name](std::string& text) -> std::string {
        if (!is_plain_count(text))
          return in_quotes(text) + " is not a plain number of milliseconds (" + name +
                 " takes units: 30s, 250ms)";
        text += "ms";
        return to_milliseconds(text, min, max);
      },
      range_text(std::to_string(min.count()), std::to_string(max.count())));
  app.add_option(name + "-ms", field, "Same as " + name + ", in plain milliseconds")
      ->transform(check)
      ->type_name("MILLISECONDS")
      ->excludes(flag);
}

/// --name SIZE into `field`; the help ends with the field's default.
CLI::Option* add_size(CLI::App& app, const std::string& name, uint64_t& field, uint64_t min,
                      const std::string& help) {
  CLI::Validator check([min](std::string& text) { return to_bytes(text, min); },
                       min == 0 ? "" : "at least " + format_size(min));
  return app.add_option(name, field, help + " (default " + format_size(field) + ")")
      ->transform(check)
      ->type_name("SIZE");
}

/// The older --name-bytes spelling of a size flag: plain bytes, same field
/// (and the same rule for giving both as add_milliseconds_alias).
void add_bytes_alias(CLI::App& app, CLI::Option* flag, const std::string& name,
                     uint64_t& field) {
  CLI::Validator check(
      [name](std::string& text) -> std::string {
        if (!is_plain_count(text))
          return in_quotes(text) + " is not a plain number of bytes (" + name +
                 " takes units: 64MiB, 8GiB)";
        return to_bytes(text, 0);  // "010" is 10 (CLI11 alone would read octal 8)
      },
      "");
  app.add_option(name + "-bytes", field, "Same as " + name + ", in plain bytes")
      ->transform(check)
      ->type_name("BYTES")
      ->excludes(flag);
}

/// A per-round limit that must not be 0 (a round allowed nothing makes no progress).
const CLI::Validator kAtLeastOne(
    [](std::string& text) -> std::string {
      if (is_plain_count(text) && text.find_first_not_of('0') == std::string::npos)
        return "0 is less than 1";
      return "";  // anything else that is no count: CLI11's conversion says so
    },
    "at least 1");

/// A fraction of the HOT tier's capacity: strictly between 0 and 1.
const CLI::Validator kFractionOfCapacity(
    [](std::string& text) -> std::string {
      char* end = nullptr;
      double value = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0') return in_quotes(text) + " is not a number";
      if (value > 0 && value < 1) return "";  // (NaN fails both)
      return text + " is not between 0 and 1 (both excluded)";
    },
    "in (0, 1)");

/// CLI11's TOML reader, plus:
///  - a key that is no flag, or any [section] (weightd has none), is an error
///    naming it. CLI11 by itself would ignore both, and with
///    allow_config_extras(error) it names an empty section as "foo.++";
///  - a key whose other spelling was given on the command line is dropped, so
///    `--reconcile-interval 2s` overrides `reconcile-interval-ms = 500` in the
///    file as it would override `reconcile-interval = "500ms"` (both spellings
///    in the file, or both on the command line, stay an error).
/// CLI11 reads the file after the command line, so the counts seen here are
/// the command line's.
class strict_config : public CLI::ConfigTOML {
 public:
  explicit strict_config(const CLI::App& app) : app_(app) {}

  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override {
    // CLI11 opens the file without checking: an unreadable one would read as empty.
    if (!input) throw CLI::FileError(where(0) + ": cannot be read");
    std::string text{std::istreambuf_iterator<char>(input), std::istreambuf_iterator<char>()};
    std::istringstream parsed{text};
    std::vector<CLI::ConfigItem> kept;
    for (auto& item : CLI::ConfigTOML::from_config(parsed)) {
      if (!item.parents.empty())
        throw CLI::ConfigError(where(line_of(text, item.parents.front(), true)) +
                               ": unknown config section [" + CLI::detail::join(item.parents, ".") +
                               "]: weightd's config keys stand at the top of the file, "
                               "without a section");
      const CLI::Option* option = app_.get_option_no_throw("--" + item.name);
      if (option == nullptr || !option->get_configurable())
        throw CLI::ConfigError(where(line_of(text, item.name, false)) + ": unknown config key \"" +
                               item.name +
                               "\": the keys are the long flag names without dashes, e.g. "
                               "auto-cooldown = \"30s\"");
      if (!other_spelling_on_command_line(*option)) kept.push_back(std::move(item));
    }
    return kept;
  }

 private:
  // The aliases exclude each other (add_milliseconds_alias, add_bytes_alias).
  static bool other_spelling_on_command_line(const CLI::Option& option) {
    for (const CLI::Option* other : option.get_excludes())
      if (other->count() > 0) return true;
    return false;
  }

  /// "FILE:LINE" (or "FILE" for line 0), FILE as --config gave it.
  std::string where(size_t line) const {
    std::string file = "config file";
    if (const CLI::Option* config = app_.get_config_ptr(); config && !config->results().empty())
      file = config->results().back();
    return line == 0 ? file : file + ":" + std::to_string(line);
  }

  /// The first line (from 1) that opens section `name` ("[name" or, as a
  /// dotted key, "name.") or, for a key, that starts with `name` and then
  /// `=` or a space; 0 when none does (CLI11's reader keeps no line numbers).
  static size_t line_of(const std::string& text, const std::string& name, bool section) {
    std::istringstream lines{text};
    std::string line;
    for (size_t number = 1; std::getline(lines, line); ++number) {
      std::string_view l = line;
      l.remove_prefix(std::min(l.size(), l.find_first_not_of(" \t")));
      if (section && (l.rfind("[" + name, 0) == 0 || l.rfind(name + ".", 0) == 0)) return number;
      if (!section && l.rfind(name, 0) == 0 && l.size() > name.size() &&
          (l[name.size()] == '=' || l[name.size()] == ' ' || l[name.size()] == '\t'))
        return number;
    }
    return 0;
  }

  const CLI::App& app_;
};

}  // namespace

// ---------------------------------------------------------------------------

std::string validate(const daemon_config& c) {
  // Each watermark is in (0, 1) already (its flag checks that). Promotion back
  // to HOT waits for usage below high − 2 × ratio: that line must be above an
  // empty tier, or nothing is ever promoted. (It implies ratio < high too.)
  if (!is_loopback_address(c.http_listen) && !c.http_listen_public)
    return "--http-listen " + c.http_listen + " is not a loopback address; /metrics and /healthz "
           "have no authentication: pass --http-listen-public to serve them there anyway";
  if (!(c.tenant_reserve_ratio > 0 && c.tenant_reserve_ratio <= 1))
    return "--tenant-reserve-ratio " + format_number(c.tenant_reserve_ratio) +
           " is not in (0, 1]: it is the fraction of a tier one tenant's puts may reserve";
  if (c.follow.empty() && (!c.follow_token_file.empty() || !c.follow_tls_ca_file.empty()))
    return std::string{"--follow-token-file and --follow-tls-ca-file go with --follow "} +
           "(the leader's address); without it weightd is the leader";
  double relief = c.high_watermark - 2 * c.eviction_ratio;
  if (!(relief > 0))
    return "--eviction-ratio " + format_number(c.eviction_ratio) + " is too large for " +
           "--high-watermark " + format_number(c.high_watermark) +
           ": promotion waits for HOT usage below high-watermark - 2 x eviction-ratio = " +
           format_number(relief) + ", which must be above 0";
  return "";
}

std::optional<int> parse_daemon_command_line(CLI::App& app, int argc, const char* const* argv,
                                             std::ostream& out, std::ostream& err) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::CallForVersion& e) {
    out << e.what() << "\n";  // the string set_version_flag was given
    return 0;
  } catch (const CLI::ParseError& e) {
    // Every other ParseError is a configuration error, whatever CLI11's own
    // code for its kind (105 for a value, 109 for extras, 110 for the file…):
    // one code for a supervisor or a script to test.
    err << "weightd: " << e.what() << "\n";
    return kConfigErrorExit;
  }
}

void add_daemon_options(CLI::App& app, daemon_config& c, const std::string& version) {
  if (!version.empty()) app.set_version_flag("--version", "weightd " + version);
  app.set_config("--config", "",
                 "Read flags from this TOML file: the keys are the long flag names "
                 "(auto-cooldown = \"30s\"), without sections; an unknown key or section is "
                 "an error. Flags on the command line win over the file, under either "
                 "spelling (--reconcile-interval over reconcile-interval-ms)");
  app.config_formatter(std::make_shared<strict_config>(app));
  app.allow_config_extras(CLI::config_extras_mode::error);  // (strict_config already refuses them)
  app.footer(
      "DURATION: a number and a unit (ms, s, m, h), e.g. 250ms, 30s, 1.5s, 5m; a bare number "
      "other than 0 is refused (seconds or milliseconds?).\n"
      "SIZE: bytes, or a number and a unit: KiB, MiB, GiB, TiB (powers of 2), kB or KB, MB, GB, "
      "TB (powers of 10), e.g. 64MiB, 8GiB.");

  app.add_option("--listen", c.listen,
                 "gRPC address; beyond loopback only with --auth-tokens-file and TLS")
      ->capture_default_str();
  app.add_option("--auth-tokens-file", c.auth_tokens_file,
                 "Tokens file, CSV token,name,tenant,role (reader, writer, admin), mode 0600; "
                 "re-read on SIGHUP. Set: every call needs 'authorization: Bearer <token>'");
  app.add_option("--tls-cert-file", c.tls_cert_file, "PEM certificate (chain) of the gRPC listener");
  app.add_option("--tls-key-file", c.tls_key_file, "PEM private key of --tls-cert-file");
  app.add_option("--tls-client-ca-file", c.tls_client_ca_file,
                 "PEM CA: clients must present a certificate it signed (mutual TLS)");
  app.add_option("--follow", c.follow,
                 "Run as a standby of the leader at this gRPC address: copy its journal and "
                 "fold it (SPEC §11); \"\" = run as the leader");
  app.add_option("--follow-token-file", c.follow_token_file,
                 "File holding the bearer token (role admin) the standby presents to its leader");
  app.add_option("--follow-tls-ca-file", c.follow_tls_ca_file,
                 "PEM CA that signed the leader's certificate (set: the standby uses TLS)");
  app.add_option("--http-listen", c.http_listen,
                 "HTTP address of /metrics and /healthz (loopback unless --http-listen-public)")
      ->capture_default_str();
  app.add_flag("--http-listen-public", c.http_listen_public,
               "Allow a non-loopback --http-listen (they carry no authentication)");
  app.add_option("--data-dir", c.data_dir, "Directory for the journal and the COLD tier")
      ->capture_default_str();
  app.add_option("--journal-dir", c.journal_dir,
                 "Journal directory (default: <data-dir>/journal)");
  app.add_option("--journal-sync", c.journal_sync,
                 "sync: every acknowledged change is on disk (default); nosync: faster, a "
                 "machine crash may lose the last changes (benchmarks and tests only)")
      ->check(CLI::IsMember({"sync", "nosync"}))
      ->capture_default_str();
  auto* map = add_size(app, "--journal-initial-map", c.journal_initial_map_bytes, 0,
                       "Initial size of the journal's memory map; it doubles when full");
  add_bytes_alias(app, map, "--journal-initial-map", c.journal_initial_map_bytes);
  map = add_size(app, "--journal-max-map", c.journal_max_map_bytes, 0,
                 "Largest size the journal may grow to");
  add_bytes_alias(app, map, "--journal-max-map", c.journal_max_map_bytes);

  app.add_option("--hot-dir", c.hot_dir,
                 "HOT (memory) tier directory, on tmpfs: bytes survive a daemon restart, not a "
                 "reboot (default: /dev/shm/weightd-<port>)");
  auto* hot = add_size(app, "--hot-capacity", c.hot_capacity_bytes, 0,
                       "Bytes the HOT tier may hold; eviction keeps it below the high watermark");
  add_bytes_alias(app, hot, "--hot-capacity", c.hot_capacity_bytes);
  app.add_option("--cold-dir", c.cold_dir, "COLD (disk) tier directory (default: <data-dir>/cold)");
  auto* cold = add_size(app, "--cold-capacity", c.cold_capacity_bytes, 0,
                        "Bytes the COLD tier may hold (0 = as much as the disk holds)");
  add_bytes_alias(app, cold, "--cold-capacity", c.cold_capacity_bytes);
  app.add_option("--verify-on-start", c.verify_on_start,
                 "At startup, check every replica's size and checksum (checksum) or only its "
                 "size (size: faster for large COLD tiers)")
      ->check(CLI::IsMember({"checksum", "size"}))
      ->capture_default_str();
  app.add_option("--io-workers", c.io_workers, "Threads for blocking file work (fsync, copies)")
      ->check(CLI::Range(1u, 64u))
      ->capture_default_str();
  app.add_option("--snapshot-every", c.snapshot_every,
                 "Events between whole-state snapshots, which bound recovery time (0 = never)")
      ->capture_default_str();

  // Background work (SPEC §8). Intervals are at least 10ms so that a typo
  // cannot make a loop spin; most durations are at most a day.
  constexpr milliseconds kMinInterval{10};
  auto* interval = add_duration(app, "--reconcile-interval", c.reconcile_interval, kMinInterval,
                                milliseconds{60'000},
                                "Time between reconciler rounds (lease expiry, abandoned "
                                "imports, deletions, migrations, repairs)");
  add_milliseconds_alias(app, interval, "--reconcile-interval", c.reconcile_interval,
                         kMinInterval, milliseconds{60'000});
  app.add_option("--reconcile-max-actions", c.reconcile_max_actions,
                 "Most actions one reconciler round takes; the rest wait for the next round")
      ->check(kAtLeastOne)
      ->capture_default_str();
  add_duration(app, "--import-abandon", c.import_abandon, kMinInterval, kDay,
               "An IMPORTING revision idle this long is aborted by the reconciler");
  add_duration(app, "--auto-cooldown", c.auto_cooldown, milliseconds{0}, kDay,
               "An AUTO revision is not migrated again until this long after its last "
               "migration ended (0 = no wait)");
  app.add_option("--migration-round-members", c.migration_round_members,
                 "Most members one migration round moves")
      ->check(kAtLeastOne)
      ->capture_default_str();
  add_size(app, "--migration-round-bytes", c.migration_round_bytes, daemon_config::MiB,
           "Most bytes one migration round moves (at least 1MiB)");
  app.add_option("--high-watermark", c.high_watermark,
                 "HOT usage (held + reserved) above this fraction of its capacity is pressure: "
                 "eviction and AUTO demotion start")
      ->check(kFractionOfCapacity)
      ->capture_default_str();
  app.add_option("--eviction-ratio", c.eviction_ratio,
                 "Eviction frees HOT down to high-watermark - ratio; a revision is promoted back "
                 "only while usage stays below high-watermark - 2 x ratio")
      ->check(kFractionOfCapacity)
      ->capture_default_str();
  // A rate: a size per second, "/s" optional.
  CLI::Validator rate([](std::string& text) {
    std::string_view size = trim(text);
    if (size.size() >= 2 && size.substr(size.size() - 2) == "/s") size.remove_suffix(2);
    text = std::string{size};
    return to_bytes(text, 0);
  }, "");
  app.add_option("--scrub-rate", c.scrub_rate_bytes,
                 "Bytes per second the background scrub re-reads against their checksums, e.g. "
                 "64MiB or 64MiB/s (0 = no scrub; default " + format_size(c.scrub_rate_bytes) +
                 "/s)")
      ->transform(rate)
      ->type_name("SIZE[/s]");
  app.add_option("--mirror-rate", c.mirror_rate_bytes,
                 "Bytes per second a standby copies its leader's replicas at, all copies "
                 "together, e.g. 100MiB/s (0 = no limit, the default)")
      ->transform(rate)
      ->type_name("SIZE[/s]");
  app.add_option("--sync-standbys", c.sync_standbys,
                 "Standbys that must hold a write (a commit: its bytes too) before the leader "
                 "answers it (SPEC §11; 0 = answer once it is durable here)")
      ->check(CLI::Range(0u, 16u))
      ->capture_default_str();
  add_duration(app, "--sync-timeout", c.sync_timeout, milliseconds{1}, kDay,
               "How long a write waits for --sync-standbys standbys before it answers "
               "UNAVAILABLE (it is durable on the leader; a retry is answered from it)");
  app.add_option("--mirror-parallelism", c.mirror_parallelism,
                 "Objects a standby copies from its leader at once")
      ->check(CLI::Range(1u, 64u))
      ->capture_default_str();
  app.add_option("--migration-rate", c.migration_rate_bytes,
                 "Bytes per second one migration copies between the tiers, e.g. 200MiB/s, so "
                 "that a background migration leaves the disk to readers (0 = no limit, the "
                 "default)")
      ->transform(rate)
      ->type_name("SIZE[/s]");
  add_duration(app, "--object-read-lease", c.object_read_lease, milliseconds{0}, kDay,
               "A Get protects the object from a non-forced Remove this long");
  auto* grace = add_duration(app, "--lease-recovery-grace", c.lease_recovery_grace,
                             milliseconds{0}, kDay,
                             "After a restart, every lease live at the crash lasts at least this "
                             "long, so its holder can renew it");
  add_milliseconds_alias(app, grace, "--lease-recovery-grace", c.lease_recovery_grace,
                         milliseconds{0}, kDay);

  app.add_option("--max-streams", c.max_streams,
                 "Most object streams (Put and Get) open at once; more are refused with "
                 "RESOURCE_EXHAUSTED")
      ->check(kAtLeastOne)
      ->capture_default_str();
  app.add_option("--max-streams-per-connection", c.max_streams_per_connection,
                 "Most object streams one client connection may have open")
      ->check(kAtLeastOne)
      ->capture_default_str();
  app.add_option("--max-puts-per-tenant", c.max_puts_per_tenant,
                 "Most Put streams one tenant may have open (over all its connections)")
      ->check(kAtLeastOne)
      ->capture_default_str();
  add_size(app, "--get-buffer", c.get_buffer_bytes, 1,
           "Bytes all Get streams together may hold in chunks their clients have not taken; "
           "past it each stream sends 16 KiB chunks");
  add_duration(app, "--put-idle-timeout", c.put_idle_timeout, kMinInterval, kDay,
               "A Put that sends no bytes this long is ended and its reservation given back");
  add_duration(app, "--watch-stall-timeout", c.watch_stall_timeout, kMinInterval, kDay,
               "A Watch whose client takes no event this long is ended (RESOURCE_EXHAUSTED "
               "naming the seq to resume from)");
  app.add_option("--local-reads", c.local_reads,
                 "Serve OpenLocal: readers on this host map the tier files read-only instead "
                 "of streaming them (true or false)")
      ->capture_default_str();
  app.add_option("--tenant-reserve-ratio", c.tenant_reserve_ratio,
                 "The puts in flight of one tenant reserve at most this fraction of a tier's "
                 "capacity (a single put may always reserve what fits)")
      ->capture_default_str();

  app.add_option("--log-level", c.log_level, "trace, debug, info, warn, error or off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();
  app.add_option("--threads", c.threads, "Actor worker threads (0 = number of cores)")
      ->capture_default_str();

  // After every flag and the config file are in: the checks across flags.
  app.parse_complete_callback([&c] {
    if (auto error = validate(c); !error.empty()) throw CLI::ValidationError(error);
  });
}

}  // namespace weightd::api
