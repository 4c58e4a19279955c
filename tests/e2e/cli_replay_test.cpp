// weightctl journal replay / verify and weightctl history, on an LMDB journal
// holding a real lifecycle (copied from a live run), with the real binary.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <array>

#include "api/cli/exit_codes.hpp"
#include "lifecycle_fixture.hpp"
#include "persistence/lmdb_journal.hpp"
#include "persistence/replay.hpp"

using namespace weightd;
using namespace weightd::test;
namespace v1 = events::v1;

namespace {

run_result weightctl(const std::string& args) {
  return run_command(std::string{WEIGHTD_WEIGHTCTL} + " " + args);
}

/// Copies every event of `from` into a new LMDB journal in `dir`.
void copy_to_lmdb(const persistence::journal_backend& from, const std::filesystem::path& dir) {
  persistence::lmdb_options o;
  o.dir = dir / "journal";
  auto to = persistence::lmdb_journal::open(o);
  REQUIRE(to.ok());
  REQUIRE(from.read({}, [&](const v1::Envelope& e) {
                std::vector<v1::Envelope> one{e};
                REQUIRE((*to)->append(one).ok());
                CHECK(one[0].global_seq() == e.global_seq());
                return true;
              }).ok());
}

}  // namespace

TEST_CASE_FIXTURE(lifecycle_fixture, "cli: journal replay shows the state at any seq, verify and history") {
  auto rid = id();
  REQUIRE(begin(rid, 2, 2000).ok());
  uint64_t after_begin = *memory->highest_seq();
  auto u = put_revision(rid, 2, 1000);
  REQUIRE(commit(rid, 1, u).ok());
  REQUIRE(set_policy(rid, 2, {v1::RESIDENCY_HOT, 0.5, v1::MIGRATION_MANUAL}).ok());
  temp_dir out;
  copy_to_lmdb(*memory, out.path());
  auto base = " --data-dir " + out.path().string();

  auto then = weightctl("journal replay --until " + std::to_string(after_begin) + base);
  REQUIRE(then.exit_code == 0);
  CHECK(then.output.find("default/llama-3-8b@main#1") != std::string::npos);
  CHECK(then.output.find("IMPORTING") != std::string::npos);
  CHECK(then.output.find("objects (0;") != std::string::npos);

  auto now = weightctl("journal replay" + base);
  CHECK(now.output.find("READY") != std::string::npos);
  CHECK(now.output.find("objects (3;") != std::string::npos);
  auto json = weightctl("journal replay --json" + base);
  CHECK(json.output.find("\"availability\": \"READY\"") != std::string::npos);
  CHECK(json.output.find("\"metadata_generation\": 3") != std::string::npos);

  auto bad_until = weightctl("journal replay --until yesterday" + base);
  CHECK(bad_until.exit_code == 2);
  CHECK(bad_until.output.find("--until 'yesterday' is neither a seq nor a UTC time") !=
        std::string::npos);
  auto by_time = weightctl("journal replay --until 1970-01-01T00:00:00Z" + base);
  CHECK(by_time.exit_code == 0);
  CHECK(by_time.output.find("revisions (0)") != std::string::npos);

  auto verify = weightctl("journal verify" + base);
  CHECK(verify.exit_code == 0);
  CHECK(verify.output.find("ok: ") == 0);

  auto history = weightctl("history default/llama-3-8b@main" + base);
  REQUIRE(history.exit_code == 0);
  CHECK(history.output.find("import_begun") != std::string::npos);
  CHECK(history.output.find("import_committed       gen 2") != std::string::npos);
  CHECK(history.output.find("policy_updated         gen 3") != std::string::npos);
  CHECK(weightctl("history default/nothing@here" + base).exit_code == 3);
}

TEST_CASE("cli: journal verify reports the first event that breaks the lifecycle, with its seq") {
  temp_dir dir;
  {
    persistence::lmdb_options o;
    o.dir = dir.path() / "journal";
    auto j = persistence::lmdb_journal::open(o);
    REQUIRE(j.ok());
    events::revision_key rid{"default", "default", "m", "r", 1};
    auto make = [&](auto fill) {
      v1::Envelope e;
      e.set_stream(events::revision_stream(rid));
      e.set_timestamp_ms(1000);
      fill(e);
      return std::vector<v1::Envelope>{e};
    };
    auto begun = make([&](v1::Envelope& e) {
      *e.mutable_import_begun()->mutable_id() = rid.to_proto();
      e.mutable_import_begun()->set_payload_group_id(events::payload_group_id(rid));
    });
    REQUIRE((*j)->append(begun).ok());
    // A deletion of a revision that was never DELETING: not a lifecycle step.
    auto deleted = make([&](v1::Envelope& e) { *e.mutable_revision_deleted()->mutable_id() = rid.to_proto(); });
    REQUIRE((*j)->append(deleted).ok());
  }
  auto r = weightctl("journal verify --data-dir " + dir.path().string());
  CHECK(r.exit_code == 19);
  CHECK(r.output.find("event seq 2 (revision_deleted) does not apply: not DELETING") !=
        std::string::npos);
}

TEST_CASE("cli: journal verify and recovery refuse an event stored in another revision's stream") {
  temp_dir dir;
  {
    persistence::lmdb_options o;
    o.dir = dir.path() / "journal";
    auto j = persistence::lmdb_journal::open(o);
    REQUIRE(j.ok());
    events::revision_key a{"default", "default", "m", "a", 1}, b{"default", "default", "m", "b", 1};
    v1::Envelope e;
    e.set_stream(events::revision_stream(a));  // b's event, in a's stream
    e.set_timestamp_ms(1000);
    *e.mutable_import_begun()->mutable_id() = b.to_proto();
    e.mutable_import_begun()->set_payload_group_id(events::payload_group_id(b));
    std::vector<v1::Envelope> batch{e};
    REQUIRE((*j)->append(batch).ok());
  }
  auto r = weightctl("journal verify --data-dir " + dir.path().string());
  CHECK(r.exit_code == api::exit_code(errc::data_loss));
  CHECK(r.output.find("event 1 (import_begun) is stored in stream 'revision|default/m@a#1' but "
                      "belongs in 'revision|default/m@b#1'") != std::string::npos);
  persistence::lmdb_options o;
  o.dir = dir.path() / "journal";
  auto j = persistence::lmdb_journal::open(o);
  REQUIRE(j.ok());
  auto folded = persistence::fold_journal(**j);  // what the daemon's recovery runs
  CHECK(folded.error().code() == errc::data_loss);
}
