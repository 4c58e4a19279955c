// The one command queue (actors/command_queue.hpp): no actor needed, so it
// runs with the core's tests, without CAF.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "actors/command_queue.hpp"

using namespace weightd;
using namespace weightd::actors;

TEST_CASE("command queue: commands run one at a time, in arrival order") {
  command_queue<int> queue;
  std::vector<std::string> ran;
  std::function<void()> first_done;
  queue.push([&](std::function<void()> finished) {
    ran.push_back("first");
    first_done = finished;  // still running: waits for the journal
  });
  queue.push([&](std::function<void()> finished) {
    ran.push_back("second");
    finished();
  });
  CHECK(ran == std::vector<std::string>{"first"});
  CHECK(queue.busy());
  first_done();
  CHECK(ran == std::vector<std::string>{"first", "second"});
  CHECK_FALSE(queue.busy());
}

TEST_CASE("command queue: a command that finishes twice starts nothing twice") {
  command_queue<int> queue;
  int second = 0;
  std::function<void()> done;
  queue.push([&](std::function<void()> finished) { done = finished; });
  queue.push([&](std::function<void()> finished) {
    ++second;
    (void)finished;  // stays in flight
  });
  done();
  done();
  CHECK(second == 1);
}

TEST_CASE("command queue: many commands that finish at once run without deepening the stack") {
  command_queue<int> queue;
  int ran = 0;
  for (int i = 0; i < 200'000; ++i)
    queue.push([&](std::function<void()> finished) {
      ++ran;
      finished();
    });
  CHECK(ran == 200'000);
}

TEST_CASE("command queue: decision commands up to the next multi-step one go to the batch "
          "together") {
  std::vector<std::vector<int>> batches;
  std::function<void()> batch_done;
  command_queue<int> queue([&](auto next, auto finished) {
    std::vector<int> batch;
    while (auto d = next()) batch.push_back(*d);
    batches.push_back(batch);
    batch_done = finished;
  });
  bool multi_ran = false;
  queue.push_decision(1);  // starts a batch of one at once
  queue.push_decision(2);
  queue.push_decision(3);
  queue.push([&](std::function<void()> finished) {
    multi_ran = true;
    finished();
  });
  queue.push_decision(4);
  CHECK(batches == std::vector<std::vector<int>>{{1}});
  batch_done();  // 2 and 3 waited behind the first batch: one batch
  CHECK(batches == std::vector<std::vector<int>>{{1}, {2, 3}});
  CHECK_FALSE(multi_ran);
  batch_done();
  CHECK(multi_ran);
  CHECK(batches == std::vector<std::vector<int>>{{1}, {2, 3}, {4}});
}
