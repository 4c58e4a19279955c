// weightctl's output contract (SPEC §10): one JSON document per command, text for people, exit codes, environment.
// End to end: the real weightd and the real weightctl; a few checks of the
// conversions themselves at the bottom.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "api/cli/cli_words.hpp"
#include "api/cli/duration_flag.hpp"
#include "api/cli/format.hpp"
#include "api/common/json_output.hpp"
#include "api/client/client.hpp"
#include "daemon_fixture.hpp"
#include "events/identity.hpp"

using namespace weightd;
using namespace weightd::test;
using nlohmann::json;

namespace {

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

size_t count_lines(const std::string& s) { return std::count(s.begin(), s.end(), '\n'); }

/// The output as exactly one JSON document on one line (fails the test otherwise).
json one_document(const run_result& r) {
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(count_lines(r.output) == 1);
  return json::parse(r.output);
}

/// A small model directory imported as `id`.
void import_model(running_daemon& d, const std::filesystem::path& dir, const std::string& id) {
  write_file(dir / "config.json", "{}");
  write_file(dir / "w.bin", pattern(10'000, 1));
  auto r = d.ctl("import " + dir.string() + " --as " + id);
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
}

}  // namespace

TEST_CASE("weightctl --json: an empty list prints {\"items\": []}") {
  temp_dir dir;
  running_daemon d{dir.path() / "var"};
  for (const char* command : {"ls --json", "ls --all --json", "op ls --json", "obj ls --json"}) {
    CAPTURE(command);
    auto r = d.ctl(command);
    CHECK(r.exit_code == 0);
    CHECK(r.output == "{\"items\": []}\n");
  }
}

TEST_CASE("weightctl --json: ls prints one document for one and for several revisions, fields by "
          "the proto's names, enums short, 64-bit numbers as numbers, zero values present") {
  temp_dir dir;
  running_daemon d{dir.path() / "var"};
  import_model(d, dir.path() / "a", "default/a@main");
  auto one = one_document(d.ctl("ls --json"));
  REQUIRE(one["items"].size() == 1);
  CHECK(one["next_page_token"] == "");
  const auto& v = one["items"][0];
  CHECK(v["availability"] == "READY");
  CHECK(v["residency"] == "HOT");
  CHECK(v["policy"]["migration_mode"] == "AUTO");
  CHECK(v["metadata_generation"].is_number_unsigned());
  CHECK(v["metadata_generation"] == 2);
  CHECK(v["created_at_ms"].is_number_integer());
  CHECK(v["manifest"]["logical_bytes"] == 10'002);
  CHECK(v["id"]["weight_generation"] == 1);
  // Zero values are there, not left out.
  CHECK(v["operation_id"] == 0);
  CHECK(v["active_lease_count"] == 0);
  CHECK(v["drain_deadline_ms"] == 0);
  CHECK(v.contains("operation"));

  import_model(d, dir.path() / "b", "default/b@main");
  auto two = one_document(d.ctl("ls --json"));
  CHECK(two["items"].size() == 2);

  auto shown = one_document(d.ctl("show default/a@main --json"));
  CHECK(shown["id"]["resource"] == "a");  // a single object is that object
  CHECK(shown["availability"] == "READY");
  auto status = one_document(d.ctl("status --json"));
  CHECK(status["journal_seq"].is_number_unsigned());
  auto leases = one_document(d.ctl("lease ls default/a@main --json"));
  CHECK(leases == json::parse("{\"items\": []}"));
  auto objects = one_document(d.ctl("obj ls --json"));
  CHECK(objects["items"].size() == 6);
  CHECK(objects["items"][0]["size"].is_number_unsigned());
}

TEST_CASE("weightctl --json: offline journal commands follow the same rules, history is a list") {
  temp_dir dir;
  {
    running_daemon d{dir.path() / "var"};
    import_model(d, dir.path() / "m", "default/m@main");
  }
  auto base = std::string{WEIGHTD_WEIGHTCTL} + " --data-dir " + (dir.path() / "var").string() + " ";
  auto stats = one_document(run_command(base + "journal stats --json"));
  CHECK(stats["highest_seq"].is_number_unsigned());
  CHECK(stats["by_type"]["import_committed"] == 1);
  auto verify = one_document(run_command(base + "journal verify --json"));
  CHECK(verify["ok"] == true);
  CHECK(verify["error"] == "");
  auto replay = one_document(run_command(base + "journal replay --json"));
  CHECK(replay.dump().find("RESIDENCY_") == std::string::npos);
  auto history = one_document(run_command(base + "history default/m@main --json"));
  REQUIRE(history["items"].size() >= 2);
  CHECK(history["items"][0]["event"] == "import_begun");
  CHECK(history["items"][0]["global_seq"].is_number_unsigned());
  CHECK(history["items"][0]["timestamp_ms"].is_number_integer());
  // journal dump stays NDJSON: one envelope per line, with numbers.
  auto dump = run_command(base + "journal dump --json");
  REQUIRE(dump.exit_code == 0);
  CHECK(count_lines(dump.output) > 2);
  auto first = json::parse(dump.output.substr(0, dump.output.find('\n')));
  CHECK(first["global_seq"] == 1);
}

TEST_CASE("weightctl: a revision that does not exist is NOT_FOUND (exit 3) for show, migrate, rm, "
          "policy and lease acquire, never INVALID_ARGUMENT") {
  temp_dir dir;
  running_daemon d{dir.path() / "var"};
  for (const char* command :
       {"show ns/nope@main", "migrate ns/nope@main --to COLD", "rm ns/nope@main",
        "policy ns/nope@main --mode MANUAL", "lease acquire ns/nope@main", "lease ls ns/nope@main",
        "abort ns/nope@main"}) {
    CAPTURE(command);
    auto r = d.ctl(command);
    CHECK(r.exit_code == 3);
    CHECK(has(r.output, "NOT_FOUND"));
    CHECK(has(r.output, "ns/nope@main"));
    CHECK_FALSE(has(r.output, "weight_generation"));
  }
}

TEST_CASE("weightctl: an unreachable daemon has its own exit code (69) and names the address and "
          "WEIGHTD_ADDRESS") {
  auto r = run_command(std::string{WEIGHTD_WEIGHTCTL} + " --address 127.0.0.1:1 ls");
  CHECK(r.exit_code == 69);
  CHECK(has(r.output, "daemon unreachable at 127.0.0.1:1"));
  CHECK(has(r.output, "WEIGHTD_ADDRESS"));
  CHECK_FALSE(has(r.output, "BUSY"));
}

TEST_CASE("weightctl: WEIGHTD_ADDRESS and WEIGHTD_TENANT are read when the flags are absent") {
  temp_dir dir;
  running_daemon d{dir.path() / "var"};
  write_file(dir.path() / "blob", "hello");
  auto env = "WEIGHTD_ADDRESS=" + d.address + " WEIGHTD_TENANT=team-a " + WEIGHTD_WEIGHTCTL + " ";
  auto put = run_command(env + "obj put k " + (dir.path() / "blob").string());
  REQUIRE_MESSAGE(put.exit_code == 0, put.output);
  auto mine = one_document(run_command(env + "obj ls --json"));
  CHECK(mine["items"].size() == 1);
  // The flag wins over the environment; the default tenant sees nothing of team-a's.
  auto other = run_command(env + "--tenant default obj ls --json");
  CHECK(other.output == "{\"items\": []}\n");
  auto unreachable = run_command("WEIGHTD_ADDRESS=127.0.0.1:1 " + std::string{WEIGHTD_WEIGHTCTL} +
                                 " status");
  CHECK(unreachable.exit_code == 69);
}

TEST_CASE("weightctl --version prints weightctl and the project's version") {
  auto r = run_command(std::string{WEIGHTD_WEIGHTCTL} + " --version");
  CHECK(r.exit_code == 0);
  CHECK(std::regex_match(r.output, std::regex{"weightctl [0-9]+\\.[0-9]+\\.[0-9]+\n"}));
}

TEST_CASE("weightctl: durations take units in --ttl and --drain-timeout, and a bad one names the "
          "flag") {
  temp_dir dir;
  running_daemon d{dir.path() / "var"};
  import_model(d, dir.path() / "m", "default/m@main");
  auto leased = d.ctl("lease acquire default/m@main --holder h --ttl 30s --json");
  auto lease = one_document(leased);
  auto now = api::now_epoch_ms();
  CHECK(lease["expiry_ms"].get<int64_t>() > now + 20'000);
  CHECK(lease["expiry_ms"].get<int64_t>() <= now + 31'000);
  auto unit = d.ctl("lease acquire default/m@main --ttl 30x");
  CHECK(unit.exit_code == 2);
  CHECK(has(unit.output, "--ttl \"30x\" has an unknown unit \"x\""));
  auto renewed = one_document(d.ctl("lease renew " + std::to_string(lease["lease_id"].get<uint64_t>()) +
                                    " --ttl 10m --json"));
  CHECK(renewed["expiry_ms"].get<int64_t>() > now + 590'000);

  // BUSY in the CLI's words: the flag, not the request field.
  auto busy = d.ctl("rm default/m@main");
  CHECK(busy.exit_code == 7);
  CHECK(has(busy.output, "pass --drain-timeout"));
  CHECK_FALSE(has(busy.output, "drain_timeout_ms"));
  CHECK(d.ctl("rm default/m@main --drain-timeout 1x").exit_code == 2);
  auto draining = d.ctl("rm default/m@main --drain-timeout 1m");
  REQUIRE_MESSAGE(draining.exit_code == 0, draining.output);
  CHECK(std::regex_search(draining.output,
                          std::regex{"revoked at 20[0-9-]+T[0-9:]+Z \\(in (59|60) s\\)"}));
}

TEST_CASE("weightctl text: ls has a header, -A lists every namespace, times are UTC with a "
          "relative part, show is describe-style") {
  temp_dir dir;
  running_daemon d{dir.path() / "var"};
  import_model(d, dir.path() / "a", "default/a@main");
  import_model(d, dir.path() / "b", "research/b@main");
  auto ls = d.ctl("ls");
  CHECK(ls.output.find("REVISION ") == 0);
  CHECK(has(ls.output, "default/a@main#1"));
  CHECK_FALSE(has(ls.output, "research/b@main#1"));
  auto all = d.ctl("ls -A");
  CHECK(has(all.output, "default/a@main#1"));
  CHECK(has(all.output, "research/b@main#1"));
  CHECK(one_document(d.ctl("ls --all-namespaces --json"))["items"].size() == 2);
  CHECK(has(d.ctl("ls --ns empty").output, "no READY or DEGRADED revisions in namespace empty"));

  auto leased = d.ctl("lease acquire default/a@main --holder reader --ttl 2m");
  CHECK(std::regex_search(leased.output,
                          std::regex{"until 20[0-9-]+T[0-9]{2}:[0-9]{2}:[0-9]{2}Z \\(in (1[01][0-9] s|120 s|2 min)\\)"}));
  auto leases = d.ctl("lease ls default/a@main");
  CHECK(leases.output.find("LEASE ") == 0);

  auto shown = d.ctl("show default/a@main");
  REQUIRE(shown.exit_code == 0);
  for (const char* line : {"Revision:             default/a@main#1\n", "State:                READY\n",
                           "Residency:            HOT\n", "Generation:           2\n",
                           "Size:                 9.8 KiB\n", "Policy:\n",
                           "  Preferred:          HOT\n", "  Mode:               AUTO\n",
                           "Files:\n", "  Payloads:           2\n", "Leases:\n",
                           "  Live:               1\n", "Operation:\n", "  Id:                 none\n"})
    CHECK_MESSAGE(has(shown.output, line), line);
  CHECK(std::regex_search(shown.output,
                          std::regex{"Created: +20[0-9-]+T[0-9:]+Z \\(([0-9]+ s ago|now)\\)"}));
  CHECK(std::regex_search(shown.output, std::regex{"Nearest expiry: +20[0-9-]+T[0-9:]+Z \\(in "}));

  // The key column is as wide as the longest key: the columns after it line up.
  auto long_key = "cache/" + std::string(80, 'k');
  REQUIRE(d.ctl("obj put " + long_key + " " + (dir.path() / "a" / "w.bin").string()).exit_code == 0);
  auto objects = d.ctl("obj ls");
  std::istringstream lines{objects.output};
  std::string header;
  std::getline(lines, header);
  CHECK(header.find("KEY ") == 0);
  auto tiers = header.find("TIERS");
  size_t rows = 0;
  for (std::string row; std::getline(lines, row); ++rows) {
    CAPTURE(row);
    REQUIRE(row.size() > tiers);
    CHECK(row.substr(tiers - 2, 2) == "  ");
    CHECK(row[tiers] != ' ');
  }
  CHECK(rows == 7);
}

TEST_CASE("weightctl text: op ls puts each header over its column, op cancel says what it did") {
  temp_dir dir;
  running_daemon d{dir.path() / "var"};
  import_model(d, dir.path() / "m", "default/m@main");
  REQUIRE(d.ctl("lease acquire default/m@main --holder server --ttl 60s").exit_code == 0);
  auto started = d.ctl("migrate default/m@main --to COLD --json");
  auto op = one_document(started);
  CHECK(op["state"] == "RUNNING");
  auto listed = d.ctl("op ls");
  std::istringstream lines{listed.output};
  std::string header, row;
  std::getline(lines, header);
  std::getline(lines, row);
  CAPTURE(listed.output);
  // Right-aligned columns end where their header ends.
  for (const char* column : {"UNITS", "BYTES"}) {
    auto end = header.find(column) + 5;
    REQUIRE(row.size() > end);
    CHECK(row[end - 1] != ' ');
    CHECK(row[end] == ' ');
  }
  auto cancelled = d.ctl("op cancel " + std::to_string(op["operation_id"].get<uint64_t>()));
  REQUIRE_MESSAGE(cancelled.exit_code == 0, cancelled.output);
  CHECK(has(cancelled.output, "CANCELLED"));
  CHECK(has(cancelled.output, "stopped at a file boundary"));
}

TEST_CASE("weightctl words: RPC hints become commands and flags, byte counts sizes, epoch ms times") {
  CHECK(api::in_cli_words("ns/m@r#1 is IMPORTING; use AbortImport") ==
        "ns/m@r#1 is IMPORTING; use `weightctl abort`");
  CHECK(api::in_cli_words("only an IMPORTING revision is aborted (use RemoveRevision)") ==
        "only an IMPORTING revision is aborted (use `weightctl rm`)");
  CHECK(api::in_cli_words("HOT tier at 93.8% of 134217728 bytes; with 58720271 hot bytes") ==
        "HOT tier at 93.8% of 128.0 MiB; with 56.0 MiB HOT");
  CHECK(api::in_cli_words("least recently used (access at 1796284281079 ms)", 1796284281079 + 180'000) ==
        "least recently used (access at 2026-12-03T07:51:21Z (3 min ago))");
  CHECK(api::format_time(1796284281079, 1796284281079 - 59'000) == "2026-12-03T07:51:21Z (in 59 s)");
  CHECK(api::format_bytes(1610612736) == "1.5 GiB");
}

TEST_CASE("weightctl durations take units, a bare number is refused naming the flag and the units") {
  CHECK(*api::parse_duration_ms("30s", "--ttl") == 30'000);
  CHECK(*api::parse_duration_ms("1m", "--ttl") == 60'000);
  CHECK(*api::parse_duration_ms("250ms", "--ttl") == 250);
  CHECK(*api::parse_duration_ms("2h", "--ttl") == 7'200'000);
  CHECK(*api::parse_duration_ms("1.5s", "--ttl") == 1500);
  auto bare = api::parse_duration_ms("60", "--ttl");
  REQUIRE_FALSE(bare.ok());
  CHECK(bare.error().code() == errc::invalid_argument);
  CHECK(has(bare.error().message(), "--ttl"));
  CHECK(has(bare.error().message(), "60s or 60ms"));
  auto bad = api::parse_duration_ms("soon", "--drain-timeout");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code() == errc::invalid_argument);
  CHECK(has(bad.error().message(), "--drain-timeout"));
}

TEST_CASE("short enum names come from one rule: the prefix every value shares") {
  CHECK(api::short_enum_name(events::v1::CHECKSUM_XXH3_64, events::v1::ChecksumAlgorithm_descriptor()) == "XXH3_64");
  CHECK(api::short_enum_name(events::v1::RESIDENCY_HOT, events::v1::Residency_descriptor()) == "HOT");
  CHECK(api::short_enum_name(events::v1::READY, events::v1::Availability_descriptor()) == "READY");
  CHECK(api::short_enum_name(events::v1::DATA_TYPE_WEIGHT, events::v1::DataType_descriptor()) == "WEIGHT");
}

TEST_CASE("messages name weightctl's flags and commands, not the RPC's fields") {
  CHECK(api::in_cli_words("policy.mixed_hot_ratio must be within (0, 1)") ==
        "--ratio must be within (0, 1)");
  CHECK(api::in_cli_words("lease 9 does not exist; acquire one with AcquireLease") ==
        "lease 9 does not exist; acquire one with `weightctl lease acquire`");
  CHECK(api::in_cli_words("ttl_ms must be within 1..86400000 (24 h), not 90000000") ==
        "--ttl must be within 1ms..24h, not 25h");
  // Every size of a message in one human unit style (the daemon says bytes).
  CHECK(api::in_cli_words("the HOT tier cannot fit 20971520 bytes (used 125834780 bytes, "
                          "reserved 0 bytes of 134217728 bytes)") ==
        "the HOT tier cannot fit 20.0 MiB (used 120.0 MiB, reserved 0 B of 128.0 MiB)");
}

TEST_CASE("counts in messages agree with their nouns") {
  CHECK(api::count_of(1, "live lease", "live leases") == "1 live lease");
  CHECK(api::count_of(2, "object", "objects") == "2 objects");
  CHECK(api::count_of(0, "object", "objects") == "0 objects");
}

TEST_CASE("weightctl --json reads back into the proto: message_from_json inverts message_json") {
  v1::RevisionView view;
  *view.mutable_id() = events::revision_key{"t", "ns", "r", "main", 3}.to_proto();
  view.set_availability(events::v1::READY);
  view.set_residency(events::v1::RESIDENCY_MIXED);
  view.set_metadata_generation(UINT64_MAX);  // beyond a double's 53 bits
  view.set_nearest_lease_expiry_ms(-5);
  view.mutable_policy()->set_mixed_hot_ratio(0.25);
  view.add_payload_keys("a");
  view.add_payload_keys("b");
  auto j = api::message_json(view);
  CHECK(j["residency"] == "MIXED");
  // Every field present: no operation is an operation of zero values, not null.
  REQUIRE(j["operation"].is_object());
  CHECK(j["operation"]["operation_id"] == 0);
  v1::RevisionView back;
  REQUIRE(api::message_from_json(nlohmann::ordered_json::parse(api::json_line(j)), &back).ok());
  CHECK(back.SerializeAsString() == view.SerializeAsString());
  v1::StatusResponse status;
  (*status.mutable_guard_skips())["evict"] = 7;
  auto sj = api::message_json(status);
  CHECK(sj["guard_skips"]["evict"] == 7);
  v1::StatusResponse status_back;
  REQUIRE(api::message_from_json(sj, &status_back).ok());
  CHECK(status_back.guard_skips().at("evict") == 7);
  auto wrong = api::message_from_json(nlohmann::ordered_json::parse("{\"residency\": \"WARM\"}"), &back);
  CHECK(wrong.code() == errc::invalid_argument);
  CHECK(has(wrong.message(), "residency"));
}

TEST_CASE("weightctl tables: a long id or holder widens its column instead of running into the next") {
  temp_dir dir;
  running_daemon d{dir.path() / "var"};
  std::string resource(60, 'r');
  import_model(d, dir.path() / "m", "default/" + resource + "@main");
  auto ls = d.ctl("ls");
  REQUIRE(ls.exit_code == 0);
  auto header_end = ls.output.find('\n');
  auto state_column = ls.output.find("STATE");
  auto row = ls.output.substr(header_end + 1);
  CHECK(row.find("READY") == state_column);  // under its header
  std::string holder(50, 'h');
  REQUIRE(d.ctl("lease acquire default/" + resource + "@main --holder " + holder + " --ttl 1m")
              .exit_code == 0);
  auto leases = d.ctl("lease ls default/" + resource + "@main");
  auto expires = leases.output.find("EXPIRES");
  auto lease_row = leases.output.substr(leases.output.find('\n') + 1);
  CHECK(lease_row.find(holder + " ") != std::string::npos);
  CHECK(lease_row.find("20") == expires);  // the expiry (a UTC time) under its header
}
