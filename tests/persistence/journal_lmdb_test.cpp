// What only the LMDB journal can show: map growth, damaged files, a commit
// that really fails, and readers in another process while the map grows.
#include <doctest/doctest.h>
#include <lmdb.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "persistence/record.hpp"
#include "support.hpp"

using namespace weightd;
using namespace weightd::test;
using persistence::durability;
using persistence::lmdb_journal;
using persistence::lmdb_options;

namespace {

lmdb_options options_in(const std::filesystem::path& dir, uint64_t initial_map = 1 << 20) {
  lmdb_options o;
  o.dir = dir;
  o.mode = durability::nosync;
  o.initial_map_bytes = initial_map;
  return o;
}

std::unique_ptr<lmdb_journal> open_or_fail(const lmdb_options& o) {
  auto j = lmdb_journal::open(o);
  REQUIRE_MESSAGE(j.ok(), j.error().to_string());
  return std::move(*j);
}

std::vector<events::v1::Envelope> batch_of(size_t n, const std::string& stream,
                                           size_t payload_bytes = 256) {
  std::vector<events::v1::Envelope> batch;
  for (size_t i = 0; i < n; ++i) batch.push_back(make_event(stream, std::string(payload_bytes, 'x')));
  return batch;
}

/// Flips one byte of the value stored under `key` in database `db`, behind the
/// journal's back (the journal must be closed).
void damage(const std::filesystem::path& dir, const char* db, const std::string& key) {
  MDB_env* env;
  REQUIRE(mdb_env_create(&env) == 0);
  mdb_env_set_maxdbs(env, 8);
  REQUIRE(mdb_env_open(env, dir.c_str(), 0, 0644) == 0);
  MDB_txn* txn;
  REQUIRE(mdb_txn_begin(env, nullptr, 0, &txn) == 0);
  MDB_dbi dbi;
  REQUIRE(mdb_dbi_open(txn, db, 0, &dbi) == 0);
  MDB_val k{key.size(), const_cast<char*>(key.data())}, v;
  REQUIRE(mdb_get(txn, dbi, &k, &v) == 0);
  std::string value(static_cast<const char*>(v.mv_data), v.mv_size);
  value[value.size() / 2] ^= 0x20;
  MDB_val nv{value.size(), value.data()};
  REQUIRE(mdb_put(txn, dbi, &k, &nv, 0) == 0);
  REQUIRE(mdb_txn_commit(txn) == 0);
  mdb_env_close(env);
}

}  // namespace

TEST_CASE("lmdb: the map grows from a tiny start and every event survives") {
  temp_dir dir;
  auto o = options_in(dir.path(), 64 << 10);
  {
    auto j = open_or_fail(o);
    for (int i = 0; i < 200; ++i) {
      auto batch = batch_of(100, "object|default/k" + std::to_string(i % 7));
      REQUIRE(j->append(batch).ok());
    }
    auto stats = j->stats();
    REQUIRE(stats.ok());
    CHECK(stats->map_growths >= 3);
    CHECK(stats->highest_seq == 20000);
  }
  auto j = open_or_fail(o);
  uint64_t expected = 1;
  REQUIRE(j->read({}, [&](const events::v1::Envelope& e) {
               CHECK(e.global_seq() == expected++);
               return true;
             }).ok());
  CHECK(expected == 20001);
}

TEST_CASE("lmdb: a full map at its ceiling fails the batch whole, naming the flag") {
  temp_dir dir;
  auto o = options_in(dir.path(), 256 << 10);
  o.max_map_bytes = 1 << 20;
  auto j = open_or_fail(o);
  status failure;
  uint64_t acknowledged = 0;
  for (int i = 0; i < 1000 && failure.ok(); ++i) {
    auto batch = batch_of(50, "system", 1024);
    failure = j->append(batch);
    if (failure.ok()) acknowledged = batch.back().global_seq();
  }
  REQUIRE_FALSE(failure.ok());
  CHECK(failure.code() == errc::durability_failed);
  CHECK(failure.message().find("--journal-max-map-bytes") != std::string::npos);
  CHECK(*j->highest_seq() == acknowledged);
  CHECK(read_all(*j).size() == acknowledged);
  CHECK(acknowledged % 50 == 0);  // no partial batch
}

