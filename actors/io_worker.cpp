#include "actors/io_worker.hpp"

#include "actors/errors.hpp"

namespace weightd::actors {

namespace {

io_actor::behavior_type io_worker(io_actor::pointer, tiers t) {
  return {
      [=](publish_atom, events::v1::Tier tier, const std::string& temp,
          const events::object_ref& ref) -> caf::result<bool> {
        if (auto st = t.of(tier).publish(temp, ref); !st.ok()) {
          persistence::tier_store::remove_file(temp);
          return to_error(st);
        }
        return true;
      },
      [=](copy_atom, events::v1::Tier to, const events::object_ref& ref,
          const std::string& temp_name) -> caf::result<persistence::blob_digest> {
        auto digest = t.of(to).copy_from(t.other(to), ref, temp_name, false);
        if (!digest) return to_error(digest.error());
        return *digest;
      },
      [=](allocate_atom, events::v1::Tier tier, const std::string& temp,
          uint64_t bytes) -> caf::result<bool> {
        if (auto st = t.of(tier).allocate(temp, bytes); !st.ok()) return to_error(st);
        return true;
      },
      [=](unlink_atom, const std::vector<std::string>& paths) {
        for (const auto& p : paths) persistence::tier_store::remove_file(p);
      },
  };
}

}  // namespace

io_actor spawn_io_worker(caf::actor_system& sys, tiers t, bool detached) {
  if (detached) return sys.spawn<caf::detached>(io_worker, std::move(t));
  return sys.spawn(io_worker, std::move(t));
}

}  // namespace weightd::actors
