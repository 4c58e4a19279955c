// SPEC §6 and persistence/FORMAT.md: a journal whose files were damaged
// behind weightd's back — flipped bytes in a record, a truncated data.mdb, a
// missing lock.mdb, a damaged snapshot — as seen by the real weightd at
// startup and by `weightctl journal verify`: a clear error naming what is
// damaged (DATA_LOSS and the seq), never a signal, and no tier file removed.
// (journal_lmdb_test.cpp covers the same damage at the journal API.)
#include <doctest/doctest.h>
#include <lmdb.h>
#include <sys/stat.h>

#include "fs_fault_support.hpp"
#include "persistence/record.hpp"

using namespace weightd;
using namespace weightd::test;

namespace {

/// A journal written by a real weightd: 6 objects of 100 000 bytes in HOT
/// (seqs 2..7, after writer_started at 1), then the daemon stopped.
struct damaged_store {
  temp_dir dir;
  std::filesystem::path data = dir.path() / "data";
  std::filesystem::path hot = dir.path() / "hot";
  std::filesystem::path journal = data / "journal";
  std::filesystem::path data_mdb = journal / "data.mdb";
  std::filesystem::path log = dir.path() / "weightd.log";
  uint64_t page_size = 0;

  explicit damaged_store(uint64_t snapshot_every = 0, int objects = 6) {
    auto file = dir.path() / "payload";
    write_file(file, pattern(100000, 1));
    fault_daemon d(flags(snapshot_every), log);
    REQUIRE_MESSAGE(d.serving(), d.log());
    for (int i = 1; i <= objects; ++i)
      REQUIRE(d.ctl("obj put k/" + std::to_string(i) + " " + file.string()).exit_code == 0);
    REQUIRE(d.stop().exit_code == 0);
    REQUIRE(count_files(hot) == static_cast<size_t>(objects));
    with_env(MDB_RDONLY, [&](MDB_env* env, MDB_txn*) {
      MDB_stat st;
      mdb_env_stat(env, &st);
      page_size = st.ms_psize;
    });
    std::filesystem::remove(log);  // the cases read only what comes next
  }

  std::vector<std::string> flags(uint64_t snapshot_every = 0) const {
    return daemon_flags(data, hot, {"--snapshot-every", std::to_string(snapshot_every)});
  }

  /// Runs `fn` on the LMDB environment and a transaction of it (read-only
  /// unless flags say otherwise), behind the journal's back.
  template <class Fn>
  void with_env(unsigned flags, Fn&& fn) const {
    MDB_env* env = nullptr;
    REQUIRE(mdb_env_create(&env) == 0);
    mdb_env_set_maxdbs(env, 8);
    REQUIRE(mdb_env_open(env, journal.c_str(), flags, 0644) == 0);
    MDB_txn* txn = nullptr;
    REQUIRE(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn) == 0);
    fn(env, txn);
    mdb_txn_abort(txn);
    mdb_env_close(env);
  }

  /// The value stored under `key` in database `db`.
  std::string value_of(const char* db, const std::string& key) const {
    std::string value;
    with_env(MDB_RDONLY, [&](MDB_env*, MDB_txn* txn) {
      MDB_dbi dbi;
      REQUIRE(mdb_dbi_open(txn, db, 0, &dbi) == 0);
      MDB_val k{key.size(), const_cast<char*>(key.data())}, v;
      REQUIRE(mdb_get(txn, dbi, &k, &v) == 0);
      value.assign(static_cast<const char*>(v.mv_data), v.mv_size);
    });
    return value;
  }

