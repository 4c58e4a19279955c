// The object store's behavior: one table, each handler calling the named
// function of its room (rooms.hpp): puts, reads, removal, replicas,
// capacity and eviction, the scrub.
#include "actors/object_store/rooms.hpp"

namespace weightd::actors {

const char* object_store_state::name = "weightd.object_store";

using namespace store;

object_store_actor spawn_object_store(caf::actor_system& sys, object_store_config config,
                                      object_store_deps deps) {
  return sys.spawn([config = std::move(config), deps = std::move(deps)](
                       store_pointer self) mutable -> object_store_actor::behavior_type {
    auto& st = self->state;
    st.config = std::move(config);
    st.journal = deps.journal;
    st.io = deps.io;
    st.files = deps.files;
    st.index = std::move(deps.index);
    st.damaged = std::move(deps.damaged);
    self->delayed_send(self, st.config.tick_interval, caf::tick_atom::value);
    return {
        [=](put_atom, put_request& req) { return put_start(self, req); },
        [=](put_atom, uint64_t id, persistence::blob_digest& digest) {
          return put_end(self, id, digest);
        },
        [=](abort_atom, uint64_t id) { abort_put(self, id); },
        [=](caf::get_atom, std::string& tenant, std::string& key) {
          return get_object(self, tenant, key);
        },
        [=](caf::get_atom, copy_atom, std::string& tenant, std::string& key) {
          return get_object(self, tenant, key, true);
        },
        [=](local_atom, std::string& tenant, std::vector<std::string>& keys) {
          return local_files(self, tenant, keys);
        },
        [=](stat_atom, std::string& tenant, std::string& key) {
          return stat_object(self, tenant, key);
        },
        [=](remove_atom, std::string& tenant, std::string& key, bool force,
            std::string& principal) { return remove_object(self, tenant, key, force, principal); },
        [=](remove_atom, std::string& tenant, std::vector<std::string>& keys, bool force,
            std::string& principal) { return remove_batch(self, tenant, keys, force, principal); },
        [=](removeall_atom, std::string& tenant, std::string& prefix, bool all,
            std::string& principal) { return remove_all(self, tenant, prefix, all, principal); },
        [=](evict_atom, double target_ratio) { return evict_to(self, target_ratio); },
        [=](group_atom, std::string& tenant, std::string& group_id,
            std::vector<std::string>& also) { return group_of(self, tenant, group_id, also); },
        [=](remove_atom, std::string& tenant, std::vector<std::string>& keys,
            v1::RemovalReason reason) { return remove_members(self, tenant, keys, reason); },
        [=](caf::add_atom, std::string& tenant, std::string& key, v1::Tier tier) {
          return add_replica(self, tenant, key, tier);
        },
        [=](drop_atom, std::string& tenant, std::string& key, v1::Tier tier,
            v1::RemovalReason reason) { return drop_replica(self, tenant, key, tier, reason); },
        [=](list_atom, std::string& tenant, std::string& prefix, std::string& start_after,
            uint32_t limit) { return list_objects(self, tenant, prefix, start_after, limit); },
        [=](guard_atom, std::string& tenant, std::string& group_id, managed_group& group) {
          self->state.managed[{tenant, group_id}] = std::move(group);
        },
        [=](guard_atom, std::string& tenant, std::string& group_id) {
          self->state.managed.erase({tenant, group_id});
        },
        [=](caf::tick_atom) {
          on_tick(self);
          self->delayed_send(self, self->state.config.tick_interval, caf::tick_atom::value);
        },
        [=](scrub_atom, uint64_t budget) { return next_scrub_batch(self, budget); },
        [=](scrub_atom, scrub_batch& verdicts) { take_scrub_verdicts(self, verdicts); },
        [=](damaged_atom) { return take_damaged(self); },
        [=](stats_atom) { return stats_of(self); },
    };
  });
}

}  // namespace weightd::actors