TEST_CASE("lmdb: a damaged event record is reported with its seq") {
  temp_dir dir;
  auto o = options_in(dir.path());
  {
    auto j = open_or_fail(o);
    auto batch = batch_of(5, "system");
    REQUIRE(j->append(batch).ok());
  }
  damage(dir.path(), "events", persistence::be64(3));
  auto j = open_or_fail(o);
  std::vector<uint64_t> seen;
  auto st = j->read({}, [&](const events::v1::Envelope& e) {
    seen.push_back(e.global_seq());
    return true;
  });
  CHECK(st.code() == errc::data_loss);
  CHECK(st.message().find("seq 3 failed its checksum") != std::string::npos);
  CHECK(seen == std::vector<uint64_t>{1, 2});  // up to the damage, nothing after
  auto by_stream = j->read_stream("system", {}, [](const events::v1::Envelope&) { return true; });
  CHECK(by_stream.code() == errc::data_loss);
}

TEST_CASE("memory: a damaged event record is reported with its seq") {
  persistence::memory_journal j;
  auto batch = batch_of(5, "system");
  REQUIRE(j.append(batch).ok());
  j.corrupt_event_for_testing(4);
  auto st = j.read({}, [](const events::v1::Envelope&) { return true; });
  CHECK(st.code() == errc::data_loss);
  CHECK(st.message().find("seq 4") != std::string::npos);
}

TEST_CASE("lmdb: loading a snapshot skips a damaged newest one") {
  temp_dir dir;
  auto o = options_in(dir.path());
  {
    auto j = open_or_fail(o);
    REQUIRE(j->save_snapshot({"system", 10, 1, "old"}).ok());
    REQUIRE(j->save_snapshot({"system", 20, 2, "new"}).ok());
  }
  damage(dir.path(), "snapshots", persistence::stream_hash("system") + persistence::be64(20));
  auto j = open_or_fail(o);
  auto loaded = j->load_snapshot("system", {});
  REQUIRE(loaded.ok());
  REQUIRE(*loaded);
  CHECK((*loaded)->data == "old");
}

TEST_CASE("lmdb: opening read-only without a journal says where it looked") {
  temp_dir dir;
  auto o = options_in(dir.path() / "nothing-here");
  o.read_only = true;
  auto j = lmdb_journal::open(o);
  REQUIRE_FALSE(j.ok());
  CHECK(j.error().code() == errc::not_found);
  CHECK(j.error().message().find("nothing-here") != std::string::npos);
}

TEST_CASE("lmdb: after a failed commit the journal refuses writes until reopened") {
  temp_dir dir;
  // In a child: the file-size limit makes LMDB's commit fail for real (EFBIG)
  // without touching the rest of the test process.
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    signal(SIGXFSZ, SIG_IGN);
    auto o = options_in(dir.path());
    o.mode = durability::sync;
    uint64_t acknowledged = 0;
    status failure;
    {
      auto opened = lmdb_journal::open(o);
      if (!opened) _exit(10);
      auto& j = **opened;
      auto size = std::filesystem::file_size(dir.path() / "data.mdb");
      rlimit limit{size + (256 << 10), RLIM_INFINITY};
      setrlimit(RLIMIT_FSIZE, &limit);
      for (int i = 0; i < 10000 && failure.ok(); ++i) {
        auto batch = batch_of(20, "system", 1024);
        failure = j.append(batch);
        if (failure.ok()) acknowledged = batch.back().global_seq();
      }
      if (failure.code() != errc::durability_failed) _exit(11);
      if (failure.message().find("commit failed") == std::string::npos) _exit(12);
      auto small = batch_of(1, "system", 1);
      auto refused = j.append(small);
      if (refused.code() != errc::durability_failed) _exit(13);
      if (refused.message().find("refuses writes") == std::string::npos) _exit(14);
    }
    rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
    setrlimit(RLIMIT_FSIZE, &unlimited);
    auto reopened = lmdb_journal::open(o);
    if (!reopened) _exit(15);
    auto highest = (*reopened)->highest_seq();
    if (!highest || *highest < acknowledged) _exit(16);  // every acknowledged event is there
    if (*highest % 20 != 0) _exit(17);                     // and no partial batch
    auto again = batch_of(1, "system", 1);
    if (!(*reopened)->append(again).ok()) _exit(18);
    _exit(0);
  }
  int wstatus = 0;
  REQUIRE(waitpid(child, &wstatus, 0) == child);
  REQUIRE(WIFEXITED(wstatus));
  CHECK(WEXITSTATUS(wstatus) == 0);
}

