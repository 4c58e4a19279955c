// What weightd logs: one info line per state change a human cares about,
// warnings for refusals that mean trouble, and nothing again after a restart
// (replay rebuilds the state without re-logging history). The real weightd
// writes its log to a file here; the real weightctl (and the C++ client, for
// what weightctl cannot do: an import left IMPORTING, a request id) drive it.
#include <doctest/doctest.h>
#include <fcntl.h>

#include <chrono>
#include <regex>
#include <thread>

#include "api/client/client.hpp"
#include "daemon_fixture.hpp"
#include "events/identity.hpp"
#include "support.hpp"

using namespace weightd;
using namespace weightd::test;

namespace {

/// weightd at --log-level info with stdout and stderr in `log_file`, on the
/// data directory `dir` (HOT tier in dir/hot), plus any `extra` flags.
struct logged_daemon : running_daemon {
  logged_daemon(const std::filesystem::path& dir, std::filesystem::path log,
                std::vector<std::string> extra = {})
      : running_daemon(dir, options(std::move(log), std::move(extra))) {}

  static daemon_options options(std::filesystem::path log, std::vector<std::string> extra) {
    daemon_options o;
    o.flags = std::move(extra);
    o.log_file = std::move(log);
    o.log_level = "info";
    return o;
  }

  api::client client() {
    api::client_options o;
    o.address = address;
    return api::client{o};
  }

  /// The log's lines that contain every one of `parts`.
  std::vector<std::string> lines_with(const std::vector<std::string>& parts) const {
    std::vector<std::string> out;
    std::istringstream text{read_file(log_file)};
    for (std::string line; std::getline(text, line);) {
      bool all = true;
      for (const auto& p : parts) all = all && line.find(p) != std::string::npos;
      if (all) out.push_back(line);
    }
    return out;
  }