  /// The key of the newest snapshot of the whole state.
  std::string newest_snapshot_key() const {
    std::string newest;
    auto hash = persistence::stream_hash("state");
    with_env(MDB_RDONLY, [&](MDB_env*, MDB_txn* txn) {
      MDB_dbi dbi;
      REQUIRE(mdb_dbi_open(txn, "snapshots", 0, &dbi) == 0);
      MDB_cursor* c;
      REQUIRE(mdb_cursor_open(txn, dbi, &c) == 0);
      MDB_val k, v;
      for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
           rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        std::string key(static_cast<const char*>(k.mv_data), k.mv_size);
        if (key.size() == 24 && key.compare(0, 16, hash) == 0) newest = key;
      }
      mdb_cursor_close(c);
    });
    REQUIRE_FALSE(newest.empty());
    return newest;
  }

  /// Flips one byte in the body of the record stored under `key` in `db`
  /// (past the record's version byte and checksum), in the file itself: every
  /// place data.mdb holds those bytes (a page LMDB freed may hold an old copy).
  void flip_record_body(const char* db, const std::string& key) const {
    auto record = value_of(db, key);
    REQUIRE(record.size() > 9 + 2);
    auto bytes = read_file(data_mdb);
    size_t copies = 0;
    for (auto at = bytes.find(record); at != std::string::npos; at = bytes.find(record, at + 1)) {
      bytes[at + 9 + (record.size() - 9) / 2] ^= 0x20;
      ++copies;
    }
    REQUIRE(copies >= 1);
    std::fstream f(data_mdb, std::ios::in | std::ios::out | std::ios::binary);
    REQUIRE(f);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(f.good());
    REQUIRE(value_of(db, key) != record);  // LMDB now reads the damaged bytes
  }

  std::string daemon_log() const { return read_file(log); }
};

bool names_truncation(const std::string& text, const std::filesystem::path& file) {
  return contains(text, "DATA_LOSS") && contains(text, file.string());
}

}  // namespace

// ------------------------------------------------- flipped bytes in a record

TEST_CASE("journal damage: a flipped byte in an event record's body stops weightd at startup with DATA_LOSS naming the seq, without a signal, and no tier file is removed") {
  damaged_store s;
  s.flip_record_body("events", persistence::be64(4));
  auto e = run_weightd_to_exit(s.flags(), s.log);
  CHECK_FALSE_MESSAGE(e.timed_out, s.daemon_log());  // it must not serve a state with a hole
  CHECK(e.exited);
  CHECK(e.exit_code != 0);
  auto log = s.daemon_log();
  CHECK_MESSAGE(contains(log, "DATA_LOSS"), log);
  CHECK_MESSAGE(contains(log, "seq 4"), log);
  CHECK_MESSAGE(contains(log, "journal verify"), log);  // what to do next
  CHECK(count_files(s.hot) == 6);
}

TEST_CASE("journal damage: journal verify reports a flipped byte in an event record's body as DATA_LOSS naming the seq, exit 18") {
  damaged_store s;
  s.flip_record_body("events", persistence::be64(4));
  auto verify = offline_ctl(s.journal, "journal verify");
  CHECK(verify.exit_code == 18);  // 1 + DATA_LOSS; -1 would be a signal
  CHECK_MESSAGE(contains(verify.output, "DATA_LOSS"), verify.output);
  CHECK_MESSAGE(contains(verify.output, "seq 4"), verify.output);
  auto dump = offline_ctl(s.journal, "journal dump");
  CHECK(dump.exit_code == 18);
  CHECK_MESSAGE(contains(dump.output, "#3 "), dump.output);  // up to the damage
  CHECK_MESSAGE(contains(dump.output, "seq 4"), dump.output);
}

TEST_CASE("journal damage: a flipped byte in the last event record's body is DATA_LOSS naming that seq too") {
  damaged_store s;
  s.flip_record_body("events", persistence::be64(7));
  auto e = run_weightd_to_exit(s.flags(), s.log);
  CHECK_FALSE(e.timed_out);
  CHECK(e.exited);
  CHECK(e.exit_code != 0);
  CHECK_MESSAGE(contains(s.daemon_log(), "seq 7"), s.daemon_log());
  auto verify = offline_ctl(s.journal, "journal verify");
  CHECK(verify.exit_code == 18);
  CHECK_MESSAGE(contains(verify.output, "seq 7"), verify.output);
  CHECK(count_files(s.hot) == 6);
}

