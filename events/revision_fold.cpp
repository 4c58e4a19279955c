#include "events/revision_fold.hpp"

#include "events/event_type.hpp"

namespace weightd::events {

policy policy::from_proto(const v1::Policy& p) {
  return {p.preferred_residency(), p.mixed_hot_ratio(), p.migration_mode()};
}

v1::Policy policy::to_proto() const {
  v1::Policy p;
  p.set_preferred_residency(preferred);
  p.set_mixed_hot_ratio(mixed_hot_ratio);
  p.set_migration_mode(mode);
  return p;
}

manifest_ref manifest_ref::from_proto(const v1::ManifestRef& m) {
  return {m.manifest_key(),        m.manifest_sha256(), m.payload_group_id(),
          m.payload_keys_sha256(), m.payload_count(),   m.logical_bytes()};
}

v1::ManifestRef manifest_ref::to_proto() const {
  v1::ManifestRef m;
  m.set_manifest_key(manifest_key);
  m.set_manifest_sha256(manifest_sha256);
  m.set_payload_group_id(payload_group_id);
  m.set_payload_keys_sha256(payload_keys_sha256);
  m.set_payload_count(payload_count);
  m.set_logical_bytes(logical_bytes);
  return m;
}

bool operator==(const manifest_ref& a, const manifest_ref& b) {
  return a.manifest_key == b.manifest_key && a.manifest_sha256 == b.manifest_sha256 &&
         a.payload_group_id == b.payload_group_id &&
         a.payload_keys_sha256 == b.payload_keys_sha256 && a.payload_count == b.payload_count &&
         a.logical_bytes == b.logical_bytes;
}

bool operator==(const operation_record& a, const operation_record& b) {
  return a.id == b.id && a.revision == b.revision && a.kind == b.kind && a.target == b.target &&
         a.target_hot_ratio == b.target_hot_ratio && a.processed_units == b.processed_units &&
         a.total_units == b.total_units && a.processed_bytes == b.processed_bytes &&
         a.total_bytes == b.total_bytes && a.cursor == b.cursor && a.state == b.state &&
         a.message == b.message && a.started_at_ms == b.started_at_ms &&
         a.updated_at_ms == b.updated_at_ms && a.automatic == b.automatic && a.reason == b.reason;
}

bool operator==(const revision_record& a, const revision_record& b) {
  return a.id == b.id && a.availability == b.availability && a.residency == b.residency &&
         a.policy == b.policy && a.metadata_generation == b.metadata_generation &&
         a.payload_group_id == b.payload_group_id &&
         a.expected_payload_count == b.expected_payload_count &&
         a.expected_logical_bytes == b.expected_logical_bytes &&
         a.affinity_count == b.affinity_count && a.affinity_units == b.affinity_units &&
         a.manifest == b.manifest &&
         a.payload_keys == b.payload_keys && a.observed_hot_ratio == b.observed_hot_ratio &&
         a.operation_id == b.operation_id && a.drain_deadline_ms == b.drain_deadline_ms &&
         a.retired_by == b.retired_by && a.leases == b.leases &&
         a.created_at_ms == b.created_at_ms && a.updated_at_ms == b.updated_at_ms &&
         a.last_accessed_at_ms == b.last_accessed_at_ms &&
         a.last_request_digest == b.last_request_digest;
}

bool operator==(const revision_index& a, const revision_index& b) {
  return a.revisions == b.revisions && a.operations == b.operations && a.groups == b.groups &&
         a.last_operation_id == b.last_operation_id && a.last_lease_id == b.last_lease_id;
}

namespace {

using P = v1::Envelope::PayloadCase;

status refuse(const v1::Envelope& e, const std::string& why) {
  return {errc::internal, "event seq " + std::to_string(e.global_seq()) + " (" +
                              event_type_name(e) + ") does not apply: " + why};
}

const v1::RevisionId& id_of(const v1::Envelope& e) {
  switch (e.payload_case()) {
    case P::kImportBegun: return e.import_begun().id();
    case P::kImportCommitted: return e.import_committed().id();
    case P::kImportAborted: return e.import_aborted().id();
    case P::kPolicyUpdated: return e.policy_updated().id();
    case P::kRemovalStarted: return e.removal_started().id();
    case P::kRevisionDeleted: return e.revision_deleted().id();
    case P::kAvailabilityObserved: return e.availability_observed().id();
    case P::kResidencyObserved: return e.residency_observed().id();
    case P::kRetirementStarted: return e.retirement_started().id();
    case P::kLeaseGranted: return e.lease_granted().id();
    case P::kLeaseRenewed: return e.lease_renewed().id();
    case P::kLeaseReleased: return e.lease_released().id();
    case P::kLeaseExpired: return e.lease_expired().id();
    case P::kLeaseRevoked: return e.lease_revoked().id();
    case P::kOperationStarted: return e.operation_started().id();
    case P::kOperationProgressed: return e.operation_progressed().id();
    case P::kOperationFinished: return e.operation_finished().id();
    case P::kOperationFailed: return e.operation_failed().id();
    case P::kOperationCancelled: return e.operation_cancelled().id();
    default: return v1::RevisionId::default_instance();
  }
}

/// A mutation: the record changes, so its generation advances.
void touch(revision_record& r, const v1::Envelope& e, const std::string& digest) {
  ++r.metadata_generation;
  r.updated_at_ms = e.timestamp_ms();
  r.last_request_digest = digest;
}

status start_operation(revision_index& index, revision_record& r, const v1::Envelope& e,
                       const v1::OperationStarted& op) {
  // Ids come from one allocator, so they are unique; revisions persist
  // concurrently, so they need not arrive in order.
  if (op.operation_id() == 0 || index.operations.count(op.operation_id()))
    return refuse(e, "operation id " + std::to_string(op.operation_id()) + " was used before");
  if (r.operation_id) return refuse(e, "an operation is already active");
  operation_record o;
  o.id = op.operation_id();
  o.revision = r.id;
  o.kind = op.kind();
  o.target = op.target();
  o.target_hot_ratio = op.target_hot_ratio();
  o.total_units = op.total_units();
  o.total_bytes = op.total_bytes();
  o.started_at_ms = o.updated_at_ms = e.timestamp_ms();
  o.automatic = op.automatic();
  o.reason = op.reason();
  index.operations[o.id] = o;
  index.last_operation_id = std::max(index.last_operation_id, o.id);
  r.operation_id = o.id;
  return {};
}

status end_operation(revision_index& index, revision_record& r, const v1::Envelope& e,
                     uint64_t id, operation_state state, const std::string& message) {
  auto it = index.operations.find(id);
  if (it == index.operations.end() || r.operation_id != id)
    return refuse(e, "operation " + std::to_string(id) + " is not the revision's active one");
  it->second.state = state;
  it->second.message = message;
  it->second.updated_at_ms = e.timestamp_ms();
  r.operation_id = 0;
  if (!it->second.automatic) touch(r, e, r.last_request_digest);
  return {};
}

/// The live lease an event names, or null.
lease_record* lease_of(revision_record& r, uint64_t lease_id) {
  auto it = r.leases.find(lease_id);
  return it == r.leases.end() ? nullptr : &it->second;
}

status end_lease(revision_record& r, const v1::Envelope& e, uint64_t lease_id) {
  if (!r.leases.erase(lease_id)) return refuse(e, "lease " + std::to_string(lease_id) + " is not live");
  return {};
}

bool in(v1::Availability a, std::initializer_list<v1::Availability> states) {
  for (auto s : states)
    if (a == s) return true;
  return false;
}

}  // namespace

bool is_revision_event(const v1::Envelope& e) {
  auto c = static_cast<int>(e.payload_case());
  return c >= P::kImportBegun && c <= P::kOperationCancelled;
}

revision_key revision_of(const v1::Envelope& e) { return revision_key::from_proto(id_of(e)); }

status evolve_revisions(revision_index& index, const v1::Envelope& e) {
  auto key = revision_of(e);
  auto found = index.revisions.find(key);

  if (e.payload_case() == P::kImportBegun) {
    const auto& p = e.import_begun();
    uint64_t generation = 1;
    if (found != index.revisions.end()) {
      if (found->second.availability != v1::DELETED) return refuse(e, "the revision exists");
      generation = found->second.metadata_generation + 1;  // stale fences stay stale
    }
    if (index.groups.count(p.payload_group_id())) return refuse(e, "the group has an owner");
    revision_record r;
    r.id = key;
    r.availability = v1::IMPORTING;
    r.residency = v1::RESIDENCY_UNKNOWN;
    r.policy = policy::from_proto(p.policy());
    r.metadata_generation = generation;
    r.payload_group_id = p.payload_group_id();
    r.expected_payload_count = p.expected_payload_count();
    r.expected_logical_bytes = p.expected_logical_bytes();
    r.affinity_count = p.affinity_count();
    r.created_at_ms = r.updated_at_ms = e.timestamp_ms();
    r.last_request_digest = p.request_digest();
    index.groups[r.payload_group_id] = key;
    index.revisions[key] = std::move(r);
    return {};
  }
  if (found == index.revisions.end()) return refuse(e, "unknown revision");
  auto& r = found->second;

  switch (e.payload_case()) {
    case P::kImportCommitted: {
      const auto& p = e.import_committed();
      if (r.availability != v1::IMPORTING) return refuse(e, "not IMPORTING");
      r.availability = v1::READY;
      r.residency = p.residency() == v1::RESIDENCY_UNKNOWN ? v1::RESIDENCY_HOT : p.residency();
      r.observed_hot_ratio = p.residency() == v1::RESIDENCY_UNKNOWN ? 1.0 : p.observed_hot_ratio();
      r.manifest = manifest_ref::from_proto(p.manifest());
      r.payload_keys.assign(p.payload_keys().begin(), p.payload_keys().end());
      r.affinity_units = p.affinity_units();
      touch(r, e, p.request_digest());
      if (p.has_operation()) return start_operation(index, r, e, p.operation());
      return {};
    }
    case P::kImportAborted:
      if (r.availability != v1::IMPORTING) return refuse(e, "not IMPORTING");
      r.availability = v1::DELETING;
      touch(r, e, e.import_aborted().request_digest());
      return {};
    case P::kPolicyUpdated: {
      const auto& p = e.policy_updated();
      if (!r.visible()) return refuse(e, "not READY or DEGRADED");
      r.policy = policy::from_proto(p.policy());
      touch(r, e, p.request_digest());
      if (p.has_operation()) return start_operation(index, r, e, p.operation());
      return {};
    }
    case P::kRemovalStarted: {
      const auto& p = e.removal_started();
      if (!r.visible()) return refuse(e, "not READY or DEGRADED");
      if (r.operation_id) return refuse(e, "an operation is active");
      if (p.drain_deadline_ms() > 0) {  // a drain: no new leases from here on
        r.drain_deadline_ms = p.drain_deadline_ms();
      } else {
        if (!r.leases.empty()) return refuse(e, "leases are live");
        r.availability = v1::DELETING;
        r.drain_deadline_ms = 0;
      }
      touch(r, e, p.request_digest());
      return {};
    }
    case P::kRetirementStarted: {
      const auto& p = e.retirement_started();
      if (!r.visible()) return refuse(e, "not READY or DEGRADED");
      if (!r.retired_by.empty()) return refuse(e, "already retiring");
      if (r.operation_id) return refuse(e, "an operation is active");
      if (p.upsert_request_id().empty()) return refuse(e, "no claim names the retirement");
      r.retired_by = p.upsert_request_id();
      touch(r, e, p.request_digest());
      return {};
    }
    case P::kRevisionDeleted:
      if (r.availability != v1::DELETING) return refuse(e, "not DELETING");
      if (!r.leases.empty()) return refuse(e, "leases are live");
      r.availability = v1::DELETED;
      r.residency = v1::RESIDENCY_ABSENT;
      r.observed_hot_ratio = 0;
      r.drain_deadline_ms = 0;
      index.groups.erase(r.payload_group_id);
      touch(r, e, r.last_request_digest);
      return {};
    case P::kAvailabilityObserved: {
      auto a = e.availability_observed().availability();
      if (!in(r.availability, {v1::READY, v1::DEGRADED}) || !in(a, {v1::READY, v1::DEGRADED}))
        return refuse(e, "only READY <-> DEGRADED is observed");
      r.availability = a;
      touch(r, e, r.last_request_digest);
      return {};
    }
    case P::kResidencyObserved:  // observed, like operation progress: no generation change
      if (!r.visible()) return refuse(e, "not READY or DEGRADED");
      r.residency = e.residency_observed().residency();
      r.observed_hot_ratio = e.residency_observed().observed_hot_ratio();
      r.updated_at_ms = e.timestamp_ms();
      return {};
    case P::kOperationStarted:
      if (!r.visible()) return refuse(e, "not READY or DEGRADED");
      if (!e.operation_started().automatic()) touch(r, e, e.operation_started().request_digest());
      return start_operation(index, r, e, e.operation_started());
    case P::kOperationProgressed: {  // progress does not change the record's generation
      const auto& p = e.operation_progressed();
      auto it = index.operations.find(p.operation_id());
      if (it == index.operations.end() || r.operation_id != p.operation_id())
        return refuse(e, "not the active operation");
      auto& o = it->second;
      if (p.processed_units() < o.processed_units || p.processed_bytes() < o.processed_bytes)
        return refuse(e, "progress never goes backwards");
      o.processed_units = p.processed_units();
      o.processed_bytes = p.processed_bytes();
      o.cursor = p.cursor();
      o.message = p.message();
      o.updated_at_ms = e.timestamp_ms();
      return {};
    }
    case P::kOperationFinished:
      return end_operation(index, r, e, e.operation_finished().operation_id(),
                           operation_state::completed, "");
    case P::kOperationFailed:
      return end_operation(index, r, e, e.operation_failed().operation_id(),
                           operation_state::failed, e.operation_failed().message());
    case P::kOperationCancelled:
      return end_operation(index, r, e, e.operation_cancelled().operation_id(),
                           operation_state::cancelled,
                           e.operation_cancelled().message().empty() ? "cancelled"
                                                                     : e.operation_cancelled().message());
    case P::kLeaseGranted: {  // leases never change the generation (SPEC §3)
      const auto& p = e.lease_granted();
      if (r.availability != v1::READY || r.draining())
        return refuse(e, "leases are granted only on READY revisions that are not draining");
      if (p.lease_id() == 0 || lease_of(r, p.lease_id()))
        return refuse(e, "lease id " + std::to_string(p.lease_id()) + " is in use");
      r.leases[p.lease_id()] = lease_record{p.lease_id(), p.holder(), p.expiry_ms(), e.timestamp_ms()};
      r.last_accessed_at_ms = e.timestamp_ms();
      index.last_lease_id = std::max(index.last_lease_id, p.lease_id());
      return {};
    }
    case P::kLeaseRenewed: {
      const auto& p = e.lease_renewed();
      auto* lease = lease_of(r, p.lease_id());
      if (!lease) return refuse(e, "lease " + std::to_string(p.lease_id()) + " is not live");
      if (p.expiry_ms() < lease->expiry_ms) return refuse(e, "a renewal never shortens a lease");
      lease->expiry_ms = p.expiry_ms();
      return {};
    }
    case P::kLeaseReleased: return end_lease(r, e, e.lease_released().lease_id());
    case P::kLeaseExpired: return end_lease(r, e, e.lease_expired().lease_id());
    case P::kLeaseRevoked: return end_lease(r, e, e.lease_revoked().lease_id());
    default:
      return refuse(e, "not a revision event");
  }
}

status check_invariants(const revision_record& r, const revision_index& index) {
  auto violation = [&](const std::string& what) {
    return status{errc::internal, "invariant violated by " + canonical_text(r.id) + ": " + what};
  };
  if (r.metadata_generation == 0) return violation("metadata_generation is 0");
  if (r.visible() && r.manifest.manifest_key.empty())
    return violation("READY/DEGRADED without a manifest");
  if (r.visible() && r.residency == v1::RESIDENCY_UNKNOWN)
    return violation("READY/DEGRADED with residency UNKNOWN");
  if (r.availability == v1::READY && r.residency == v1::RESIDENCY_ABSENT)
    return violation("READY with residency ABSENT");
  if (r.availability == v1::DELETED) {
    if (r.residency != v1::RESIDENCY_ABSENT) return violation("DELETED with residency not ABSENT");
    if (r.operation_id) return violation("DELETED with an active operation");
  }
  if ((r.availability == v1::DELETING || r.availability == v1::DELETED) && !r.leases.empty())
    return violation(std::string{r.availability == v1::DELETED ? "DELETED" : "DELETING"} +
                     " with a live lease");
  if (r.drain_deadline_ms > 0 && !r.visible()) return violation("a drain outside READY/DEGRADED");
  if (r.retiring() && r.operation_id) return violation("a retiring revision with an active operation");
  if (r.operation_id) {
    auto it = index.operations.find(r.operation_id);
    if (it == index.operations.end() || it->second.state != operation_state::running)
      return violation("active operation " + std::to_string(r.operation_id) + " is not running");
  }
  return {};
}

}  // namespace weightd::events
