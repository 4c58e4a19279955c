#include "actors/journaled.hpp"

#include <spdlog/spdlog.h>

namespace weightd::actors {

status apply_committed(const journaled& how, const std::vector<events::v1::Envelope>& committed) {
  status applied;
  for (const auto& e : committed) {
    applied = how.fold(e);
    if (applied.ok()) continue;
    spdlog::error("{} refused event seq {} its journal committed: {}; its memory stops before it "
                  "(a restart replays the journal): report this as a bug",
                  how.owner, e.global_seq(), applied.message());
    applied = {errc::internal, how.owner + " could not apply committed event seq " +
                                   std::to_string(e.global_seq()) + ": " + applied.message()};
    break;
  }
  if (how.after) how.after(committed);
  return applied;
}

}  // namespace weightd::actors