  /// Waits (up to 5 s) for a line with every one of `parts`; how many there are then.
  size_t await(const std::vector<std::string>& parts) const {
    for (int i = 0; i < 200 && lines_with(parts).empty(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    return lines_with(parts).size();
  }
};

/// The number in "lease 7 on ..." (weightctl lease acquire's output).
std::string lease_id_of(const std::string& acquired) {
  std::smatch m;
  if (!std::regex_search(acquired, m, std::regex{"lease (\\d+) on"})) return "?";
  return m[1];
}

/// Begins an import of `id` with request id `request_id` and puts one member:
/// the revision stays IMPORTING.
void begin_import(api::client& c, const events::revision_key& id, const std::string& request_id) {
  v1::BeginImportRequest begin;
  *begin.mutable_id() = id.to_proto();
  begin.set_expected_payload_count(1);
  begin.set_expected_logical_bytes(100);
  begin.set_request_id(request_id);
  REQUIRE(c.begin_import(begin).ok());
  v1::PutHeader member;
  member.set_key("weights/" + id.resource + "/part-0");
  member.set_group_id(events::payload_group_id(id));
  member.set_data_type(events::v1::DATA_TYPE_WEIGHT);
  REQUIRE(c.put_bytes(member, pattern(100, 1)).ok());
}

/// The state changes the lifecycle test makes, each as the parts of its line.
const std::vector<std::vector<std::string>> kLifecycleLines = {
    {" info import begun rev=default/kept@main#1 "},
    {" info import committed rev=default/kept@main#1 payloads=2 bytes=3000 residency=HOT"},
    {" info import begun rev=default/dropped@main#1 ", "request=\"req-begin-7\""},
    {" info import aborted rev=default/dropped@main#1 reason=client"},
    {" info revision removed rev=default/dropped@main#1 removed_objects=1"},
    {" info lease revoked rev=default/kept@main#1 lease=", "holder=\"inference-7\"",
     "reason=\"node drained\""},
    {" info revision removal requested rev=default/kept@main#1"},
    {" info revision removed rev=default/kept@main#1 removed_objects=3"},
};

}  // namespace

TEST_CASE("daemon log: import, abort, revoke and remove are one info line each naming the "
          "revision, and a restart logs none of them again") {
  temp_dir dir;
  write_file(dir.path() / "model" / "a.bin", pattern(1000, 1));
  write_file(dir.path() / "model" / "b.bin", pattern(2000, 2));
  auto first_log = dir.path() / "first.log";
  {
    logged_daemon d{dir.path() / "var", first_log};
    auto imported = d.ctl("import " + (dir.path() / "model").string() + " --as default/kept@main");
    REQUIRE_MESSAGE(imported.exit_code == 0, imported.output);

    auto c = d.client();
    begin_import(c, {"default", "default", "dropped", "main", 1}, "req-begin-7");
    auto aborted = d.ctl("abort default/dropped@main");
    REQUIRE_MESSAGE(aborted.exit_code == 0, aborted.output);

    auto lease = d.ctl("lease acquire default/kept@main --holder inference-7 --ttl 60s");
    REQUIRE_MESSAGE(lease.exit_code == 0, lease.output);
    auto revoked = d.ctl("lease revoke " + lease_id_of(lease.output) + " --reason 'node drained'");
    REQUIRE_MESSAGE(revoked.exit_code == 0, revoked.output);
    auto removed = d.ctl("rm default/kept@main");
    REQUIRE_MESSAGE(removed.exit_code == 0, removed.output);

    for (const auto& parts : kLifecycleLines) {
      CAPTURE(parts.front());
      CHECK(d.await(parts) == 1);
    }
    // Reads and lease traffic are not news.
    CHECK(d.lines_with({"lease acquired"}).empty());
    CHECK(d.lines_with({"lease granted"}).empty());
    // Every line a client caused names who asked.
    for (const auto& line : d.lines_with({" info import begun "}))
      CHECK(line.find(" by=\"ipv4:127.0.0.1:") != std::string::npos);
    CHECK(d.stop() == 0);
  }

  // The restart replays every one of those events and logs none of them.
  auto second_log = dir.path() / "second.log";
  logged_daemon again{dir.path() / "var", second_log};
  REQUIRE(again.ctl("ls --all").exit_code == 0);
  CHECK(again.await({" info weightd ready "}) == 1);
  for (const auto& parts : kLifecycleLines) {
    CAPTURE(parts.front());
    CHECK(again.lines_with(parts).empty());
  }
  CHECK(again.lines_with({" rev="}).empty());
}

TEST_CASE("daemon log: every change weightctl makes names its request id, --request-id or a "
          "weightctl-<16 hex digits> of its own per command, and the journal keeps it") {
  temp_dir dir;
  write_file(dir.path() / "model" / "a.bin", pattern(1000, 1));
  logged_daemon d{dir.path() / "var", dir.path() / "weightd.log"};
  auto model = (dir.path() / "model").string();
  auto named = d.ctl("import " + model + " --as default/named@main --quiet --request-id ci-job-42");
  REQUIRE_MESSAGE(named.exit_code == 0, named.output);
  CHECK(d.await({" info import begun rev=default/named@main#1 ", "request=\"ci-job-42\""}) == 1);
  CHECK(d.await({" info import committed rev=default/named@main#1 ", "request=\"ci-job-42\""}) == 1);

  auto own = d.ctl("import " + model + " --as default/own@main --quiet");
  REQUIRE_MESSAGE(own.exit_code == 0, own.output);
  REQUIRE(d.await({" info import committed rev=default/own@main#1 "}) == 1);
  std::smatch m;
  auto committed = d.lines_with({" info import committed rev=default/own@main#1 "}).front();
  REQUIRE_MESSAGE(std::regex_search(committed, m, std::regex{"request=\"(weightctl-[0-9a-f]{16})\""}),
                  committed);
  std::string generated = m[1];
  // One id for the whole command: its BeginImport carried the same one.
  CHECK(d.lines_with({" info import begun rev=default/own@main#1 ", generated}).size() == 1);
  auto again = d.ctl("import " + model + " --as default/own@main --quiet");
  REQUIRE(again.exit_code == 0);
  REQUIRE(d.await({" info import committed rev=default/own@main#2 "}) == 1);
  CHECK(d.lines_with({" info import committed rev=default/own@main#2 ", generated}).empty());

  // Too long, or with a space: refused naming the field, and nothing begun.
  auto too_long = d.ctl("import " + model + " --as default/refused@main --quiet --request-id " +
                        std::string(129, 'r'));
  CHECK(too_long.exit_code == 2);
  CHECK(too_long.output.find("request_id has 129 characters; the limit is 128") != std::string::npos);
  auto spaced = d.ctl("rm default/named@main --request-id 'a b'");
  CHECK(spaced.exit_code == 2);
  CHECK(spaced.output.find("request_id may hold only printable ASCII") != std::string::npos);
  CHECK(d.ctl("show default/refused@main").exit_code == 3);  // NOT_FOUND: nothing begun
  CHECK(d.ctl("show default/named@main").output.find("READY") != std::string::npos);
  REQUIRE(d.stop() == 0);

  // The journal's envelopes keep it (weightctl history, offline).
  auto history = run_command(std::string{WEIGHTD_WEIGHTCTL} + " history default/named@main --data-dir " +
                             (dir.path() / "var").string());
  CHECK(history.output.find("import_committed") != std::string::npos);
  CHECK(history.output.find(" ci-job-42\n") != std::string::npos);  // the request id column
}

TEST_CASE("daemon log: an import idle past --import-abandon is one info line with the abandon "
          "reason") {
  temp_dir dir;
  logged_daemon d{dir.path() / "var", dir.path() / "weightd.log",
                  {"--import-abandon", "300ms", "--reconcile-interval", "50ms"}};
  auto c = d.client();
  begin_import(c, {"default", "default", "idle", "main", 1}, "");
  CHECK(d.await({" info import aborted rev=default/idle@main#1 reason=\"abandoned: "}) == 1);
  CHECK(d.await({" info revision removed rev=default/idle@main#1 removed_objects=1"}) == 1);
  // More rounds pass: still one line each.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(d.lines_with({"import aborted rev=default/idle@main#1"}).size() == 1);
  CHECK(d.lines_with({"revision removed rev=default/idle@main#1"}).size() == 1);
}

TEST_CASE("daemon log: a drain is a line when it starts and one when it ends, and an expired "
          "lease is one line naming its holder") {
  temp_dir dir;
  write_file(dir.path() / "model" / "a.bin", pattern(1000, 1));
  logged_daemon d{dir.path() / "var", dir.path() / "weightd.log",
                  {"--reconcile-interval", "50ms"}};
  REQUIRE(d.ctl("import " + (dir.path() / "model").string() + " --as default/m@main").exit_code == 0);

  // A short lease the reconciler expires.
  auto brief = d.ctl("lease acquire default/m@main --holder brief-reader --ttl 100ms");
  REQUIRE_MESSAGE(brief.exit_code == 0, brief.output);
  CHECK(d.await({" info lease expired rev=default/m@main#1 lease=" + lease_id_of(brief.output),
                 "holder=\"brief-reader\""}) == 1);

  auto held = d.ctl("lease acquire default/m@main --holder trainer --ttl 60s");
  REQUIRE_MESSAGE(held.exit_code == 0, held.output);
  auto removing = d.ctl("rm default/m@main --drain-timeout 30s");
  REQUIRE_MESSAGE(removing.exit_code == 0, removing.output);
  CHECK(d.await({" info revision removal requested rev=default/m@main#1 drain=started leases=1 "
                 "drain_until="}) == 1);
  REQUIRE(d.ctl("lease release " + lease_id_of(held.output)).exit_code == 0);
  CHECK(d.await({" info drain finished rev=default/m@main#1 leases_left=0"}) == 1);
  CHECK(d.await({" info revision removed rev=default/m@main#1 removed_objects=2"}) == 1);
  CHECK(d.lines_with({"lease released"}).empty());  // a release is the holder's business
}

TEST_CASE("daemon log: a migration is a line when it starts and one when it finishes, and a "
          "policy change is one line") {
  temp_dir dir;
  write_file(dir.path() / "model" / "a.bin", pattern(1000, 1));
  logged_daemon d{dir.path() / "var", dir.path() / "weightd.log"};
  REQUIRE(d.ctl("import " + (dir.path() / "model").string() + " --as default/m@main").exit_code == 0);
  auto policy = d.ctl("policy default/m@main --mode MANUAL");
  REQUIRE_MESSAGE(policy.exit_code == 0, policy.output);
  CHECK(d.await({" info policy changed rev=default/m@main#1 preferred=HOT mode=MANUAL"}) == 1);
  auto migrated = d.ctl("migrate default/m@main --to COLD --wait");
  REQUIRE_MESSAGE(migrated.exit_code == 0, migrated.output);
  CHECK(d.await({" info migration started rev=default/m@main#1 operation=1 target=COLD",
                 "by=\"ipv4:127.0.0.1:"}) == 1);
  CHECK(d.await({" info migration finished rev=default/m@main#1 operation=1 target=COLD"}) == 1);
}

TEST_CASE("daemon log: a put neither tier can hold is a warning naming the key") {
  temp_dir dir;
  write_file(dir.path() / "big.bin", pattern(8192, 5));
  logged_daemon d{dir.path() / "var", dir.path() / "weightd.log",
                  {"--hot-capacity", "4KiB", "--cold-capacity", "4KiB"}};
  auto refused = d.ctl("obj put cache/big " + (dir.path() / "big.bin").string());
  CHECK(refused.exit_code != 0);
  CHECK(d.await({" warning put refused NO_AVAILABLE_SPACE tenant=\"default\" key=\"cache/big\" "
                 "bytes=8192"}) == 1);
}

TEST_CASE("daemon log: an eviction round is one info line with how many objects and bytes went") {
  temp_dir dir;
  for (int i = 0; i < 3; ++i)
    write_file(dir.path() / ("blob" + std::to_string(i)), pattern(25'000, static_cast<unsigned>(i)));
  logged_daemon d{dir.path() / "var", dir.path() / "weightd.log", {"--hot-capacity", "64KiB"}};
  for (int i = 0; i < 3; ++i) {
    auto put = d.ctl("obj put cache/blob" + std::to_string(i) + " " +
                     (dir.path() / ("blob" + std::to_string(i))).string());
    REQUIRE_MESSAGE(put.exit_code == 0, put.output);
  }
  // 2 x 25000 bytes are 76 % of HOT (under the 90 % watermark); the third
  // does not fit beside them: one round takes the oldest.
  CHECK(d.await({" info eviction round objects=1 bytes=25000 "}) == 1);
  CHECK(d.lines_with({" eviction round "}).size() == 1);
}
