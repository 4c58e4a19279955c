#include "events/evolve.hpp"

#include <string>

#include "events/event_type.hpp"

namespace weightd::events {

bool operator==(const object_record& a, const object_record& b) {
  return a.ref == b.ref && a.data_type == b.data_type && a.group_id == b.group_id &&
         a.affinity_id == b.affinity_id && a.size == b.size &&
         a.checksum_algorithm == b.checksum_algorithm && a.checksum == b.checksum &&
         a.sha256 == b.sha256 && a.hard_pin == b.hard_pin &&
         a.created_at_ms == b.created_at_ms && a.hot == b.hot && a.cold == b.cold;
}

bool operator==(const object_index& a, const object_index& b) {
  return a.objects == b.objects && a.groups == b.groups && a.hot_bytes == b.hot_bytes &&
         a.cold_bytes == b.cold_bytes;
}

bool operator==(const store_state& a, const store_state& b) {
  return a.applied_seq == b.applied_seq && a.writer_id == b.writer_id &&
         a.writers_started == b.writers_started && a.last_event_ms == b.last_event_ms &&
         a.epoch == b.epoch && a.leader == b.leader &&
         a.objects == b.objects && a.revisions == b.revisions && a.lineages == b.lineages;
}

namespace {

status refuse(const v1::Envelope& e, const std::string& why) {
  return {errc::internal, "event seq " + std::to_string(e.global_seq()) + " (" +
                              event_type_name(e) + ") does not apply: " + why};
}

// --- objects ---------------------------------------------------------------

void set_replica(object_index& s, object_record& o, v1::Tier tier, bool present) {
  bool& flag = tier == v1::TIER_HOT ? o.hot : o.cold;
  uint64_t& bytes = tier == v1::TIER_HOT ? s.hot_bytes : s.cold_bytes;
  if (flag == present) return;
  flag = present;
  if (present) bytes += o.size; else bytes -= o.size;
}

status apply_object_put(object_index& s, const v1::Envelope& e) {
  const auto& p = e.object_put();
  object_ref ref{p.tenant(), p.key()};
  if (s.objects.count(ref)) return refuse(e, "object already exists");
  if (p.tier() != v1::TIER_HOT && p.tier() != v1::TIER_COLD)
    return refuse(e, "put without a tier");
  auto o = object_record::metadata_of(p);
  o.created_at_ms = e.timestamp_ms();
  auto& stored = s.objects.emplace(ref, std::move(o)).first->second;
  set_replica(s, stored, p.tier(), true);
  if (!stored.group_id.empty()) s.groups[{ref.tenant, stored.group_id}].insert(ref.key);
  return {};
}

template <class Payload>
status apply_replica_change(object_index& s, const v1::Envelope& e, const Payload& p,
                            bool present) {
  auto it = s.objects.find(object_ref{p.tenant(), p.key()});
  if (it == s.objects.end()) return refuse(e, "unknown object");
  if (p.tier() != v1::TIER_HOT && p.tier() != v1::TIER_COLD)
    return refuse(e, "replica without a tier");
  set_replica(s, it->second, p.tier(), present);
  return {};
}

status apply_object_removed(object_index& s, const v1::Envelope& e) {
  const auto& p = e.object_removed();
  auto it = s.objects.find(object_ref{p.tenant(), p.key()});
  if (it == s.objects.end()) return refuse(e, "unknown object");
  set_replica(s, it->second, v1::TIER_HOT, false);
  set_replica(s, it->second, v1::TIER_COLD, false);
  if (!it->second.group_id.empty()) {
    auto group = s.groups.find({p.tenant(), it->second.group_id});
    group->second.erase(p.key());
    if (group->second.empty()) s.groups.erase(group);
  }
  s.objects.erase(it);
  return {};
}

status apply_payload(store_state& s, const v1::Envelope& e) {
  using P = v1::Envelope::PayloadCase;
  if (is_object_event(e)) return evolve_objects(s.objects, e);
  if (is_revision_event(e)) {
    if (auto st = evolve_revisions(s.revisions, e); !st.ok()) return st;
    return evolve_lineages(s.lineages, e);  // a commit raises its lineage's watermark
  }
  if (is_lineage_event(e)) return evolve_lineages(s.lineages, e);
  switch (e.payload_case()) {
    case P::kWriterStarted:
      s.writer_id = e.writer_started().writer_id();
      ++s.writers_started;
      return {};
    case P::kLeadershipTaken: {
      const auto& taken = e.leadership_taken();
      if (taken.epoch() <= s.epoch || taken.epoch() != e.epoch())
        return {errc::data_loss, "event seq " + std::to_string(e.global_seq()) +
                                     " takes leadership at epoch " + std::to_string(taken.epoch()) +
                                     " (envelope epoch " + std::to_string(e.epoch()) +
                                     ") but the journal is at epoch " + std::to_string(s.epoch) +
                                     " already: epochs only grow"};
      s.leader = taken.member();
      return {};
    }
    case P::PAYLOAD_NOT_SET: return refuse(e, "envelope without payload");
    default: return refuse(e, "unknown event type");
  }
}

}  // namespace

bool is_object_event(const v1::Envelope& e) {
  using P = v1::Envelope::PayloadCase;
  auto c = e.payload_case();
  return c == P::kObjectPut || c == P::kReplicaAdded || c == P::kReplicaDropped ||
         c == P::kObjectRemoved;
}

std::string stream_of(const v1::Envelope& e) {
  using P = v1::Envelope::PayloadCase;
  if (is_revision_event(e)) return revision_stream(revision_of(e));
  if (is_lineage_event(e)) return revision_stream(lineage_base_of(e));  // the base's story
  switch (e.payload_case()) {
    case P::kObjectPut: return object_stream(e.object_put().tenant(), e.object_put().key());
    case P::kReplicaAdded: return object_stream(e.replica_added().tenant(), e.replica_added().key());
    case P::kReplicaDropped:
      return object_stream(e.replica_dropped().tenant(), e.replica_dropped().key());
    case P::kObjectRemoved:
      return object_stream(e.object_removed().tenant(), e.object_removed().key());
    default: return kSystemStream;
  }
}

std::string tenant_of(const v1::Envelope& e) {
  using P = v1::Envelope::PayloadCase;
  if (is_revision_event(e)) return revision_of(e).tenant;
  if (is_lineage_event(e)) return lineage_base_of(e).tenant;
  switch (e.payload_case()) {
    case P::kObjectPut: return e.object_put().tenant();
    case P::kReplicaAdded: return e.replica_added().tenant();
    case P::kReplicaDropped: return e.replica_dropped().tenant();
    case P::kObjectRemoved: return e.object_removed().tenant();
    default: return "";
  }
}

status evolve_objects(object_index& index, const v1::Envelope& e) {
  using P = v1::Envelope::PayloadCase;
  switch (e.payload_case()) {
    case P::kObjectPut: return apply_object_put(index, e);
    case P::kReplicaAdded: return apply_replica_change(index, e, e.replica_added(), true);
    case P::kReplicaDropped: return apply_replica_change(index, e, e.replica_dropped(), false);
    case P::kObjectRemoved: return apply_object_removed(index, e);
    default: return refuse(e, "not an object event");
  }
}

status check_touched(const store_state& s, const v1::Envelope& e) {
  if (is_revision_event(e))
    if (auto st = check_invariants(*s.revisions.find(revision_of(e)), s.revisions); !st.ok())
      return st;
  if (is_lineage_event(e) || e.has_import_committed())
    if (const auto* l = s.lineages.find(lineage_key(
            is_lineage_event(e) ? lineage_base_of(e) : revision_of(e))))
      return check_invariants(*l);
  return {};
}

status evolve(store_state& state, const v1::Envelope& event) {
  if (event.global_seq() <= state.applied_seq)
    return refuse(event, "seq is not after the last applied seq " +
                             std::to_string(state.applied_seq));
  // SPEC §11 fencing: epochs never go down, and a new one begins with its
  // leadership_taken (which checks that it grows).
  bool takes_leadership = event.payload_case() == v1::Envelope::kLeadershipTaken;
  if (event.epoch() < state.epoch || (event.epoch() > state.epoch && !takes_leadership))
    return {errc::data_loss, "event seq " + std::to_string(event.global_seq()) + " (" +
                                 event_type_name(event) + ") has epoch " +
                                 std::to_string(event.epoch()) + " but the journal is at epoch " +
                                 std::to_string(state.epoch) +
                                 (event.epoch() < state.epoch
                                      ? ": a former leader's event after the new one's"
                                      : " and no leadership_taken began it")};
  if (auto st = apply_payload(state, event); !st.ok()) return st;
  state.epoch = event.epoch();
  state.applied_seq = event.global_seq();
  state.last_event_ms = event.timestamp_ms();
  return {};
}

}  // namespace weightd::events
