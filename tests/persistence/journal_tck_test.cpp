// The Akka persistence JournalSpec, ported as behaviour specs (stack notes
// §2.4) and run against every journal backend. Before each case the stream
// `pid` holds events 1..5, the last two written as one atomic batch; another
// stream's events are interleaved so stream and global seqs differ.
#include <doctest/doctest.h>

#include "support.hpp"

using namespace weightd;
using namespace weightd::test;
using persistence::kMaxSeq;
using persistence::seq_range;

namespace {

const std::string pid = "revision|default/tck@main#1";
const std::string other = "revision|default/other@main#1";

template <class Backend>
struct journal_spec {
  Backend store;
  persistence::journal_backend& j = store.backend();

  journal_spec() {
    for (int i = 1; i <= 3; ++i) {
      std::vector<events::v1::Envelope> one{make_event(pid, "p" + std::to_string(i))};
      REQUIRE(j.append(one).ok());
      std::vector<events::v1::Envelope> noise{make_event(other, "o" + std::to_string(i))};
      REQUIRE(j.append(noise).ok());
    }
    std::vector<events::v1::Envelope> atomic{make_event(pid, "p4"), make_event(pid, "p5")};
    REQUIRE(j.append(atomic).ok());
  }
  std::vector<uint64_t> replay(seq_range range) { return stream_seqs(j, pid, range); }
  uint64_t highest() { return *j.highest_stream_seq(pid); }
};

using seqs = std::vector<uint64_t>;

}  // namespace

#define JOURNAL_SPEC(name) \
  TEST_CASE_TEMPLATE("journal spec: " name, B, lmdb_backend, memory_backend)

JOURNAL_SPEC("1. replay all messages") {
  journal_spec<B> s;
  CHECK(s.replay({}) == seqs{1, 2, 3, 4, 5});
  CHECK(s.highest() == 5);
}

JOURNAL_SPEC("2. replay messages using a lower sequence number bound") {
  journal_spec<B> s;
  CHECK(s.replay({3, kMaxSeq, kMaxSeq}) == seqs{3, 4, 5});
}

JOURNAL_SPEC("3. replay messages using an upper sequence number bound") {
  journal_spec<B> s;
  CHECK(s.replay({1, 3, kMaxSeq}) == seqs{1, 2, 3});
  CHECK(s.highest() == 5);
}

JOURNAL_SPEC("4. replay messages using a count limit") {
  journal_spec<B> s;
  CHECK(s.replay({1, kMaxSeq, 3}) == seqs{1, 2, 3});
}

JOURNAL_SPEC("5. replay messages using a lower and upper sequence number bound") {
  journal_spec<B> s;
  CHECK(s.replay({2, 3, kMaxSeq}) == seqs{2, 3});
}

JOURNAL_SPEC("6. replay messages using lower and upper bounds and a count limit") {
  journal_spec<B> s;
  CHECK(s.replay({2, 5, 2}) == seqs{2, 3});
}

JOURNAL_SPEC("7. replay a single message when lower and upper bound are equal") {
  journal_spec<B> s;
  CHECK(s.replay({2, 2, kMaxSeq}) == seqs{2});
}

JOURNAL_SPEC("8. replay a single message using a count limit of one") {
  journal_spec<B> s;
  CHECK(s.replay({2, 4, 1}) == seqs{2});
}

JOURNAL_SPEC("9. not replay messages if the count limit is zero") {
  journal_spec<B> s;
  CHECK(s.replay({1, kMaxSeq, 0}).empty());
  CHECK(s.highest() == 5);
}

JOURNAL_SPEC("10. not replay messages if the lower bound is above the upper bound") {
  journal_spec<B> s;
  CHECK(s.replay({3, 2, kMaxSeq}).empty());
  CHECK(s.highest() == 5);
}

JOURNAL_SPEC("11. not replay messages of a stream never written") {
  journal_spec<B> s;
  CHECK(stream_seqs(s.j, "revision|default/never@main#1").empty());
  CHECK(*s.j.highest_stream_seq("revision|default/never@main#1") == 0);
}

JOURNAL_SPEC("12. not replay permanently deleted messages") {
  journal_spec<B> s;
  REQUIRE(s.j.delete_stream_to(pid, 3).ok());
  CHECK(s.replay({}) == seqs{4, 5});
  CHECK(stream_seqs(s.j, other) == seqs{1, 2, 3});  // other streams untouched
}

JOURNAL_SPEC("13. not reset the highest sequence number after message deletion") {
  journal_spec<B> s;
  REQUIRE(s.j.delete_stream_to(pid, 3).ok());
  CHECK(s.replay({}) == seqs{4, 5});
  CHECK(s.highest() == 5);
}

