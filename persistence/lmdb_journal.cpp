#include "persistence/lmdb_journal.hpp"

#include <unistd.h>

#include <lmdb.h>
#include <sys/mman.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <system_error>
#include <vector>

#include "persistence/event_codec.hpp"
#include "persistence/lmdb_access.hpp"
#include "persistence/record.hpp"

namespace weightd::persistence {

namespace {

using namespace lmdb_access;

constexpr std::string_view kFormat = "weightd-journal/1";

/// stream_meta value: be64(stream_id) ‖ be64(deleted_to) ‖ name. Written only
/// when a stream is created or truncated, so appending to a stream dirties no
/// page of this database.
struct stream_meta {
  uint64_t id = 0;
  uint64_t deleted_to = 0;
  std::string name;
  std::string encode() const { return be64(id) + be64(deleted_to) + name; }
  bool decode(std::string_view bytes) {
    if (bytes.size() < 16) return false;
    id = read_be64(bytes);
    deleted_to = read_be64(bytes.substr(8));
    name.assign(bytes.substr(16));
    return true;
  }
};

int get_stream_meta(MDB_txn* txn, MDB_dbi dbi, const std::string& hash, stream_meta& out) {
  MDB_val k = mdb_val(hash), v;
  int rc = mdb_get(txn, dbi, &k, &v);
  if (rc == 0 && !out.decode(view(v))) return MDB_CORRUPTED;
  return rc;
}

/// The highest stream_seq in the `streams` index for stream `id` (0 if none).
int last_indexed_seq(MDB_txn* txn, MDB_dbi streams, uint64_t id, uint64_t& out) {
  out = 0;
  MDB_cursor* c = nullptr;
  if (int rc = mdb_cursor_open(txn, streams, &c)) return rc;
  auto after = be64(id + 1);  // first key past this stream's range
  MDB_val k = mdb_val(after), v;
  int rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
  rc = rc == MDB_NOTFOUND ? mdb_cursor_get(c, &k, &v, MDB_LAST)
                          : (rc == 0 ? mdb_cursor_get(c, &k, &v, MDB_PREV) : rc);
  if (rc == 0 && k.mv_size == 16 && read_be64(view(k)) == id) out = read_be64(view(k).substr(8));
  mdb_cursor_close(c);
  return rc == MDB_NOTFOUND ? 0 : rc;
}

/// The highest stream_seq ever assigned: deletion never lowers it.
int highest_of(MDB_txn* txn, MDB_dbi streams, const stream_meta& meta, uint64_t& out) {
  int rc = last_indexed_seq(txn, streams, meta.id, out);
  out = std::max(out, meta.deleted_to);
  return rc;
}

}  // namespace


// ------------------------------------------------------------------- open

result<std::unique_ptr<lmdb_journal>> lmdb_journal::open(const lmdb_options& options) {
  std::error_code ec;
  if (options.read_only) {
    if (!std::filesystem::exists(options.dir / "data.mdb", ec))
      return status{errc::not_found, "no journal in " + options.dir.string() +
                                         " (no data.mdb); pass the daemon's --data-dir"};
  } else {
    std::filesystem::create_directories(options.dir, ec);
    if (ec)
      return status{errc::durability_failed, "cannot create the journal directory " +
                                                 options.dir.string() + ": " + ec.message()};
  }
  std::unique_ptr<lmdb_journal> journal{new lmdb_journal(options)};
  if (auto st = journal->init(); !st.ok()) return st;
  return journal;
}

status lmdb_journal::init() {
  std::error_code ec;
  auto fail = [&](const std::string& what, int rc) {
    return status{errc::durability_failed, "cannot open the journal in " +
                                               options_.dir.string() + ": " + what + ": " +
                                               lmdb_message(rc)};
  };
  // A data.mdb without its two meta pages is no journal LMDB can read, and
  // an empty one LMDB would silently start afresh over: every acknowledged
  // change gone, every tier file an orphan. Refuse both, naming the file.
  auto file = options_.dir / "data.mdb";
  auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  if (std::filesystem::exists(file, ec)) {
    auto bytes = std::filesystem::file_size(file, ec);
    if (!ec && bytes < 2 * page)
      return {errc::data_loss,
              file.string() + " is truncated to " + std::to_string(bytes) +
                  " bytes, shorter than LMDB's two meta pages; restore the journal from a copy "
                  "(or, if this journal never held anything, remove the file)"};
  }
  if (int rc = mdb_env_create(&env_)) return fail("mdb_env_create", rc);
  if (int rc = mdb_env_set_maxdbs(env_, 8)) return fail("mdb_env_set_maxdbs", rc);
  if (int rc = mdb_env_set_mapsize(env_, options_.initial_map_bytes))
    return fail("mdb_env_set_mapsize", rc);
  unsigned flags = MDB_NOTLS;
  if (options_.read_only) flags |= MDB_RDONLY;
  if (options_.mode == durability::nosync) flags |= MDB_NOSYNC;
  if (int rc = mdb_env_open(env_, options_.dir.c_str(), flags, 0644)) {
    auto st = rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH
                  ? status{errc::data_loss, file.string() + " is not a journal LMDB can read (" +
                                                lmdb_message(rc) +
                                                "); restore the journal from a copy"}
                  : fail("mdb_env_open", rc);
    mdb_env_close(env_);
    env_ = nullptr;
    return st;
  }
  MDB_envinfo info;
  mdb_env_info(env_, &info);
  map_bytes_ = info.me_mapsize;  // larger than asked when the file already is
  // A data.mdb shorter than its pages (truncated by a full disk, a bad copy)
  // would be read through the map: SIGBUS, not an error. Compare first.
  MDB_stat env_stat;
  mdb_env_stat(env_, &env_stat);
  auto file_bytes = std::filesystem::file_size(file, ec);
  uint64_t page_end = (static_cast<uint64_t>(info.me_last_pgno) + 1) * env_stat.ms_psize;
  if (file_bytes < page_end) {
    mdb_env_close(env_);
    env_ = nullptr;
    return {errc::data_loss, file.string() + " is truncated: " + std::to_string(file_bytes) +
                                 " bytes, but its pages reach " + std::to_string(page_end) +
                                 "; restore the journal from a copy (nothing was read)"};
  }

  MDB_txn* txn = nullptr;
  if (int rc = mdb_txn_begin(env_, nullptr, options_.read_only ? MDB_RDONLY : 0, &txn))
    return fail("mdb_txn_begin", rc);
  unsigned create = options_.read_only ? 0 : MDB_CREATE;
  int rc = 0;
  for (auto [name, dbi] : {std::pair{"events", &events_}, std::pair{"streams", &streams_},
                           std::pair{"stream_meta", &stream_meta_},
                           std::pair{"snapshots", &snapshots_}, std::pair{"meta", &meta_}}) {
    MDB_dbi handle;
    if ((rc = mdb_dbi_open(txn, name, create, &handle))) break;
    *dbi = handle;
  }
  if (rc) {
    mdb_txn_abort(txn);
    return fail("opening the named databases (is this a weightd journal?)", rc);
  }
  MDB_val fk = mdb_val("format"), fv;
  rc = mdb_get(txn, meta_, &fk, &fv);
  if (rc == 0 && view(fv) != kFormat) {
    mdb_txn_abort(txn);
    return {errc::internal, "the journal in " + options_.dir.string() + " has format '" +
                                std::string(view(fv)) + "', this build reads '" +
                                std::string(kFormat) + "'"};
  }
  if (rc == MDB_NOTFOUND && !options_.read_only) rc = put(txn, meta_, "format", kFormat);
  uint64_t highest = 0, incarnation = 0, epoch = 0;
  if (rc == 0 || rc == MDB_NOTFOUND) {
    rc = get_u64(txn, meta_, "highest_seq", highest);
    if (rc == MDB_NOTFOUND) rc = 0;
  }
  if (rc == 0) {
    rc = get_u64(txn, meta_, "epoch", epoch);
    if (rc == MDB_NOTFOUND) rc = 0;
  }
  if (rc == 0) {
    rc = get_u64(txn, meta_, "incarnation", incarnation);
    if (rc == MDB_NOTFOUND) rc = 0;
  }
  if (rc == 0 && !options_.read_only) rc = put(txn, meta_, "incarnation", be64(++incarnation));
  if (rc) {
    mdb_txn_abort(txn);
    return fail("reading the journal's meta records", rc);
  }
  if ((rc = mdb_txn_commit(txn))) return fail("mdb_txn_commit", rc);
  if (!options_.read_only) {
    int dead = 0;
    mdb_reader_check(env_, &dead);  // clear reader slots of crashed processes
  }
  highest_ = highest;
  epoch_ = epoch;
  incarnation_ = incarnation;
  return {};
}

lmdb_journal::~lmdb_journal() {
  if (env_) mdb_env_close(env_);
}

status lmdb_journal::grow_map() {
  std::unique_lock exclusive(map_mutex_);  // no transaction of ours is open now
  if (map_bytes_ >= options_.max_map_bytes)
    return {errc::durability_failed,
            "the journal map is full at " + std::to_string(map_bytes_) +
                " bytes, its configured maximum; raise --journal-max-map-bytes or free disk"};
  uint64_t next = std::min(map_bytes_ * 2, options_.max_map_bytes);
  if (int rc = mdb_env_set_mapsize(env_, next))
    return {errc::durability_failed, "cannot grow the journal map to " +
                                         std::to_string(next) + " bytes: " + lmdb_message(rc)};
  map_bytes_ = next;
  ++map_growths_;
  return {};
}

// ----------------------------------------------------------------- events

status lmdb_journal::append_batch(std::vector<Envelope>& batch, numbering how) {
  if (auto st = validate_batch(batch); !st.ok()) return st;
  if (batch.empty()) return {};
  uint64_t last = 0, last_epoch = epoch_;
  status refused;  // a copied envelope that is not the next one: nothing is written
  auto st = with_write_txn("append", [&](MDB_txn* txn) -> int {
    uint64_t seq = highest_;
    uint64_t epoch = epoch_;
    uint64_t next_stream_id = 0;
    if (int rc = get_u64(txn, meta_, "next_stream_id", next_stream_id); rc && rc != MDB_NOTFOUND)
      return rc;
    bool created = false;
    struct stream_cursor {
      uint64_t id;
      uint64_t highest;
    };
    std::map<std::string, stream_cursor, std::less<>> touched;  // stream name -> where it is
    for (auto& e : batch) {
      auto it = touched.find(e.stream());
      if (it == touched.end()) {
        auto hash = stream_hash(e.stream());
        stream_meta meta;
        uint64_t highest = 0;
        int rc = get_stream_meta(txn, stream_meta_, hash, meta);
        if (rc == MDB_NOTFOUND) {  // a new stream: the next id, indexed at the tail
          meta.id = ++next_stream_id;
          meta.name = e.stream();
          if ((rc = put(txn, stream_meta_, hash, meta.encode()))) return rc;
          created = true;
        } else if (rc || (rc = highest_of(txn, streams_, meta, highest))) {
          return rc;
        }
        it = touched.emplace(e.stream(), stream_cursor{meta.id, highest}).first;
      }
      auto& cursor = it->second;
      refused = stamp_event(e, ++seq, ++cursor.highest, incarnation_, how, epoch);
      if (!refused.ok()) return EINVAL;
      if (int rc = put(txn, events_, be64(seq), encode_event(e), MDB_APPEND)) return rc;
      if (int rc = put(txn, streams_, be64(cursor.id) + be64(cursor.highest), be64(seq))) return rc;
    }
    if (created)
      if (int rc = put(txn, meta_, "next_stream_id", be64(next_stream_id))) return rc;
    if (int rc = put(txn, meta_, "highest_seq", be64(seq))) return rc;
    if (epoch != epoch_)
      if (int rc = put(txn, meta_, "epoch", be64(epoch))) return rc;
    last = seq;
    last_epoch = epoch;
    return 0;
  });
  if (!refused.ok()) return refused;
  if (st.ok()) {
    highest_ = last;
    epoch_ = last_epoch;
  }
  return st;
}

result<uint64_t> lmdb_journal::meta_u64(std::string_view key) const {
  uint64_t value = 0;  // absent = 0
  auto st = with_read_txn([&](MDB_txn* txn) -> status {
    int rc = get_u64(txn, meta_, key, value);
    return rc == 0 || rc == MDB_NOTFOUND ? status{} : read_error(rc);
  });
  if (!st.ok()) return st;
  return value;
}

result<uint64_t> lmdb_journal::highest_epoch() const { return meta_u64("epoch"); }

result<uint64_t> lmdb_journal::highest_seq() const { return meta_u64("highest_seq"); }

status lmdb_journal::read(seq_range range, const event_visitor& visit) const {
  if (range.max == 0 || range.from > range.to) return {};
  return with_read_txn([&](MDB_txn* txn) -> status {
    cursor_guard c;
    if (int rc = mdb_cursor_open(txn, events_, &c.cursor)) return read_error(rc);
    auto start = be64(range.from);
    MDB_val k = mdb_val(start), v;
    int rc = mdb_cursor_get(c.cursor, &k, &v, MDB_SET_RANGE);
    for (uint64_t count = 0; rc == 0 && count < range.max; ++count) {
      uint64_t seq = read_be64(view(k));
      if (seq > range.to) break;
      auto e = decode_event(seq, view(v));
      if (!e) return e.error();
      if (!visit(*e)) return {};
      rc = mdb_cursor_get(c.cursor, &k, &v, MDB_NEXT);
    }
    return rc == 0 || rc == MDB_NOTFOUND ? status{} : read_error(rc);
  });
}

result<uint64_t> lmdb_journal::highest_stream_seq(std::string_view stream) const {
  uint64_t highest = 0;
  auto st = with_read_txn([&](MDB_txn* txn) -> status {
    stream_meta meta;
    int rc = get_stream_meta(txn, stream_meta_, stream_hash(stream), meta);
    if (rc == 0) rc = highest_of(txn, streams_, meta, highest);
    return rc == 0 || rc == MDB_NOTFOUND ? status{} : read_error(rc);
  });
  if (!st.ok()) return st;
  return highest;
}

status lmdb_journal::read_stream(std::string_view stream, seq_range range,
                                 const event_visitor& visit) const {
  if (range.max == 0 || range.from > range.to) return {};
  return with_read_txn([&](MDB_txn* txn) -> status {
    stream_meta meta;
    int rc = get_stream_meta(txn, stream_meta_, stream_hash(stream), meta);
    if (rc == MDB_NOTFOUND) return {};
    if (rc) return read_error(rc);
    auto prefix = be64(meta.id);
    cursor_guard c;
    if ((rc = mdb_cursor_open(txn, streams_, &c.cursor))) return read_error(rc);
    auto start = prefix + be64(range.from);
    MDB_val k = mdb_val(start), v;
    rc = mdb_cursor_get(c.cursor, &k, &v, MDB_SET_RANGE);
    for (uint64_t count = 0; rc == 0 && count < range.max;) {
      auto key = view(k);
      if (key.size() != 16 || key.substr(0, 8) != prefix) break;
      if (read_be64(key.substr(8)) > range.to) break;
      uint64_t seq = read_be64(view(v));
      auto seq_key = be64(seq);
      MDB_val ek = mdb_val(seq_key), ev;
      if (int grc = mdb_get(txn, events_, &ek, &ev))
        return {errc::data_loss, "the stream index of '" + std::string(stream) +
                                     "' points at seq " + std::to_string(seq) +
                                     " which is missing (" + lmdb_message(grc) + ")"};
      auto e = decode_event(seq, view(ev));
      if (!e) return e.error();
      if (e->stream() == stream) {  // guards against a (theoretical) hash collision
        ++count;
        if (!visit(*e)) return {};
      }
      rc = mdb_cursor_get(c.cursor, &k, &v, MDB_NEXT);
    }
    return rc == 0 || rc == MDB_NOTFOUND ? status{} : read_error(rc);
  });
}

status lmdb_journal::truncate_after(uint64_t seq) {
  if (seq >= highest_) return {};
  uint64_t kept_epoch = 0;
  status damaged;  // an event of the tail that does not decode: nothing is removed
  auto st = with_write_txn("truncate", [&](MDB_txn* txn) -> int {
    // What goes: the tail's event keys and index keys, collected first (the
    // tail of a diverged former leader is short), then deleted by key.
    std::vector<std::string> event_keys, index_keys, snapshot_keys;
    {
      cursor_guard c;
      if (int rc = mdb_cursor_open(txn, events_, &c.cursor)) return rc;
      auto start = be64(seq + 1);
      MDB_val k = mdb_val(start), v;
      // The epoch kept: the newest remaining event's (epochs never decrease).
      int rc = mdb_cursor_get(c.cursor, &k, &v, MDB_SET_RANGE);
      if (rc && rc != MDB_NOTFOUND) return rc;
      rc = mdb_cursor_get(c.cursor, &k, &v, rc == MDB_NOTFOUND ? MDB_LAST : MDB_PREV);
      if (rc && rc != MDB_NOTFOUND) return rc;
      if (rc == 0 && read_be64(view(k)) <= seq) {
        auto e = decode_event(read_be64(view(k)), view(v));
        if (!e) {
          damaged = e.error();
          return EINVAL;
        }
        kept_epoch = e->epoch();
      } else if (seq > 0) {  // nothing kept to take the epoch from
        damaged = {errc::not_ready, "cannot truncate to seq " + std::to_string(seq) +
                                        ": the journal holds no event at or before it"};
        return EINVAL;
      }
      k = mdb_val(start);
      rc = mdb_cursor_get(c.cursor, &k, &v, MDB_SET_RANGE);
      for (; rc == 0; rc = mdb_cursor_get(c.cursor, &k, &v, MDB_NEXT)) {
        uint64_t at = read_be64(view(k));
        auto e = decode_event(at, view(v));
        if (!e) {
          damaged = e.error();
          return EINVAL;
        }
        stream_meta meta;
        if (int mrc = get_stream_meta(txn, stream_meta_, stream_hash(e->stream()), meta)) return mrc;
        event_keys.push_back(be64(at));
        index_keys.push_back(be64(meta.id) + be64(e->stream_seq()));
      }
      if (rc != MDB_NOTFOUND) return rc;
    }
    {
      cursor_guard c;
      if (int rc = mdb_cursor_open(txn, snapshots_, &c.cursor)) return rc;
      MDB_val k, v;
      int rc = mdb_cursor_get(c.cursor, &k, &v, MDB_FIRST);
      for (; rc == 0; rc = mdb_cursor_get(c.cursor, &k, &v, MDB_NEXT))
        if (k.mv_size >= 8 && read_be64(view(k).substr(k.mv_size - 8)) > seq)
          snapshot_keys.emplace_back(view(k));
      if (rc != MDB_NOTFOUND) return rc;
    }
    for (auto [dbi, keys] : {std::pair{events_, &event_keys}, std::pair{streams_, &index_keys},
                             std::pair{snapshots_, &snapshot_keys}})
      for (const auto& key : *keys) {
        MDB_val k = mdb_val(key);
        if (int rc = mdb_del(txn, dbi, &k, nullptr); rc && rc != MDB_NOTFOUND) return rc;
      }
    if (int rc = put(txn, meta_, "highest_seq", be64(seq))) return rc;
    return put(txn, meta_, "epoch", be64(kept_epoch));
  });
  if (!damaged.ok()) return damaged;
  if (st.ok()) {
    highest_ = seq;
    epoch_ = kept_epoch;
  }
  return st;
}

status lmdb_journal::delete_stream_to(std::string_view stream, uint64_t to_stream_seq) {
  auto hash = stream_hash(stream);
  return with_write_txn("delete events", [&](MDB_txn* txn) -> int {
    stream_meta meta;
    uint64_t highest = 0;
    int rc = get_stream_meta(txn, stream_meta_, hash, meta);
    if (rc == MDB_NOTFOUND) return 0;
    if (rc || (rc = highest_of(txn, streams_, meta, highest))) return rc;
    uint64_t to = std::min(to_stream_seq, highest);
    if (to <= meta.deleted_to) return 0;
    for (uint64_t s = meta.deleted_to + 1; s <= to; ++s) {
      auto key = be64(meta.id) + be64(s);
      MDB_val k = mdb_val(key), v;
      rc = mdb_get(txn, streams_, &k, &v);
      if (rc == MDB_NOTFOUND) continue;
      if (rc) return rc;
      auto seq_key = be64(read_be64(view(v)));
      MDB_val ek = mdb_val(seq_key);
      if ((rc = mdb_del(txn, events_, &ek, nullptr)) && rc != MDB_NOTFOUND) return rc;
      if ((rc = mdb_del(txn, streams_, &k, nullptr))) return rc;
    }
    meta.deleted_to = to;  // remembers the highest seq once the index is empty
    return put(txn, stream_meta_, hash, meta.encode());
  });
}

}  // namespace weightd::persistence
