// The journal writer: group commit, answers only after the commit, failures
// reach exactly the appenders they concern.
#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include "actor_fixture.hpp"
#include "actors/journal_writer.hpp"
#include "persistence/faulty_journal.hpp"
#include "support.hpp"

using namespace weightd;
using namespace weightd::test;
using actors::append_atom;
using actors::event_batch;
using actors::journal_stats;
using actors::stats_atom;

namespace {

struct writer_fixture : actor_fixture {
  std::shared_ptr<persistence::memory_journal> memory =
      std::make_shared<persistence::memory_journal>();
  std::shared_ptr<persistence::faulty_journal> faulty =
      std::make_shared<persistence::faulty_journal>(memory);
  actors::journal_actor writer = actors::spawn_journal_writer(sys, faulty, on_test_scheduler());

  static actors::journal_writer_options on_test_scheduler() {
    actors::journal_writer_options o;
    o.detached = false;
    return o;
  }

  ~writer_fixture() { caf::anon_send_exit(writer, caf::exit_reason::user_shutdown); }

  event_batch batch(const std::string& stream, size_t n, const std::string& tag = "e") {
    event_batch b;
    for (size_t i = 0; i < n; ++i) b.events.push_back(make_event(stream, tag));
    return b;
  }
  journal_stats stats() { return *ask<journal_stats>(writer, stats_atom::value); }
};

}  // namespace

TEST_CASE_FIXTURE(writer_fixture, "an append is answered with the committed events") {
  auto done = ask<event_batch>(writer, append_atom::value, batch("system", 3));
  REQUIRE(done.ok());
  REQUIRE(done->events.size() == 3);
  CHECK(done->events[0].global_seq() == 1);
  CHECK(done->events[2].global_seq() == 3);
  CHECK(done->events[2].stream_seq() == 3);
  CHECK(done->events[0].writer_id() == memory->writer_id());
  CHECK(read_all(*memory).size() == 3);  // on the journal before the answer
}

TEST_CASE_FIXTURE(writer_fixture, "appends queued while a commit runs share the next commit") {
  // 64 appenders send before the writer runs: they all sit in its mailbox.
  std::vector<std::unique_ptr<caf::scoped_actor>> clients;
  for (int i = 0; i < 64; ++i) clients.push_back(std::make_unique<caf::scoped_actor>(sys, true));
  std::vector<std::function<void()>> receivers;
  std::vector<uint64_t> seqs(64, 0);
  for (int i = 0; i < 64; ++i) {
    auto rh = (*clients[i])->request(writer, caf::infinite, append_atom::value,
                                  batch("revision|r" + std::to_string(i), 1));
    receivers.push_back([&, i, rh]() mutable {
      rh.receive([&](event_batch& b) { seqs[i] = b.events[0].global_seq(); },
                 [&](caf::error& err) { FAIL(caf::to_string(err)); });
    });
  }
  sched.run();
  for (auto& r : receivers) r();
  auto s = stats();
  CHECK(s.commits == 1);
  CHECK(s.recent_batch_sizes == std::vector<uint64_t>{64});
  CHECK(s.events == 64);
  std::sort(seqs.begin(), seqs.end());
  for (int i = 0; i < 64; ++i) CHECK(seqs[i] == static_cast<uint64_t>(i + 1));
}

TEST_CASE_FIXTURE(writer_fixture, "appends arriving one after another commit one by one") {
  for (int i = 0; i < 3; ++i) REQUIRE(ask<event_batch>(writer, append_atom::value, batch("system", 2)).ok());
  auto s = stats();
  CHECK(s.commits == 3);
  CHECK(s.recent_batch_sizes == std::vector<uint64_t>{1, 1, 1});
  CHECK(s.highest_seq == 6);
}

TEST_CASE_FIXTURE(writer_fixture, "a durability failure reaches every appender of that commit") {
  faulty->inject(persistence::fault::fail_write);
  caf::scoped_actor a{sys, true}, b{sys, true};
  auto ra = a->request(writer, caf::infinite, append_atom::value, batch("system", 1));
  auto rb = b->request(writer, caf::infinite, append_atom::value, batch("system", 1));
  sched.run();
  int failures = 0;
  for (auto* rh : {&ra, &rb})
    rh->receive([&](event_batch&) { FAIL("must not succeed"); },
                [&](caf::error& err) {
                  CHECK(actors::to_status(err).code() == errc::durability_failed);
                  ++failures;
                });
  CHECK(failures == 2);
  CHECK(read_all(*memory).empty());
  CHECK(stats().failed_appends == 2);
  REQUIRE(ask<event_batch>(writer, append_atom::value, batch("system", 1)).ok());
}

TEST_CASE_FIXTURE(writer_fixture, "a rejected batch fails only its own appender") {
  caf::scoped_actor a{sys, true}, b{sys, true}, c{sys, true};
  auto bad = batch("system", 1);
  bad.events[0].clear_payload();
  auto ra = a->request(writer, caf::infinite, append_atom::value, batch("system", 1, "a"));
  auto rb = b->request(writer, caf::infinite, append_atom::value, bad);
  auto rc = c->request(writer, caf::infinite, append_atom::value, batch("system", 1, "c"));
  sched.run();
  std::vector<std::string> committed;
  auto ok = [&](event_batch& done) { committed.push_back(tag_of(done.events[0])); };
  ra.receive(ok, [&](caf::error& err) { FAIL(caf::to_string(err)); });
  rb.receive([&](event_batch&) { FAIL("must be rejected"); },
             [&](caf::error& err) {
               auto st = actors::to_status(err);
               CHECK(st.code() == errc::invalid_argument);
               CHECK(st.message().find("no payload") != std::string::npos);
             });
  rc.receive(ok, [&](caf::error& err) { FAIL(caf::to_string(err)); });
  CHECK(committed == std::vector<std::string>{"a", "c"});
  CHECK(read_all(*memory).size() == 2);
}

TEST_CASE("journal writer, detached on LMDB with fsync: concurrent appends coalesce") {
  temp_dir dir;
  persistence::lmdb_options o;
  o.dir = dir.path();
  auto opened = persistence::lmdb_journal::open(o);
  REQUIRE(opened.ok());
  std::shared_ptr<persistence::journal_backend> journal = std::move(*opened);
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", size_t{2});
  actors::add_error_category(cfg);
  caf::actor_system sys{cfg};
  auto writer = actors::spawn_journal_writer(sys, journal);
  constexpr int appenders = 16, each = 25;
  std::atomic<int> acknowledged{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < appenders; ++t)
    threads.emplace_back([&, t] {
      caf::scoped_actor self{sys};
      for (int i = 0; i < each; ++i) {
        event_batch b;
        b.events.push_back(make_event("revision|t" + std::to_string(t)));
        self->request(writer, std::chrono::seconds(30), append_atom::value, b)
            .receive([&](event_batch&) { ++acknowledged; }, [&](caf::error&) {});
      }
    });
  for (auto& t : threads) t.join();
  CHECK(acknowledged == appenders * each);
  CHECK(*journal->highest_seq() == appenders * each);
  caf::scoped_actor self{sys};
  journal_stats s;
  self->request(writer, std::chrono::seconds(5), stats_atom::value)
      .receive([&](journal_stats& x) { s = x; }, [&](caf::error&) {});
  CHECK(s.appends == appenders * each);
  CHECK(s.commits < s.appends);  // some appends shared a commit (one fsync)
  MESSAGE("400 appends from 16 threads took " << s.commits << " commits");
  self->send_exit(writer, caf::exit_reason::user_shutdown);
}
