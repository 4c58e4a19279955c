#include "actors/watchdog.hpp"

#include <spdlog/spdlog.h>

#include <map>

namespace weightd::actors {

watchdog_actor spawn_watchdog(caf::actor_system& sys,
                          std::vector<std::pair<std::string, caf::actor>> actors,
                          std::shared_ptr<node_health> health,
                          std::function<void(const std::string&)> on_failure) {
  return sys.spawn([=](watchdog_actor::pointer self) -> watchdog_actor::behavior_type {
    auto names = std::make_shared<std::map<caf::actor_addr, std::string>>();
    for (const auto& [name, handle] : actors) {
      (*names)[handle.address()] = name;
      self->monitor(handle);
    }
    self->set_down_handler([=](caf::down_msg& down) {
      if (health->stopping) return;
      auto it = names->find(down.source);
      auto what = (it == names->end() ? std::string{"a core actor"} : it->second) +
                  " stopped: " + self->system().render(down.reason);
      if (!health->fail(what)) return;
      spdlog::critical("weightd cannot go on: {}; restart it (the journal has every "
                       "acknowledged change)", what);
      if (on_failure) on_failure(what);
    });
    return {[=](caf::ok_atom) { return static_cast<uint64_t>(names->size()); }};
  });
}

}  // namespace weightd::actors
