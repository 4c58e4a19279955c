// The object store's rooms (one .cpp each), and what they share. Only the
// files of actors/object_store/ include this; everyone else knows the store
// by its interface (object_store.hpp).
#pragma once

#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "actors/errors.hpp"
#include "actors/journaled.hpp"
#include "actors/log_value.hpp"
#include "actors/object_store/object_store.hpp"
#include "core/eviction_plan.hpp"
#include "core/validate.hpp"

namespace weightd::actors::store {

namespace v1 = events::v1;
using events::object_record;
using events::object_ref;
using store_pointer = object_store_actor::stateful_pointer<object_store_state>;

// helpers.cpp
int64_t now_ms(store_pointer self);
std::string describe(const object_ref& ref);
std::string tier_name(v1::Tier tier);
v1::Envelope object_event(store_pointer self, const object_ref& ref, const std::string& principal);
io_actor next_io(store_pointer self);
void unlink_files(store_pointer self, std::vector<std::string> paths);
std::vector<std::string> replica_paths(const object_store_state& st, const object_record& r);
bool leased(const object_store_state& st, const object_ref& ref, int64_t now);
const managed_group* owner_of(const object_store_state& st, const object_record& r);
object_info info_of(const object_store_state& st, const object_record& r, int64_t now);
uint64_t& reserved_of(object_store_state& st, v1::Tier tier);
uint64_t used_of(const object_store_state& st, v1::Tier tier);
status not_found(const object_ref& ref);
result<const object_record*> lookup(const object_store_state& st, std::string& tenant,
                                    const std::string& key);
status check_tier(v1::Tier tier);
status removable(const object_store_state& st, const object_record& r, bool force, int64_t now);
object_ref object_of(const v1::Envelope& e);
void void_scrub_verdicts(object_store_state& st, const v1::Envelope& e);

// capacity.cpp
eviction_plan plan_for(store_pointer self, uint64_t bytes);
void fail_waiters(store_pointer self, const status& why);
void retry_waiters(store_pointer self);
void start_eviction(store_pointer self, const eviction_plan& plan,
                    std::function<void(result<eviction_summary>)> done);
void reserve(store_pointer self, v1::Tier tier, uint64_t bytes, std::function<void(status)> cont);
void release(store_pointer self, v1::Tier tier, uint64_t bytes);
void enforce_watermark(store_pointer self);
caf::result<eviction_summary> evict_to(store_pointer self, double target_ratio);

// puts.cpp
void move_share(object_store_state& st, const std::string& tenant, v1::Tier from, v1::Tier to,
                uint64_t bytes);
void allocate_file(store_pointer self, io_actor io, v1::Tier tier, uint64_t bytes, std::string temp,
                   bool may_evict, std::function<void(status)> cont);
void hold_room(store_pointer self, v1::Tier tier, uint64_t bytes, std::string temp,
               std::function<void(status)> cont);
status check_tenant_share(const object_store_state& st, const std::string& tenant, v1::Tier tier,
                          uint64_t bytes);
caf::result<put_ticket> put_start(store_pointer self, put_request& req);
void end_share(object_store_state& st, const object_store_state::pending_put& p);
void drop_put(store_pointer self, const object_store_state::pending_put& p);
caf::result<object_info> put_end(store_pointer self, uint64_t id,
                                 const persistence::blob_digest& digest);
void abort_put(store_pointer self, uint64_t id);
void on_tick(store_pointer self);

// removal.cpp
void remove_records(store_pointer self, std::vector<object_record> records,
                    v1::RemovalReason reason, const std::string& principal,
                    std::function<void(status)> done);
caf::result<object_info> remove_object(store_pointer self, std::string& tenant, std::string& key,
                                       bool force, std::string& principal);
caf::result<batch_removal> remove_batch(store_pointer self, std::string& tenant,
                                        std::vector<std::string>& keys, bool force,
                                        std::string& principal);
caf::result<removal_summary> remove_all(store_pointer self, std::string& tenant,
                                        std::string& prefix, bool all, std::string& principal);
caf::result<batch_removal> remove_members(store_pointer self, std::string& tenant,
                                          std::vector<std::string>& keys, v1::RemovalReason reason);

// replicas.cpp
caf::result<object_info> add_replica(store_pointer self, std::string& tenant, std::string& key,
                                     v1::Tier tier);
caf::result<object_info> drop_replica(store_pointer self, std::string& tenant, std::string& key,
                                      v1::Tier tier, v1::RemovalReason reason);

// reads.cpp
/// `for_copy`: a standby's copy (SPEC §11 Bytes), which opens the file at
/// once and reads it whole: not an access (LRU, promotions), and no read
/// lease, so that it never holds up a user's remove or migration (a replica
/// unlinked under it stays readable through its open file).
caf::result<read_grant> get_object(store_pointer self, std::string& tenant, std::string& key,
                                   bool for_copy = false);
caf::result<std::vector<local_file>> local_files(store_pointer self, std::string& tenant,
                                                 std::vector<std::string>& keys);
caf::result<object_info> stat_object(store_pointer self, std::string& tenant, std::string& key);
caf::result<object_page> list_objects(store_pointer self, std::string& tenant, std::string& prefix,
                                      std::string& start_after, uint32_t limit);
caf::result<group_snapshot> group_of(store_pointer self, std::string& tenant, std::string& group_id,
                                     std::vector<std::string>& also);
store_stats stats_of(store_pointer self);

// scrub.cpp
scrub_batch next_scrub_batch(store_pointer self, uint64_t budget);
void take_scrub_verdicts(store_pointer self, const scrub_batch& batch);
damaged_groups take_damaged(store_pointer self);

}  // namespace weightd::actors::store