// ------------------------------------------------------- a truncated data.mdb

TEST_CASE("journal damage: a data.mdb truncated to half stops weightd with DATA_LOSS naming the file, without a signal, and no tier file is removed") {
  damaged_store s;
  std::filesystem::resize_file(s.data_mdb, std::filesystem::file_size(s.data_mdb) / 2);
  auto e = run_weightd_to_exit(s.flags(), s.log);
  CHECK_FALSE(e.timed_out);
  CHECK(e.exited);
  CHECK(e.exit_code != 0);
  CHECK_MESSAGE(names_truncation(s.daemon_log(), s.data_mdb), s.daemon_log());
  CHECK(count_files(s.hot) == 6);
}

TEST_CASE("journal damage: a data.mdb truncated to one page stops weightd with a clear error naming the journal, without a signal, and no tier file is removed") {
  damaged_store s;
  std::filesystem::resize_file(s.data_mdb, s.page_size);
  auto e = run_weightd_to_exit(s.flags(), s.log);
  CHECK_FALSE(e.timed_out);
  CHECK(e.exited);
  CHECK(e.exit_code != 0);
  CHECK_MESSAGE(contains(s.daemon_log(), s.journal.string()), s.daemon_log());
  CHECK(count_files(s.hot) == 6);
  auto verify = offline_ctl(s.journal, "journal verify");
  CHECK(verify.exit_code > 1);  // an error class, not a signal (-1) or usage (1)
  CHECK_MESSAGE(contains(verify.output, "journal"), verify.output);
}

TEST_CASE("journal damage: a data.mdb truncated to one page is DATA_LOSS naming data.mdb, from weightd and from journal verify") {
  damaged_store s;
  std::filesystem::resize_file(s.data_mdb, s.page_size);
  auto e = run_weightd_to_exit(s.flags(), s.log);
  CHECK(e.exited);
  CHECK_MESSAGE(names_truncation(s.daemon_log(), s.data_mdb), s.daemon_log());
  auto verify = offline_ctl(s.journal, "journal verify");
  CHECK(verify.exit_code == 18);
  CHECK_MESSAGE(contains(verify.output, "DATA_LOSS"), verify.output);
  CHECK_MESSAGE(contains(verify.output, "data.mdb"), verify.output);
}

TEST_CASE("journal damage: a data.mdb truncated to 0 bytes is not taken for a new journal: weightd refuses to start with DATA_LOSS naming the file and removes no tier file") {
  damaged_store s;
  std::filesystem::resize_file(s.data_mdb, 0);
  auto e = run_weightd_to_exit(s.flags(), s.log);
  CHECK_FALSE_MESSAGE(e.timed_out, s.daemon_log());
  CHECK(e.exited);
  CHECK(e.exit_code != 0);
  CHECK_MESSAGE(names_truncation(s.daemon_log(), s.data_mdb), s.daemon_log());
  CHECK(count_files(s.hot) == 6);
}

TEST_CASE("journal damage: journal verify of a data.mdb truncated to 0 bytes is DATA_LOSS naming the file") {
  damaged_store s;
  std::filesystem::resize_file(s.data_mdb, 0);
  auto verify = offline_ctl(s.journal, "journal verify");
  CHECK(verify.exit_code == 18);
  CHECK_MESSAGE(contains(verify.output, "DATA_LOSS"), verify.output);
  CHECK_MESSAGE(contains(verify.output, "data.mdb"), verify.output);
}

// ------------------------------------------------------------ lock.mdb, modes