JOURNAL_SPEC("14. not reset the highest sequence number after journal cleanup") {
  journal_spec<B> s;
  REQUIRE(s.j.delete_stream_to(pid, kMaxSeq).ok());
  CHECK(s.replay({}).empty());
  CHECK(s.highest() == 5);
  // Appending continues after the old highest: numbers are never reused.
  std::vector<events::v1::Envelope> next{make_event(pid, "p6")};
  REQUIRE(s.j.append(next).ok());
  CHECK(next[0].stream_seq() == 6);
  CHECK(s.replay({}) == seqs{6});
}

// --- beyond the TCK: what weightd's journal adds --------------------------

JOURNAL_SPEC("global seqs are gap-free from 1 and stream seqs count per stream") {
  journal_spec<B> s;
  auto all = read_all(s.j);
  REQUIRE(all.size() == 8);
  for (size_t i = 0; i < all.size(); ++i) CHECK(all[i].global_seq() == i + 1);
  CHECK(*s.j.highest_seq() == 8);
  std::vector<std::string> tags;
  for (const auto& e : all) tags.push_back(tag_of(e));
  CHECK(tags == std::vector<std::string>{"p1", "o1", "p2", "o2", "p3", "o3", "p4", "p5"});
  CHECK(all[7].stream_seq() == 5);
  CHECK(all[5].stream_seq() == 3);
}

JOURNAL_SPEC("the journal stamps writer id and schema version") {
  journal_spec<B> s;
  for (const auto& e : read_all(s.j)) {
    CHECK(e.writer_id() == s.j.writer_id());
    CHECK(e.schema_version() == 1);
  }
}

JOURNAL_SPEC("read by global seq range honours bounds and limits") {
  journal_spec<B> s;
  CHECK(read_all(s.j, {3, 5, kMaxSeq}).size() == 3);
  CHECK(read_all(s.j, {7, kMaxSeq, kMaxSeq}).size() == 2);
  CHECK(read_all(s.j, {1, kMaxSeq, 2}).size() == 2);
  CHECK(read_all(s.j, {9, kMaxSeq, kMaxSeq}).empty());
  CHECK(read_all(s.j, {1, kMaxSeq, 0}).empty());
}

JOURNAL_SPEC("a rejected batch stores nothing and the journal stays usable") {
  journal_spec<B> s;
  std::vector<events::v1::Envelope> bad{make_event(pid, "p6"), events::v1::Envelope{}};
  bad[1].set_stream(pid);  // no payload: invalid
  auto st = s.j.append(bad);
  CHECK(st.code() == errc::invalid_argument);
  CHECK(st.message().find("event 1 of the batch has no payload") != std::string::npos);
  CHECK(*s.j.highest_seq() == 8);
  CHECK(s.highest() == 5);
  std::vector<events::v1::Envelope> good{make_event(pid, "p6")};
  REQUIRE(s.j.append(good).ok());
  CHECK(good[0].global_seq() == 9);
  CHECK(s.replay({}) == seqs{1, 2, 3, 4, 5, 6});
}

JOURNAL_SPEC("an event without a stream is refused, naming the problem") {
  journal_spec<B> s;
  std::vector<events::v1::Envelope> bad{make_event("", "x")};
  auto st = s.j.append(bad);
  CHECK(st.code() == errc::invalid_argument);
  CHECK(st.message().find("no stream") != std::string::npos);
}

JOURNAL_SPEC("a visitor that returns false stops the read") {
  journal_spec<B> s;
  int seen = 0;
  REQUIRE(s.j.read({}, [&](const events::v1::Envelope&) { return ++seen < 3; }).ok());
  CHECK(seen == 3);
}

TEST_CASE("journal spec: the LMDB journal keeps everything across a reopen") {
  journal_spec<lmdb_backend> s;
  REQUIRE(s.j.delete_stream_to(pid, 2).ok());
  auto first_writer = s.j.writer_id();
  s.store.reopen();
  auto& j = s.store.backend();
  CHECK(j.writer_id() == first_writer + 1);  // a new incarnation
  CHECK(stream_seqs(j, pid) == seqs{3, 4, 5});
  CHECK(*j.highest_stream_seq(pid) == 5);
  CHECK(*j.highest_seq() == 8);
  std::vector<events::v1::Envelope> next{make_event(pid, "p6")};
  REQUIRE(j.append(next).ok());
  CHECK(next[0].global_seq() == 9);
  CHECK(next[0].stream_seq() == 6);
  CHECK(next[0].writer_id() == first_writer + 1);
}

