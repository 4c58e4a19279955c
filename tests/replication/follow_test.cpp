// SPEC §11 Follow, in one process: a leader served over gRPC and a standby
// (api::follower) copying its journal into its own. The standby's journal is
// the leader's byte for byte and its fold is the leader's at every checked
// seq; a standby that was away catches up from its own journal.
#include <doctest/doctest.h>

#include <thread>

#include "api/common/loopback.hpp"
#include "api/server/follower.hpp"
#include "events/state_codec.hpp"
#include "persistence/replay.hpp"
#include "support.hpp"
#include "test_node.hpp"

using namespace weightd;
using namespace weightd::test;

namespace {

/// weightctl against the leader.
run_result ctl(const served_node& leader, const std::string& args) {
  return run_command(std::string{WEIGHTD_WEIGHTCTL} + " --address " + leader.address() + " " +
                     args + " 2>&1");
}

/// Imports a small model directory as default/<name>@main.
void import_model(const served_node& leader, const std::filesystem::path& dir,
                  const std::string& name) {
  auto model = dir / name;
  write_file(model / "config.json", "{\"name\": \"" + name + "\"}");
  write_file(model / "weights.bin", pattern(200'000, static_cast<unsigned>(name.size())));
  auto imported = ctl(leader, "import " + model.string() + " --as default/" + name + "@main --quiet");
  REQUIRE_MESSAGE(imported.exit_code == 0, imported.output);
}

api::follower_options following(const served_node& leader) {
  api::follower_options o;
  o.leader.address = leader.address();
  o.member = "standby-1";
  o.min_backoff = std::chrono::milliseconds(20);
  o.max_backoff = std::chrono::milliseconds(200);
  o.snapshot_every = 7;  // several snapshots from the standby's own fold
  return o;
}

std::shared_ptr<persistence::journal_backend> open_journal(const std::filesystem::path& dir) {
  persistence::lmdb_options o;
  o.dir = dir;
  o.mode = persistence::durability::nosync;
  auto j = persistence::lmdb_journal::open(o);
  REQUIRE_MESSAGE(j.ok(), j.error().to_string());
  return std::move(*j);
}

uint64_t highest(const persistence::journal_backend& j) { return *j.highest_seq(); }

/// The standby's journal is the start of the leader's, byte for byte (the
/// leader may have written more since: a migration's rounds, a reconciler's).
void check_same_journal(const persistence::journal_backend& leader,
                        const persistence::journal_backend& standby) {
  auto b = read_all(standby);
  auto a = read_all(leader, {1, b.size(), persistence::kMaxSeq});
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i)
    CHECK_MESSAGE(a[i].SerializeAsString() == b[i].SerializeAsString(), "seq " << i + 1);
}

/// The leader's fold at `seq`, from its events alone.
events::store_state leader_fold(const persistence::journal_backend& leader, uint64_t seq) {
  persistence::fold_options o;
  o.until_seq = seq;
  o.use_snapshots = false;
  auto folded = persistence::fold_journal(leader, o);
  REQUIRE_MESSAGE(folded.ok(), folded.error().to_string());
  return std::move(*folded);
}

}  // namespace

TEST_CASE("follow: a standby's journal is the leader's byte for byte, and its fold is the leader's at every checked seq") {
  temp_dir dir;
  served_node leader{node_in(dir.path() / "leader", 64 << 20), {}};
  auto journal = open_journal(dir.path() / "standby");
  auto started = api::follower::start(journal, following(leader));
  REQUIRE_MESSAGE(started.ok(), started.error().to_string());
  auto& standby = **started;
  auto& leader_journal = *leader.store->handles().backend();
  for (const char* name : {"alpha", "beta", "gamma"}) {
    import_model(leader, dir.path(), name);
    auto seq = highest(leader_journal);
    REQUIRE(standby.wait_for(seq, std::chrono::seconds(10)));
    CHECK(standby.state() == leader_fold(leader_journal, seq));  // checked at this seq
  }
  REQUIRE(ctl(leader, "lease acquire default/beta@main --holder reader-1 --ttl 60s").exit_code == 0);
  REQUIRE(ctl(leader, "policy default/gamma@main --preferred COLD").exit_code == 0);
  REQUIRE(ctl(leader, "rm default/alpha@main").exit_code == 0);
  auto seq = highest(leader_journal);
  REQUIRE(standby.wait_for(seq, std::chrono::seconds(10)));
  standby.stop();  // (the COLD migration may still write: compare at the standby's seq)
  auto status = standby.status();
  CHECK(status.durable_seq >= seq);
  CHECK(status.leader_seq >= seq);
  CHECK(status.failure.empty());
  seq = status.durable_seq;
  CHECK(standby.state() == leader_fold(leader_journal, seq));
  check_same_journal(leader_journal, *journal);
  // The standby's snapshots are its own fold: folding its journal from them
  // gives the leader's state too.
  auto from_snapshots = persistence::fold_journal(*journal);
  REQUIRE(from_snapshots.ok());
  CHECK(*from_snapshots == leader_fold(leader_journal, seq));
  CHECK(journal->load_snapshot(events::kStateSnapshotStream, {}).value().has_value());
}

TEST_CASE("follow: a standby that was away resumes from its own journal and catches up") {
  temp_dir dir;
  served_node leader{node_in(dir.path() / "leader", 64 << 20), {}};
  auto& leader_journal = *leader.store->handles().backend();
  {
    auto journal = open_journal(dir.path() / "standby");
    auto first = api::follower::start(journal, following(leader));
    REQUIRE(first.ok());
    import_model(leader, dir.path(), "alpha");
    REQUIRE((*first)->wait_for(highest(leader_journal), std::chrono::seconds(10)));
  }  // the standby stops (its journal closes)
  import_model(leader, dir.path(), "beta");  // while it is away
  import_model(leader, dir.path(), "gamma");
  auto journal = open_journal(dir.path() / "standby");
  auto before = highest(*journal);
  CHECK(before < highest(leader_journal));
  auto again = api::follower::start(journal, following(leader));
  REQUIRE(again.ok());
  CHECK((*again)->status().durable_seq == before);  // its own journal, folded at start
  auto seq = highest(leader_journal);
  REQUIRE((*again)->wait_for(seq, std::chrono::seconds(10)));
  (*again)->stop();
  seq = (*again)->status().durable_seq;
  CHECK((*again)->state() == leader_fold(leader_journal, seq));
  check_same_journal(leader_journal, *journal);
}

TEST_CASE("follow: with no leader to reach, a standby keeps trying and says why, stop() ends it at once") {
  temp_dir dir;
  auto journal = open_journal(dir.path() / "standby");
  api::follower_options o;
  o.leader.address = "127.0.0.1:" + std::to_string(api::free_loopback_port());
  o.min_backoff = std::chrono::milliseconds(10);
  o.max_backoff = std::chrono::milliseconds(50);
  auto started = api::follower::start(journal, o);
  REQUIRE(started.ok());
  for (int i = 0; i < 200 && (*started)->status().last_error.empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  auto status = (*started)->status();
  CHECK_FALSE(status.connected);
  CHECK_FALSE(status.last_error.empty());
  CHECK(status.failure.empty());  // not given up: it goes on trying
  auto stop_started = std::chrono::steady_clock::now();
  (*started)->stop();
  CHECK(std::chrono::steady_clock::now() - stop_started < std::chrono::seconds(2));
}

TEST_CASE("follow: a standby whose journal holds a higher epoch than the leader's is refused, naming the former leader") {
  temp_dir dir;
  served_node leader{node_in(dir.path() / "leader", 64 << 20), {}};
  // This standby's journal saw a later leadership (epoch 1) than the leader's (0).
  auto journal = open_journal(dir.path() / "standby");
  events::v1::Envelope taken;
  taken.set_stream("system");
  taken.set_timestamp_ms(1000);
  taken.set_epoch(1);
  taken.mutable_leadership_taken()->set_epoch(1);
  taken.mutable_leadership_taken()->set_member("elsewhere");
  std::vector<events::v1::Envelope> batch{taken};
  REQUIRE(journal->append(batch).ok());
  auto started = api::follower::start(journal, following(leader));
  REQUIRE_MESSAGE(started.ok(), started.error().to_string());
  for (int i = 0; i < 300 && (*started)->status().last_error.empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  auto status = (*started)->status();
  CHECK_FALSE(status.connected);
  CHECK(status.durable_seq == 1);  // nothing copied
  CHECK(status.last_error.find("former leader") != std::string::npos);
  CHECK(status.last_error.find("CONFLICT") == 0);
}
