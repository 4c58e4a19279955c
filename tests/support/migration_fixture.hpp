// A lifecycle fixture for residency tests: Migrate, GetOperation and
// CancelOperation like a client, and the replicas as the tiers hold them.
#pragma once

#include <functional>

#include "lifecycle_fixture.hpp"

namespace weightd::test {

struct migration_fixture : lifecycle_fixture {
  using op = events::operation_record;

  explicit migration_fixture(uint64_t hot_capacity = 64 << 20) : lifecycle_fixture(hot_capacity) {}

  /// Restarts on the same journal and tiers with a changed configuration.
  void restart_with(const std::function<void(actors::node_config&)>& change) {
    stop();
    auto c = config();
    change(c);
    start(c);
  }

  result<op> migrate(const events::revision_key& rid, uint64_t expected, events::v1::Residency target,
                     double ratio = 0) {
    return ask<op>(registry(), actors::migrate_revision{rid, expected, target, ratio, "", ""});
  }
  result<op> operation(uint64_t id) { return ask<op>(registry(), actors::get_operation{id}); }
  result<op> cancel(uint64_t id) { return ask<op>(registry(), actors::cancel_operation{id, "", ""}); }

  const events::object_record& object(const std::string& key) {
    const auto* r = live_index().find({"default", key});
    REQUIRE_MESSAGE(r, key);
    return *r;
  }
  /// The bytes of a replica file as the tier holds them.
  std::string replica_bytes(events::v1::Tier tier, const std::string& key) {
    auto c = config();
    persistence::tier_store t{tier == events::v1::TIER_HOT ? c.hot : c.cold};
    return read_file(t.object_path({"default", key}));
  }
  /// Every payload is in exactly the tiers named, with its original bytes.
  void check_payloads(const upload& u, size_t size, bool hot, bool cold) {
    for (size_t i = 0; i < u.keys.size(); ++i) {
      const auto& o = object(u.keys[i]);
      CAPTURE(u.keys[i]);
      CHECK(o.hot == hot);
      CHECK(o.cold == cold);
      if (o.hot) CHECK(replica_bytes(events::v1::TIER_HOT, u.keys[i]) == pattern(size, static_cast<unsigned>(i)));
      if (o.cold) CHECK(replica_bytes(events::v1::TIER_COLD, u.keys[i]) == pattern(size, static_cast<unsigned>(i)));
    }
  }
  uint64_t generation(const events::revision_key& rid) { return get_rev(rid)->record.metadata_generation; }
};

}  // namespace weightd::test