JOURNAL_SPEC("read by type yields only that type, within bounds and limit") {
  B store;
  auto& j = store.backend();
  for (int i = 0; i < 6; ++i) {
    std::vector<events::v1::Envelope> one{make_event("system", "w" + std::to_string(i))};
    if (i % 2) {
      one[0].clear_payload();
      one[0].mutable_lease_released()->set_lease_id(static_cast<uint64_t>(i));
    }
    REQUIRE(j.append(one).ok());
  }
  auto ids = [&](seq_range range) {
    std::vector<uint64_t> out;
    REQUIRE(persistence::read_type(j, "lease_released", range, [&](const events::v1::Envelope& e) {
              out.push_back(e.lease_released().lease_id());
              return true;
            }).ok());
    return out;
  };
  CHECK(ids({}) == seqs{1, 3, 5});
  CHECK(ids({3, kMaxSeq, kMaxSeq}) == seqs{3, 5});
  CHECK(ids({1, kMaxSeq, 2}) == seqs{1, 3});
  CHECK(ids({1, kMaxSeq, 0}).empty());
}

// SPEC §11 Follow: a standby appends its leader's envelopes as they are.
JOURNAL_SPEC("a copied batch keeps the leader's seqs, writer and schema: the copy reads back byte for byte") {
  journal_spec<B> leader;
  B standby;
  auto& copy = standby.backend();
  auto events = read_all(leader.j);
  REQUIRE(events.size() == 8);
  std::vector<events::v1::Envelope> first(events.begin(), events.begin() + 3);
  std::vector<events::v1::Envelope> rest(events.begin() + 3, events.end());
  REQUIRE(copy.append_copied(first).ok());
  REQUIRE(copy.append_copied(rest).ok());
  auto copied = read_all(copy);
  REQUIRE(copied.size() == events.size());
  for (size_t i = 0; i < events.size(); ++i)
    CHECK(copied[i].SerializeAsString() == events[i].SerializeAsString());
  CHECK(*copy.highest_seq() == 8);
  CHECK(*copy.highest_stream_seq(pid) == 5);
  // The standby's own appends (after a promotion) go on from there.
  std::vector<events::v1::Envelope> own{make_event(pid, "p6")};
  REQUIRE(copy.append(own).ok());
  CHECK(own[0].global_seq() == 9);
  CHECK(own[0].stream_seq() == 6);
}

JOURNAL_SPEC("a copied batch that is not the next seqs is refused whole, naming them, and nothing is written") {
  journal_spec<B> leader;
  B standby;
  auto& copy = standby.backend();
  auto events = read_all(leader.j);
  std::vector<events::v1::Envelope> first{events[0], events[1]};
  REQUIRE(copy.append_copied(first).ok());
  // A gap: seq 4 where 3 is next (the batch's first envelope is fine).
  std::vector<events::v1::Envelope> gap{events[2], events[4]};
  auto refused = copy.append_copied(gap);
  CHECK(refused.code() == errc::invalid_argument);
  CHECK(mentions(refused, "not the next one here"));
  CHECK(*copy.highest_seq() == 2);
  // A stream seq that is not the stream's next: refused too.
  std::vector<events::v1::Envelope> skipped{events[2]};
  skipped[0].set_stream_seq(skipped[0].stream_seq() + 1);
  CHECK(copy.append_copied(skipped).code() == errc::invalid_argument);
  CHECK(*copy.highest_seq() == 2);
  CHECK(read_all(copy).size() == 2);
  // The right one still goes in.
  std::vector<events::v1::Envelope> next{events[2]};
  CHECK(copy.append_copied(next).ok());
  CHECK(*copy.highest_seq() == 3);
}

