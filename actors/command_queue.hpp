// One actor's commands, one after another in arrival order, without a lock
// and without blocking the mailbox: while a command waits for the journal or
// another actor, the actor keeps answering reads and queues what arrives.
//
// A *multi-step* command runs alone and calls `finished` exactly once, on
// every path, when its last step is done; the queue then runs what waited.
// A *decision* command (the revision's; a lineage has none) only decides
// and persists: the decision commands up to the next multi-step one go to
// the actor's batch runner together, so that many of them share one journal
// commit (revision_queue.hpp).
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <variant>

#include "actors/stop_gate.hpp"

namespace weightd::actors {

/// A multi-step command: runs alone, calls `finished` once when done.
using multi_step_command = std::function<void(std::function<void()> finished)>;

template <class Decision>
class command_queue {
 public:
  /// Takes the decision commands at the front one by one (`next` gives
  /// nothing at a multi-step command or the end) and calls `finished` once
  /// they are answered, at once when there was nothing to persist.
  using batch_runner = std::function<void(std::function<std::optional<Decision>()> next,
                                          std::function<void()> finished)>;

  /// `gate`: node::stop's (stop_gate.hpp), held while a command runs.
  explicit command_queue(batch_runner batch = {}, std::shared_ptr<stop_gate> gate = nullptr)
      : batch_(std::move(batch)), gate_(std::move(gate)) {}
  command_queue(command_queue&&) = default;
  command_queue& operator=(command_queue&&) = default;
  /// An actor that ends with a command in flight lets go of the gate.
  ~command_queue() {
    if (busy_ && gate_) gate_->release();
  }

  void push(multi_step_command c) {
    items_.emplace_back(std::move(c));
    run();
  }
  void push_decision(Decision d) {
    items_.emplace_back(std::move(d));
    run();
  }

  /// A batch or a multi-step command is in flight.
  bool busy() const { return busy_; }

 private:
  void run() {
    if (running_) return;  // a command finished inside start(): the loop below goes on
    running_ = true;
    while (!busy_ && !items_.empty()) start();
    running_ = false;
  }

  void start() {
    busy_ = true;
    if (gate_) gate_->hold();
    auto once = std::make_shared<bool>(false);
    auto finished = [this, once] {
      if (*once) return;  // a second call would start two commands at once
      *once = true;
      busy_ = false;
      if (gate_) gate_->release();
      run();
    };
    if (auto* multi = std::get_if<multi_step_command>(&items_.front())) {
      auto command = std::move(*multi);
      items_.pop_front();
      command(finished);
      return;
    }
    batch_(
        [this]() -> std::optional<Decision> {
          if (items_.empty() || !std::holds_alternative<Decision>(items_.front())) return {};
          auto d = std::move(std::get<Decision>(items_.front()));
          items_.pop_front();
          return d;
        },
        finished);
  }

  batch_runner batch_;
  std::shared_ptr<stop_gate> gate_;
  std::deque<std::variant<Decision, multi_step_command>> items_;
  bool busy_ = false;
  bool running_ = false;
};

}  // namespace weightd::actors
