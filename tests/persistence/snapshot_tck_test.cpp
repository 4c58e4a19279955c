// The Akka persistence SnapshotStoreSpec, ported as behaviour specs and run
// against every journal backend. Before each case `pid` has snapshots s-1..s-5
// at seqs 11..15, taken at times ts(11)..ts(15).
#include <doctest/doctest.h>

#include "support.hpp"

using namespace weightd;
using namespace weightd::test;
using persistence::snapshot_criteria;
using persistence::snapshot_record;

namespace {

const std::string pid = "system";
int64_t ts(uint64_t seq) { return 100000 + static_cast<int64_t>(seq) * 10; }

template <class Backend>
struct snapshot_spec {
  Backend store;
  persistence::journal_backend& j = store.backend();

  snapshot_spec() {
    for (uint64_t seq = 11; seq <= 15; ++seq)
      REQUIRE(j.save_snapshot({pid, seq, ts(seq), "s-" + std::to_string(seq - 10)}).ok());
  }
  std::optional<snapshot_record> load(const snapshot_criteria& c = {},
                                      const std::string& stream = pid) {
    auto r = j.load_snapshot(stream, c);
    REQUIRE(r.ok());
    return *r;
  }
  std::string data(const snapshot_criteria& c = {}) {
    auto s = load(c);
    return s ? s->data : "<none>";
  }
};

snapshot_criteria upto(uint64_t max_seq, int64_t max_ts = persistence::kMaxTime) {
  snapshot_criteria c;
  c.max_seq = max_seq;
  c.max_timestamp_ms = max_ts;
  return c;
}

}  // namespace

#define SNAPSHOT_SPEC(name) \
  TEST_CASE_TEMPLATE("snapshot spec: " name, B, lmdb_backend, memory_backend)

SNAPSHOT_SPEC("1. not load a snapshot given an invalid persistence id") {
  snapshot_spec<B> s;
  CHECK_FALSE(s.load({}, "revision|default/unknown@main#1"));
}

SNAPSHOT_SPEC("2. not load a snapshot given non-matching timestamp criteria") {
  snapshot_spec<B> s;
  CHECK_FALSE(s.load(upto(persistence::kMaxSeq, ts(11) - 1)));
}

SNAPSHOT_SPEC("3. not load a snapshot given non-matching sequence number criteria") {
  snapshot_spec<B> s;
  CHECK_FALSE(s.load(upto(7)));
  snapshot_criteria above;
  above.min_seq = 16;
  CHECK_FALSE(s.load(above));
}

SNAPSHOT_SPEC("4. load the most recent snapshot") {
  snapshot_spec<B> s;
  auto latest = s.load();
  REQUIRE(latest);
  CHECK(latest->data == "s-5");
  CHECK(latest->seq == 15);
  CHECK(latest->timestamp_ms == ts(15));
  CHECK(latest->stream == pid);
}

SNAPSHOT_SPEC("5. load the most recent snapshot matching an upper sequence number bound") {
  snapshot_spec<B> s;
  CHECK(s.data(upto(13)) == "s-3");
}

SNAPSHOT_SPEC("6. load the most recent snapshot matching upper sequence number and timestamp bounds") {
  snapshot_spec<B> s;
  CHECK(s.data(upto(13, ts(13))) == "s-3");
  CHECK(s.data(upto(15, ts(12))) == "s-2");
}

SNAPSHOT_SPEC("7. delete a single snapshot identified by its metadata") {
  snapshot_spec<B> s;
  REQUIRE(s.j.delete_snapshot(pid, 13).ok());
  CHECK(s.data(upto(13)) == "s-2");
  CHECK(s.data() == "s-5");
}

SNAPSHOT_SPEC("8. delete all snapshots matching upper sequence number and timestamp bounds") {
  snapshot_spec<B> s;
  REQUIRE(s.j.delete_snapshots(pid, upto(13, ts(13))).ok());
  CHECK_FALSE(s.load(upto(13)));
  CHECK(s.data(upto(14)) == "s-4");
}

SNAPSHOT_SPEC("9. not delete snapshots with non-matching upper timestamp bounds") {
  snapshot_spec<B> s;
  REQUIRE(s.j.delete_snapshots(pid, upto(13, ts(11) - 1)).ok());
  CHECK(s.data(upto(13)) == "s-3");
  CHECK(s.data(upto(11)) == "s-1");
}

SNAPSHOT_SPEC("10. save and overwrite a snapshot with the same sequence number") {
  snapshot_spec<B> s;
  REQUIRE(s.j.save_snapshot({pid, 15, ts(15) + 1, "s-5 again"}).ok());
  auto latest = s.load();
  REQUIRE(latest);
  CHECK(latest->data == "s-5 again");
  CHECK(latest->timestamp_ms == ts(15) + 1);
}

SNAPSHOT_SPEC("11. save a bigger snapshot (10 000 bytes)") {
  snapshot_spec<B> s;
  std::string big(10000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 31);
  REQUIRE(s.j.save_snapshot({pid, 16, ts(16), big}).ok());
  CHECK(s.data() == big);
}

SNAPSHOT_SPEC("snapshots of different streams do not see each other") {
  snapshot_spec<B> s;
  REQUIRE(s.j.save_snapshot({"revision|default/x@main#1", 3, 7, "x"}).ok());
  CHECK(s.data() == "s-5");
  auto x = s.load({}, "revision|default/x@main#1");
  REQUIRE(x);
  CHECK(x->data == "x");
  REQUIRE(s.j.delete_snapshots("revision|default/x@main#1", {}).ok());
  CHECK(s.data() == "s-5");
}

TEST_CASE("snapshot spec: a snapshot that fails its checksum is skipped by load and listed as damaged") {
  snapshot_spec<memory_backend> s;
  CHECK(s.j.damaged_snapshots(pid)->empty());
  s.store.journal.corrupt_snapshot_for_testing(pid, 15);
  s.store.journal.corrupt_snapshot_for_testing(pid, 13);
  CHECK(s.data() == "s-4");
  CHECK(s.data(upto(13)) == "s-2");
  auto damaged = s.j.damaged_snapshots(pid);
  REQUIRE(damaged.ok());
  CHECK(*damaged == std::vector<uint64_t>{13, 15});
  CHECK(s.j.damaged_snapshots("revision|default/x@main#1")->empty());
}