TEST_CASE("journal damage: a missing lock.mdb is no damage: weightd starts with the whole state and journal verify is clean") {
  damaged_store s;
  std::filesystem::remove(s.journal / "lock.mdb");
  auto verify = offline_ctl(s.journal, "journal verify");
  CHECK_MESSAGE(verify.exit_code == 0, verify.output);
  CHECK(contains(verify.output, "7 events folded"));
  std::filesystem::remove(s.journal / "lock.mdb");
  fault_daemon d(s.flags(), s.log);
  REQUIRE_MESSAGE(d.serving(), d.log());
  auto ls = d.ctl("obj ls k/").output;
  for (int i = 1; i <= 6; ++i) CHECK_MESSAGE(contains(ls, "k/" + std::to_string(i) + " "), ls);
  CHECK(contains(d.ctl("status").output, "objects      6"));
  CHECK(d.stop().exit_code == 0);
  CHECK(count_files(s.hot) == 6);
}

TEST_CASE("journal damage: an unreadable data.mdb is a clear error naming the journal, from weightd and journal verify, without a signal") {
  if (geteuid() == 0) {
    MESSAGE("skipped: root reads a file whatever its mode (chmod 000 shows nothing as root)");
    return;
  }
  damaged_store s;
  std::filesystem::permissions(s.data_mdb, std::filesystem::perms::none);
  auto e = run_weightd_to_exit(s.flags(), s.log);
  CHECK_FALSE(e.timed_out);
  CHECK(e.exited);
  CHECK(e.exit_code != 0);
  CHECK_MESSAGE(contains(s.daemon_log(), s.journal.string()), s.daemon_log());
  auto verify = offline_ctl(s.journal, "journal verify");
  CHECK(verify.exit_code > 1);
  CHECK_MESSAGE(contains(verify.output, s.journal.string()), verify.output);
  std::filesystem::permissions(s.data_mdb, std::filesystem::perms::owner_read |
                                               std::filesystem::perms::owner_write);
  CHECK(count_files(s.hot) == 6);
}

// ------------------------------------------------------------------ snapshots

TEST_CASE("journal damage: a damaged newest snapshot is skipped: weightd starts with the whole state from an older snapshot and the events") {
  damaged_store s(/*snapshot_every=*/3, /*objects=*/12);
  auto newest = s.newest_snapshot_key();
  s.flip_record_body("snapshots", newest);
  fault_daemon d(s.flags(3), s.log);
  REQUIRE_MESSAGE(d.serving(), d.log());
  auto ls = d.ctl("obj ls k/").output;
  for (int i = 1; i <= 12; ++i) CHECK_MESSAGE(contains(ls, "k/" + std::to_string(i) + " "), ls);
  CHECK(contains(d.ctl("status").output, "objects      12"));
  auto file = s.dir.path() / "payload";
  REQUIRE(d.ctl("obj put k/13 " + file.string()).exit_code == 0);
  CHECK(d.stop().exit_code == 0);
  CHECK(count_files(s.hot) == 13);
}

TEST_CASE("journal damage: a damaged newest snapshot is skipped with a warning naming its seq") {
  damaged_store s(/*snapshot_every=*/3, /*objects=*/12);
  auto newest = s.newest_snapshot_key();
  auto seq = persistence::read_be64(std::string_view(newest).substr(16));
  s.flip_record_body("snapshots", newest);
  fault_daemon d(s.flags(3), s.log);
  REQUIRE_MESSAGE(d.serving(), d.log());
  auto log = d.log();
  CHECK_MESSAGE(contains(log, "warn"), log);
  CHECK_MESSAGE(contains(log, "snapshot at seq " + std::to_string(seq)), log);
}

TEST_CASE("journal damage: journal verify reports a damaged snapshot as DATA_LOSS naming its seq") {
  damaged_store s(/*snapshot_every=*/3, /*objects=*/12);
  auto newest = s.newest_snapshot_key();
  auto seq = persistence::read_be64(std::string_view(newest).substr(16));
  s.flip_record_body("snapshots", newest);
  auto verify = offline_ctl(s.journal, "journal verify");
  CHECK(verify.exit_code == 18);
  CHECK_MESSAGE(contains(verify.output, "DATA_LOSS"), verify.output);
  CHECK_MESSAGE(contains(verify.output, "snapshot at seq " + std::to_string(seq)), verify.output);
}
