// lmdb_journal's snapshots and statistics (FORMAT.md: the snapshots database).
#include <lmdb.h>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sys/mman.h>

#include <spdlog/spdlog.h>

#include "persistence/event_codec.hpp"
#include "persistence/lmdb_access.hpp"
#include "persistence/lmdb_journal.hpp"
#include "persistence/record.hpp"

namespace weightd::persistence {

using namespace lmdb_access;

// -------------------------------------------------------------- snapshots

status lmdb_journal::save_snapshot(const snapshot_record& s) {
  auto key = stream_hash(s.stream) + be64(s.seq);
  auto record = encode_record(key, encode_snapshot_body(s.stream, s.timestamp_ms, s.data));
  return with_write_txn("save snapshot",
                        [&](MDB_txn* txn) { return put(txn, snapshots_, key, record); });
}

namespace {
/// Decodes the snapshot under cursor key `key`; false when damaged.
bool decode_snapshot(std::string_view key, std::string_view value, snapshot_record& out) {
  auto body = decode_record(key, value);
  if (!body) return false;
  out.seq = read_be64(key.substr(16));
  return decode_snapshot_body(*body, out.stream, out.timestamp_ms, out.data);
}
}  // namespace

result<std::optional<snapshot_record>> lmdb_journal::load_snapshot(
    std::string_view stream, const snapshot_criteria& criteria) const {
  auto hash = stream_hash(stream);
  std::optional<snapshot_record> found;
  auto st = with_read_txn([&](MDB_txn* txn) -> status {
    cursor_guard c;
    if (int rc = mdb_cursor_open(txn, snapshots_, &c.cursor)) return read_error(rc);
    auto target = hash + be64(criteria.max_seq);
    MDB_val k = mdb_val(target), v;
    int rc = mdb_cursor_get(c.cursor, &k, &v, MDB_SET_RANGE);
    if (rc == MDB_NOTFOUND) rc = mdb_cursor_get(c.cursor, &k, &v, MDB_LAST);
    else if (rc == 0 && view(k) != target) rc = mdb_cursor_get(c.cursor, &k, &v, MDB_PREV);
    // Walk backwards from the newest candidate; skip damaged snapshots.
    for (; rc == 0; rc = mdb_cursor_get(c.cursor, &k, &v, MDB_PREV)) {
      auto key = view(k);
      if (key.size() != 24 || key.substr(0, 16) != hash) break;
      if (read_be64(key.substr(16)) < criteria.min_seq) break;
      snapshot_record s;
      if (!decode_snapshot(key, view(v), s) || s.stream != stream) {
        spdlog::warn("the {} snapshot at seq {} fails its checksum and is not used; an older "
                     "snapshot or the events rebuild the state",
                     stream, read_be64(key.substr(16)));
        continue;
      }
      if (criteria.matches(s)) {
        found = std::move(s);
        break;
      }
    }
    return rc == 0 || rc == MDB_NOTFOUND ? status{} : read_error(rc);
  });
  if (!st.ok()) return st;
  return found;
}

result<std::vector<uint64_t>> lmdb_journal::damaged_snapshots(std::string_view stream) const {
  auto hash = stream_hash(stream);
  std::vector<uint64_t> damaged;
  auto st = with_read_txn([&](MDB_txn* txn) -> status {
    cursor_guard c;
    if (int rc = mdb_cursor_open(txn, snapshots_, &c.cursor)) return read_error(rc);
    MDB_val k = mdb_val(hash), v;
    int rc = mdb_cursor_get(c.cursor, &k, &v, MDB_SET_RANGE);
    for (; rc == 0; rc = mdb_cursor_get(c.cursor, &k, &v, MDB_NEXT)) {
      auto key = view(k);
      if (key.size() != 24 || key.substr(0, 16) != hash) break;
      snapshot_record s;
      if (!decode_snapshot(key, view(v), s) || s.stream != stream)
        damaged.push_back(read_be64(key.substr(16)));
    }
    return rc == 0 || rc == MDB_NOTFOUND ? status{} : read_error(rc);
  });
  if (!st.ok()) return st;
  return damaged;
}

status lmdb_journal::delete_snapshot(std::string_view stream, uint64_t seq) {
  auto key = stream_hash(stream) + be64(seq);
  return with_write_txn("delete snapshot", [&](MDB_txn* txn) {
    MDB_val k = mdb_val(key);
    int rc = mdb_del(txn, snapshots_, &k, nullptr);
    return rc == MDB_NOTFOUND ? 0 : rc;
  });
}

status lmdb_journal::delete_snapshots(std::string_view stream,
                                      const snapshot_criteria& criteria) {
  auto hash = stream_hash(stream);
  return with_write_txn("delete snapshots", [&](MDB_txn* txn) -> int {
    std::vector<std::string> doomed;
    {
      cursor_guard c;
      if (int rc = mdb_cursor_open(txn, snapshots_, &c.cursor)) return rc;
      MDB_val k = mdb_val(hash), v;
      for (int rc = mdb_cursor_get(c.cursor, &k, &v, MDB_SET_RANGE); rc == 0;
           rc = mdb_cursor_get(c.cursor, &k, &v, MDB_NEXT)) {
        auto key = view(k);
        if (key.size() != 24 || key.substr(0, 16) != hash) break;
        snapshot_record s;
        if (decode_snapshot(key, view(v), s) && s.stream == stream && criteria.matches(s))
          doomed.emplace_back(key);
      }
    }
    for (const auto& key : doomed) {
      MDB_val k = mdb_val(key);
      if (int rc = mdb_del(txn, snapshots_, &k, nullptr)) return rc;
    }
    return 0;
  });
}

// ------------------------------------------------------------------ stats

result<lmdb_stats> lmdb_journal::stats() const {
  lmdb_stats out;
  auto st = with_read_txn([&](MDB_txn* txn) -> status {
    MDB_stat s;
    if (int rc = mdb_stat(txn, events_, &s)) return read_error(rc);
    out.event_count = s.ms_entries;
    if (int rc = mdb_stat(txn, stream_meta_, &s)) return read_error(rc);
    out.stream_count = s.ms_entries;
    if (int rc = mdb_stat(txn, snapshots_, &s)) return read_error(rc);
    out.snapshot_count = s.ms_entries;
    get_u64(txn, meta_, "highest_seq", out.highest_seq);
    get_u64(txn, meta_, "incarnation", out.incarnation);
    MDB_envinfo info;
    mdb_env_info(env_, &info);
    MDB_stat env_stat;
    mdb_env_stat(env_, &env_stat);
    out.map_bytes = info.me_mapsize;
    out.used_bytes = (info.me_last_pgno + 1) * env_stat.ms_psize;
    return {};
  });
  if (!st.ok()) return st;
  out.map_growths = map_growths_;
  return out;
}

void lmdb_journal::release_read_cache() const {
  // The map is read-only (no MDB_WRITEMAP): dropping its pages from this
  // process is safe, a later read faults them in again from the page cache.
  // LMDB does not tell where it mapped the file (me_mapaddr is only set for
  // MDB_FIXEDMAP), so the ranges come from /proc/self/maps.
  std::error_code ec;
  auto file = std::filesystem::canonical(options_.dir / "data.mdb", ec);
  if (ec) return;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.size() < file.native().size() ||
        line.compare(line.size() - file.native().size(), std::string::npos, file.native()) != 0)
      continue;
    uintptr_t from = 0, to = 0;
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR, &from, &to) != 2 || to <= from) continue;
    ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
  }
}

}  // namespace weightd::persistence