JOURNAL_SPEC("a journal stamps its highest epoch on new envelopes and refuses a lower one, copied or not, and a copy raises it only with its leadership_taken") {
  B store;
  auto& j = store.backend();
  std::vector<events::v1::Envelope> first{make_event("system", "a")};
  REQUIRE(j.append(first).ok());
  CHECK(first[0].epoch() == 0);
  CHECK(*j.highest_epoch() == 0);
  std::vector<events::v1::Envelope> taken{make_event("system", "b")};
  taken[0].set_epoch(2);  // a new leader's first event names its epoch
  REQUIRE(j.append(taken).ok());
  CHECK(*j.highest_epoch() == 2);
  std::vector<events::v1::Envelope> later{make_event("system", "c")};
  REQUIRE(j.append(later).ok());
  CHECK(later[0].epoch() == 2);  // stamped
  std::vector<events::v1::Envelope> former{make_event("system", "d")};
  former[0].set_epoch(1);
  auto refused = j.append(former);
  CHECK(refused.code() == errc::data_loss);
  CHECK(mentions(refused, "former leader"));
  auto copied = read_all(j).back();
  copied.set_global_seq(4);
  copied.set_stream_seq(4);
  copied.set_epoch(1);
  std::vector<events::v1::Envelope> batch{copied};
  CHECK(j.append_copied(batch).code() == errc::data_loss);
  // A copied event may raise the epoch only as its leadership_taken.
  batch[0].set_epoch(3);
  CHECK(j.append_copied(batch).code() == errc::invalid_argument);
  batch[0].clear_payload();
  batch[0].mutable_leadership_taken()->set_epoch(3);
  CHECK(j.append_copied(batch).ok());
  CHECK(*j.highest_epoch() == 3);
  std::vector<events::v1::Envelope> own{make_event("system", "e")};
  own[0].set_epoch(2);
  CHECK(j.append(own).code() == errc::data_loss);
  CHECK(*j.highest_seq() == 4);
  if constexpr (std::is_same_v<B, lmdb_backend>) {
    store.reopen();
    CHECK(*store.backend().highest_epoch() == 3);  // kept across a reopen
  }
}

JOURNAL_SPEC("truncate_after removes the tail past a seq, its stream entries and snapshots, and the journal then takes the next seqs again, at the kept epoch") {
  journal_spec<B> s;  // seqs 1..8: pid 1..5, other 1..3
  auto& j = s.j;
  REQUIRE(j.save_snapshot({"state", 4, 0, "at four"}).ok());
  REQUIRE(j.save_snapshot({"state", 7, 0, "at seven"}).ok());
  std::vector<events::v1::Envelope> taken{make_event("system", "t")};
  taken[0].set_epoch(1);  // seq 9, epoch 1: the tail a former leader wrote
  REQUIRE(j.append(taken).ok());
  REQUIRE(*j.highest_epoch() == 1);

  REQUIRE(j.truncate_after(5).ok());  // pid 1..3 and other 1..2 stay
  CHECK(*j.highest_seq() == 5);
  CHECK(*j.highest_epoch() == 0);
  CHECK(s.replay({}) == seqs{1, 2, 3});
  CHECK(*j.highest_stream_seq(pid) == 3);
  CHECK(*j.highest_stream_seq(other) == 2);
  CHECK(*j.highest_stream_seq("system") == 0);
  CHECK(read_all(j).size() == 5);
  auto snapshot = j.load_snapshot("state", {});
  REQUIRE(snapshot.ok());
  REQUIRE(*snapshot);
  CHECK((*snapshot)->seq == 4);  // the one past the cut is gone

  std::vector<events::v1::Envelope> next{make_event(pid, "p4 again")};
  REQUIRE(j.append(next).ok());
  CHECK(next[0].global_seq() == 6);
  CHECK(next[0].stream_seq() == 4);
  CHECK(next[0].epoch() == 0);
  CHECK(j.truncate_after(9).ok());  // past the end: nothing to do
  CHECK(*j.highest_seq() == 6);
  if constexpr (std::is_same_v<B, lmdb_backend>) {
    s.store.reopen();
    CHECK(*s.store.backend().highest_seq() == 6);
    CHECK(*s.store.backend().highest_epoch() == 0);
  }
}

JOURNAL_SPEC("leadership_above finds the first epoch change above an epoch in the system stream") {
  B store;
  auto& j = store.backend();
  auto taken = [&](uint64_t epoch, uint64_t previous) {
    events::v1::Envelope e;
    e.set_stream("system");
    e.set_epoch(epoch);
    e.mutable_leadership_taken()->set_epoch(epoch);
    e.mutable_leadership_taken()->set_last_seq_of_previous_epoch(previous);
    std::vector<events::v1::Envelope> batch{e};
    REQUIRE(j.append(batch).ok());
  };
  std::vector<events::v1::Envelope> first{make_event("system", "a")};
  REQUIRE(j.append(first).ok());
  CHECK_FALSE(*persistence::leadership_above(j, 0));
  taken(1, 1);
  taken(3, 2);
  CHECK((*persistence::leadership_above(j, 0))->epoch() == 1);
  CHECK((*persistence::leadership_above(j, 1))->epoch() == 3);
  CHECK((*persistence::leadership_above(j, 2))->last_seq_of_previous_epoch() == 2);
  CHECK_FALSE(*persistence::leadership_above(j, 3));
}
