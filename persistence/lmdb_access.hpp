// Inside lmdb_journal (lmdb_journal.cpp, lmdb_snapshots.cpp): the small LMDB
// helpers and the journal's two transaction templates. A read adopts a map
// that another process grew; a write grows a full map and redoes the whole
// batch, and a failed commit poisons the journal (nothing is known about that
// batch until a restart). Nothing else includes this header.
#pragma once

#include <lmdb.h>

#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>

#include "persistence/lmdb_journal.hpp"
#include "persistence/record.hpp"

namespace weightd::persistence::lmdb_access {

inline MDB_val mdb_val(std::string_view s) { return MDB_val{s.size(), const_cast<char*>(s.data())}; }
inline std::string_view view(const MDB_val& v) {
  return {static_cast<const char*>(v.mv_data), v.mv_size};
}
inline std::string lmdb_message(int rc) { return mdb_strerror(rc); }

/// Closes a cursor when it leaves scope (read-only cursors need it explicitly).
struct cursor_guard {
  MDB_cursor* cursor = nullptr;
  ~cursor_guard() {
    if (cursor) mdb_cursor_close(cursor);
  }
};

inline int put(MDB_txn* txn, MDB_dbi dbi, std::string_view key, std::string_view value,
        unsigned flags = 0) {
  MDB_val k = mdb_val(key), v = mdb_val(value);
  return mdb_put(txn, dbi, &k, &v, flags);
}

inline int get_u64(MDB_txn* txn, MDB_dbi dbi, std::string_view key, uint64_t& out) {
  MDB_val k = mdb_val(key), v;
  int rc = mdb_get(txn, dbi, &k, &v);
  if (rc == 0) {
    if (v.mv_size != 8) return MDB_CORRUPTED;
    out = read_be64(view(v));
  }
  return rc;
}

inline status read_error(int rc) {
  return {errc::internal, "cannot read the journal: " + lmdb_message(rc) +
                              "; check the journal directory's permissions and disk"};
}

}  // namespace weightd::persistence::lmdb_access

namespace weightd::persistence {

template <class Fn>
status lmdb_journal::with_read_txn(Fn&& fn) const {
  std::shared_lock lock(map_mutex_);
  MDB_txn* txn = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn);
  // Another process grew the map: adopt its size (it may grow again meanwhile).
  for (int tries = 0; rc == MDB_MAP_RESIZED && tries < 100; ++tries) {
    lock.unlock();
    {
      std::unique_lock exclusive(map_mutex_);
      mdb_env_set_mapsize(env_, 0);
    }
    lock.lock();
    rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn);
  }
  if (rc) return lmdb_access::read_error(rc);
  status st = fn(txn);
  mdb_txn_abort(txn);
  return st;
}

template <class Fn>
status lmdb_journal::with_write_txn(const char* what, Fn&& fn) {
  std::lock_guard writer(write_mutex_);
  if (options_.read_only)
    return {errc::internal, std::string{"the journal is open read-only; cannot "} + what};
  if (!poisoned_.empty())
    return {errc::durability_failed,
            "the journal refuses writes since a commit failed (" + poisoned_ +
                "); restart weightd, then re-read before retrying"};
  for (;;) {
    int rc = 0;
    bool committing = false;
    {
      std::shared_lock lock(map_mutex_);
      MDB_txn* txn = nullptr;
      rc = mdb_txn_begin(env_, nullptr, 0, &txn);
      if (rc == 0) {
        rc = fn(txn);
        if (rc == 0) {
          committing = true;
          rc = mdb_txn_commit(txn);  // writes and, in sync mode, fsyncs
        } else {
          mdb_txn_abort(txn);
        }
      }
    }
    if (rc == 0) return {};
    if (rc == MDB_MAP_FULL) {  // nothing was written: grow and redo the whole batch
      if (auto st = grow_map(); !st.ok()) return st;
      continue;
    }
    if (committing) {
      poisoned_ = std::string{what} + ": " + lmdb_access::lmdb_message(rc);
      return {errc::durability_failed,
              "journal commit failed (" + poisoned_ +
                  "); whether this batch reached the disk is known only after a restart: "
                  "restart weightd and re-read before retrying"};
    }
    return {errc::durability_failed, std::string{"journal write failed ("} + what + ": " +
                                         lmdb_access::lmdb_message(rc) + "); nothing was written"};
  }
}

}  // namespace weightd::persistence
