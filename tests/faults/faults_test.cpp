// Every fault the decorator injects yields a clear error and never a partial
// batch, on top of either backend.
#include <doctest/doctest.h>

#include "persistence/faulty_journal.hpp"
#include "support.hpp"

using namespace weightd;
using namespace weightd::test;
using persistence::fault;
using persistence::faulty_journal;

namespace {

template <class Backend>
struct faulty {
  std::shared_ptr<Backend> store = std::make_shared<Backend>();
  faulty_journal j{std::shared_ptr<persistence::journal_backend>(store, &store->backend())};

  status append(size_t n, const std::string& tag = "e") {
    std::vector<events::v1::Envelope> batch;
    for (size_t i = 0; i < n; ++i) batch.push_back(make_event("system", tag));
    return j.append(batch);
  }
  uint64_t stored() { return read_all(j).size(); }
};

}  // namespace

#define FAULT_SPEC(name) TEST_CASE_TEMPLATE("fault: " name, B, lmdb_backend, memory_backend)

FAULT_SPEC("a failed write stores nothing, says so, and the journal goes on") {
  faulty<B> f;
  REQUIRE(f.append(3).ok());
  f.j.inject(fault::fail_write);
  auto st = f.append(4);
  CHECK(st.code() == errc::durability_failed);
  CHECK(st.message().find("nothing was written") != std::string::npos);
  CHECK(f.stored() == 3);
  REQUIRE(f.append(2).ok());
  CHECK(f.stored() == 5);
  CHECK(*f.j.highest_seq() == 5);  // no gap where the failed batch was
}

FAULT_SPEC("a rejected batch stores nothing and the journal goes on") {
  faulty<B> f;
  f.j.inject(fault::reject);
  auto st = f.append(4);
  CHECK(st.code() == errc::invalid_argument);
  CHECK(st.message().find("rejected") != std::string::npos);
  CHECK(f.stored() == 0);
  REQUIRE(f.append(1).ok());
  CHECK(f.stored() == 1);
}

FAULT_SPEC("a full map stores nothing and names the flag to raise") {
  faulty<B> f;
  f.j.inject(fault::map_full);
  auto st = f.append(4);
  CHECK(st.code() == errc::durability_failed);
  CHECK(st.message().find("--journal-max-map-bytes") != std::string::npos);
  CHECK(f.stored() == 0);
  REQUIRE(f.append(1).ok());
}

FAULT_SPEC("a failed fsync leaves the batch whole and refuses writes until restart") {
  faulty<B> f;
  REQUIRE(f.append(2).ok());
  f.j.inject(fault::fail_fsync);
  auto st = f.append(3);
  CHECK(st.code() == errc::durability_failed);
  CHECK(st.message().find("restart weightd") != std::string::npos);
  CHECK(f.stored() == 5);  // the whole batch reached the store: never a part of it
  auto refused = f.append(1);
  CHECK(refused.code() == errc::durability_failed);
  CHECK(refused.message().find("refuses writes") != std::string::npos);
  CHECK(f.stored() == 5);
  f.j.reset();  // as a restart would
  REQUIRE(f.append(1).ok());
  CHECK(f.stored() == 6);
}

FAULT_SPEC("a fault armed for the nth call waits for it") {
  faulty<B> f;
  f.j.inject(fault::fail_write, 3);
  CHECK(f.append(1).ok());
  CHECK(f.append(1).ok());
  CHECK(f.append(1).code() == errc::durability_failed);
  CHECK(f.append(1).ok());
  CHECK(f.j.faults_fired() == 1);
  CHECK(f.stored() == 3);
}

FAULT_SPEC("a failed read is an error, and the data is still there afterwards") {
  faulty<B> f;
  REQUIRE(f.append(3).ok());
  f.j.inject(fault::fail_read);
  auto st = f.j.read({}, [](const events::v1::Envelope&) { return true; });
  CHECK(st.code() == errc::internal);
  CHECK(st.message().find("cannot read") != std::string::npos);
  CHECK(f.stored() == 3);
}
