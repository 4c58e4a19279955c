#include "actors/scrubber.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "actors/errors.hpp"

namespace weightd::actors {

namespace {

using clock_type = std::chrono::steady_clock;

scrubber_actor::behavior_type scrubber(scrubber_actor::pointer self, object_store_actor store,
                                       tiers files, scrubber_config config, bool start) {
  auto next_round = [=](uint64_t bytes, clock_type::duration spent) {
    if (!start) return;  // driven by hand
    auto paced = std::chrono::duration<double>(static_cast<double>(bytes) /
                                               static_cast<double>(config.rate_bytes));
    auto wait = std::max<clock_type::duration>(
        config.interval, std::chrono::duration_cast<clock_type::duration>(paced) - spent);
    self->delayed_send(self, std::chrono::duration_cast<std::chrono::milliseconds>(wait),
                       caf::tick_atom::value);
  };
  if (start) self->delayed_send(self, config.interval, caf::tick_atom::value);
  return {
      [=](caf::tick_atom) {
        // rate x interval in floating point: a huge --scrub-rate must not wrap.
        double wanted = static_cast<double>(config.rate_bytes) *
                        static_cast<double>(config.interval.count()) / 1000.0;
        uint64_t budget = wanted >= 1.8e19 ? UINT64_MAX : std::max<uint64_t>(1, static_cast<uint64_t>(wanted));
        self->request(store, config.timeout, scrub_atom::value, budget)
            .then(
                [=](scrub_batch& batch) {
                  auto began = clock_type::now();
                  uint64_t bytes = 0;
                  for (auto& item : batch.items) {
                    auto check = files.of(item.tier).verify(item.ref, item.size, item.checksum, true);
                    item.missing = check == persistence::replica_check::missing;
                    item.corrupt = check == persistence::replica_check::wrong_size ||
                                   check == persistence::replica_check::wrong_checksum;
                    bytes += item.size;
                  }
                  if (!batch.items.empty()) self->send(store, scrub_atom::value, std::move(batch));
                  next_round(bytes, clock_type::now() - began);
                },
                [=](caf::error& err) {
                  spdlog::warn("scrub round skipped: the object store did not answer: {}",
                               to_status(err).to_string());
                  next_round(0, {});
                });
      },
  };
}

}  // namespace

scrubber_actor spawn_scrubber(caf::actor_system& sys, object_store_actor store, tiers files,
                              scrubber_config config, bool detached, bool start) {
  if (detached) return sys.spawn<caf::detached>(scrubber, store, std::move(files), config, start);
  return sys.spawn(scrubber, store, std::move(files), config, start);
}

}  // namespace weightd::actors