TEST_CASE("lmdb: a reader in another process sees a consistent prefix while the map grows") {
  temp_dir dir;
  auto o = options_in(dir.path(), 64 << 10);
  { auto j = open_or_fail(o); }  // create the files before the writer runs
  pid_t writer = fork();
  REQUIRE(writer >= 0);
  if (writer == 0) {
    auto opened = lmdb_journal::open(o);
    if (!opened) _exit(10);
    for (int i = 0; i < 300; ++i) {
      auto batch = batch_of(50, "system", 512);
      if (!(*opened)->append(batch).ok()) _exit(11);
    }
    _exit(0);
  }
  auto ro = o;
  ro.read_only = true;
  auto reader = open_or_fail(ro);
  int reads = 0;
  uint64_t last_seen = 0;
  for (;;) {
    int wstatus = 0;
    bool done = waitpid(writer, &wstatus, WNOHANG) == writer;
    uint64_t expected = 1;
    auto st = reader->read({}, [&](const events::v1::Envelope& e) {
      if (e.global_seq() != expected) return false;
      ++expected;
      return true;
    });
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    auto highest = reader->highest_seq();
    REQUIRE_MESSAGE(highest.ok(), highest.error().to_string());
    CHECK(expected - 1 >= last_seen);  // never goes back
    last_seen = expected - 1;
    ++reads;
    if (done) {
      CHECK(WIFEXITED(wstatus));
      CHECK(WEXITSTATUS(wstatus) == 0);
      break;
    }
  }
  CHECK(last_seen == 15000);
  CHECK(reads >= 1);
}

TEST_CASE("lmdb: a truncated data.mdb is a clear error naming the file, never a SIGBUS") {
  temp_dir dir;
  {
    auto j = open_or_fail(options_in(dir.path()));
    for (int i = 0; i < 20; ++i) {
      auto batch = batch_of(50, "s" + std::to_string(i), 2000);
      REQUIRE(j->append(batch).ok());
    }
  }
  auto file = dir.path() / "data.mdb";
  auto size = std::filesystem::file_size(file);
  std::filesystem::resize_file(file, size / 2);
  auto reopened = lmdb_journal::open(options_in(dir.path()));
  REQUIRE_FALSE(reopened.ok());
  CHECK(reopened.error().code() == errc::data_loss);
  CHECK(reopened.error().message().find(file.string() + " is truncated") == 0);
  auto ro = options_in(dir.path());
  ro.read_only = true;
  CHECK(lmdb_journal::open(ro).error().code() == errc::data_loss);
  // `journal verify` (offline) says the same and exits non-zero.
  auto verify = run_command(std::string{WEIGHTD_WEIGHTCTL} + " --journal-dir " +
                            dir.path().string() + " journal verify");
  CHECK(verify.exit_code != 0);
  CHECK(verify.output.find("is truncated") != std::string::npos);
}
