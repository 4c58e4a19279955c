#include "events/state_codec.hpp"

#include <cmath>

#include "events/identity.hpp"
#include "events/upcast.hpp"

namespace weightd::events {

std::string encode_state(const store_state& s) {
  v1::StateSnapshot out;
  out.set_schema_version(kSchemaVersion);
  out.set_applied_seq(s.applied_seq);
  out.set_writer_id(s.writer_id);
  out.set_writers_started(s.writers_started);
  out.set_epoch(s.epoch);
  out.set_leader(s.leader);
  out.set_last_event_ms(s.last_event_ms);
  for (const auto& [ref, o] : s.objects.objects) {
    auto* p = out.add_objects();
    p->set_tenant(ref.tenant);
    p->set_key(ref.key);
    p->set_data_type(o.data_type);
    p->set_group_id(o.group_id);
    p->set_affinity_id(o.affinity_id);
    p->set_size(o.size);
    p->set_checksum_algorithm(o.checksum_algorithm);
    p->set_checksum(o.checksum);
    p->set_sha256(o.sha256);
    p->set_hard_pin(o.hard_pin);
    p->set_created_at_ms(o.created_at_ms);
    p->set_hot(o.hot);
    p->set_cold(o.cold);
  }
  for (const auto& [key, r] : s.revisions.revisions) {
    auto* p = out.add_revisions();
    *p->mutable_id() = key.to_proto();
    p->set_availability(r.availability);
    p->set_residency(r.residency);
    *p->mutable_policy() = r.policy.to_proto();
    p->set_metadata_generation(r.metadata_generation);
    p->set_payload_group_id(r.payload_group_id);
    p->set_expected_payload_count(r.expected_payload_count);
    p->set_expected_logical_bytes(r.expected_logical_bytes);
    p->set_affinity_count(r.affinity_count);
    *p->mutable_manifest() = r.manifest.to_proto();
    for (const auto& k : r.payload_keys) p->add_payload_keys(k);
    p->set_affinity_units(r.affinity_units);
    p->set_observed_hot_ratio(r.observed_hot_ratio);
    p->set_operation_id(r.operation_id);
    p->set_drain_deadline_ms(r.drain_deadline_ms);
    p->set_retired_by(r.retired_by);
    p->set_created_at_ms(r.created_at_ms);
    p->set_updated_at_ms(r.updated_at_ms);
    p->set_last_accessed_at_ms(r.last_accessed_at_ms);
    p->set_last_request_digest(r.last_request_digest);
    for (const auto& [id, l] : r.leases) {
      auto* lease = p->add_leases();
      lease->set_lease_id(l.id);
      lease->set_holder(l.holder);
      lease->set_expiry_ms(l.expiry_ms);
      lease->set_granted_at_ms(l.granted_at_ms);
    }
  }
  for (const auto& [id, o] : s.revisions.operations) {
    auto* p = out.add_operations();
    p->set_id(id);
    *p->mutable_revision() = o.revision.to_proto();
    p->set_kind(o.kind);
    p->set_target(o.target);
    p->set_target_hot_ratio(o.target_hot_ratio);
    p->set_processed_units(o.processed_units);
    p->set_total_units(o.total_units);
    p->set_processed_bytes(o.processed_bytes);
    p->set_total_bytes(o.total_bytes);
    p->set_cursor(o.cursor);
    p->set_state(static_cast<uint32_t>(o.state));
    p->set_message(o.message);
    p->set_started_at_ms(o.started_at_ms);
    p->set_updated_at_ms(o.updated_at_ms);
    p->set_automatic(o.automatic);
    p->set_reason(o.reason);
  }
  out.set_last_operation_id(s.revisions.last_operation_id);
  out.set_last_lease_id(s.revisions.last_lease_id);
  for (const auto& [key, l] : s.lineages.lineages) {
    auto* p = out.add_lineages();
    *p->mutable_lineage() = key.to_proto();
    p->set_watermark(l.watermark);
    if (l.claim) {
      auto* c = p->mutable_claim();
      *c->mutable_claimed() = l.claim->claimed;
      c->set_phase(l.claim->phase);
      c->set_reason(l.claim->reason);
      c->set_claimed_at_ms(l.claim->claimed_at_ms);
      c->set_updated_at_ms(l.claim->updated_at_ms);
    }
  }
  return out.SerializeAsString();
}

result<store_state> decode_state(std::string_view bytes) {
  v1::StateSnapshot in;
  if (!in.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return status{errc::data_loss, "the state snapshot does not parse"};
  if (in.schema_version() > kSchemaVersion)
    return status{errc::internal, "the state snapshot is from a newer schema"};
  store_state s;
  s.applied_seq = in.applied_seq();
  s.writer_id = in.writer_id();
  s.writers_started = in.writers_started();
  s.epoch = in.epoch();
  s.leader = in.leader();
  s.last_event_ms = in.last_event_ms();
  for (const auto& p : in.objects()) {
    auto o = object_record::metadata_of(p);
    // Each entry once: a repeated one would count its bytes and group twice.
    if (s.objects.objects.count(o.ref))
      return status{errc::data_loss, "the state snapshot lists object '" + o.ref.key +
                                         "' (tenant " + o.ref.tenant + ") twice"};
    o.created_at_ms = p.created_at_ms();
    o.hot = p.hot();
    o.cold = p.cold();
    if (o.hot) s.objects.hot_bytes += o.size;
    if (o.cold) s.objects.cold_bytes += o.size;
    if (!o.group_id.empty()) s.objects.groups[{o.ref.tenant, o.group_id}].insert(o.ref.key);
    s.objects.objects.emplace(o.ref, std::move(o));
  }
  for (const auto& p : in.revisions()) {
    revision_record r;
    r.id = revision_key::from_proto(p.id());
    if (s.revisions.revisions.count(r.id))
      return status{errc::data_loss,
                    "the state snapshot lists revision " + canonical_text(r.id) + " twice"};
    r.availability = p.availability();
    r.residency = p.residency();
    r.policy = policy::from_proto(p.policy());
    r.metadata_generation = p.metadata_generation();
    r.payload_group_id = p.payload_group_id();
    r.expected_payload_count = p.expected_payload_count();
    r.expected_logical_bytes = p.expected_logical_bytes();
    r.affinity_count = p.affinity_count();
    r.manifest = manifest_ref::from_proto(p.manifest());
    r.payload_keys.assign(p.payload_keys().begin(), p.payload_keys().end());
    r.affinity_units = p.affinity_units();
    r.observed_hot_ratio = p.observed_hot_ratio();
    r.operation_id = p.operation_id();
    r.drain_deadline_ms = p.drain_deadline_ms();
    r.retired_by = p.retired_by();
    r.created_at_ms = p.created_at_ms();
    r.updated_at_ms = p.updated_at_ms();
    r.last_accessed_at_ms = p.last_accessed_at_ms();
    r.last_request_digest = p.last_request_digest();
    for (const auto& l : p.leases())
      r.leases[l.lease_id()] = lease_record{l.lease_id(), l.holder(), l.expiry_ms(), l.granted_at_ms()};
    if (r.availability != v1::DELETED) s.revisions.groups[r.payload_group_id] = r.id;
    s.revisions.revisions.emplace(r.id, std::move(r));
  }
  for (const auto& p : in.operations()) {
    operation_record o;
    o.id = p.id();
    if (s.revisions.operations.count(o.id))
      return status{errc::data_loss,
                    "the state snapshot lists operation " + std::to_string(o.id) + " twice"};
    o.revision = revision_key::from_proto(p.revision());
    o.kind = p.kind();
    o.target = p.target();
    o.target_hot_ratio = p.target_hot_ratio();
    o.processed_units = p.processed_units();
    o.total_units = p.total_units();
    o.processed_bytes = p.processed_bytes();
    o.total_bytes = p.total_bytes();
    o.cursor = p.cursor();
    // Checked before the cast: a uint8_t would wrap 256 to "running".
    if (p.state() > static_cast<uint32_t>(operation_state::cancelled))
      return status{errc::data_loss, "the state snapshot gives operation " + std::to_string(o.id) +
                                         " the state " + std::to_string(p.state())};
    o.state = static_cast<operation_state>(p.state());
    o.message = p.message();
    o.started_at_ms = p.started_at_ms();
    o.updated_at_ms = p.updated_at_ms();
    o.automatic = p.automatic();
    o.reason = p.reason();
    s.revisions.operations.emplace(o.id, std::move(o));
  }
  s.revisions.last_operation_id = in.last_operation_id();
  s.revisions.last_lease_id = in.last_lease_id();
  for (const auto& p : in.lineages()) {
    lineage_record l;
    l.lineage = revision_key::from_proto(p.lineage());
    if (s.lineages.lineages.count(l.lineage))
      return status{errc::data_loss,
                    "the state snapshot lists lineage " + canonical_text(l.lineage) + " twice"};
    l.watermark = p.watermark();
    if (p.has_claim()) {
      upsert_claim c;
      c.claimed = p.claim().claimed();
      c.phase = p.claim().phase();
      c.reason = p.claim().reason();
      c.claimed_at_ms = p.claim().claimed_at_ms();
      c.updated_at_ms = p.claim().updated_at_ms();
      l.claim = std::move(c);
    }
    s.lineages.lineages.emplace(l.lineage, std::move(l));
  }
  return s;
}

namespace {
bool is_fraction(double x) { return std::isfinite(x) && x >= 0 && x <= 1; }
}  // namespace

status check_snapshot(const store_state& state) {
  auto bad = [](const std::string& what) {
    return status{errc::data_loss, "the snapshot is inconsistent: " + what};
  };
  const auto& index = state.revisions;
  for (const auto& [key, r] : index.revisions) {
    auto name = canonical_text(key);
    if (!(key == r.id)) return bad(name + " is stored under another id");
    if (!v1::Availability_IsValid(r.availability) || r.availability == v1::AVAILABILITY_UNSPECIFIED)
      return bad(name + " has availability " + std::to_string(r.availability));
    if (!v1::Residency_IsValid(r.residency))
      return bad(name + " has residency " + std::to_string(r.residency));
    if (!v1::Residency_IsValid(r.policy.preferred) || !v1::MigrationMode_IsValid(r.policy.mode))
      return bad(name + " has a policy out of range");
    // A ratio is a fraction; a NaN would even make the state unequal to itself.
    if (!is_fraction(r.observed_hot_ratio) || !is_fraction(r.policy.mixed_hot_ratio))
      return bad(name + " has a hot ratio outside [0, 1]");
    if (auto st = check_invariants(r, index); !st.ok()) return bad(st.message());
    if (!r.payload_group_id.empty() && r.payload_group_id != payload_group_id(r.id))
      return bad(name + " has the non-canonical group id '" + r.payload_group_id + "'");
    if (!r.manifest.manifest_key.empty() && r.manifest.manifest_key != manifest_key(r.id))
      return bad(name + " has the non-canonical manifest key '" + r.manifest.manifest_key + "'");
    for (const auto& [id, lease] : r.leases)
      if (id == 0 || id != lease.id || id > index.last_lease_id)
        return bad(name + " has lease " + std::to_string(id) + " but the last lease id is " +
                   std::to_string(index.last_lease_id));
    if (r.operation_id > index.last_operation_id)
      return bad(name + " has operation " + std::to_string(r.operation_id) +
                 " but the last operation id is " + std::to_string(index.last_operation_id));
  }
  for (const auto& [id, op] : index.operations) {
    auto name = "operation " + std::to_string(id);
    if (id == 0 || id != op.id || id > index.last_operation_id)
      return bad(name + " is not under the last operation id " + std::to_string(index.last_operation_id));
    if (!v1::OperationKind_IsValid(op.kind) || op.kind == v1::OPERATION_KIND_UNSPECIFIED)
      return bad(name + " has kind " + std::to_string(op.kind));
    if (!v1::Residency_IsValid(op.target)) return bad(name + " has target " + std::to_string(op.target));
    if (op.state > operation_state::cancelled)
      return bad(name + " has state " + std::to_string(static_cast<unsigned>(op.state)));
    if (!is_fraction(op.target_hot_ratio)) return bad(name + " has a hot ratio outside [0, 1]");
    const auto* r = index.find(op.revision);
    if (!r) return bad(name + " belongs to no revision");
    // The system never starts a migration to where the revision already is
    // (only a repair re-promotes in place), and residency is recorded at an
    // operation's end: a running automatic one toward it is not a real state.
    if (op.state == operation_state::running && op.automatic && op.kind == v1::MIGRATING &&
        op.target == r->residency && op.target != v1::RESIDENCY_MIXED)
      return bad(name + " is an automatic migration to " + v1::Residency_Name(op.target) +
                 ", where " + canonical_text(op.revision) + " is already");
    if (op.state == operation_state::running &&
        (r->operation_id != id || op.total_units != r->affinity_units))
      return bad(name + " is running but does not agree with " + canonical_text(op.revision) +
                 " (its active operation " + std::to_string(r->operation_id) + ", " +
                 std::to_string(r->affinity_units) + " units against " +
                 std::to_string(op.total_units) + ")");
  }
  for (const auto& [key, l] : state.lineages.lineages) {
    auto name = "lineage " + canonical_text(key);
    if (!(key == l.lineage) || key.generation != 0) return bad(name + " is stored under another key");
    if (l.claim) {
      if (!v1::ClaimPhase_IsValid(l.claim->phase) || l.claim->phase == v1::CLAIM_PHASE_UNSPECIFIED ||
          !v1::UpsertMode_IsValid(l.claim->mode()))
        return bad(name + " has a claim phase or mode out of range");
      if (!(lineage_key(l.claim->base()) == key))
        return bad(name + " has a claim on another lineage's base");
    }
    if (auto st = check_invariants(l); !st.ok()) return bad(st.message());
  }
  uint64_t hot = 0, cold = 0;
  for (const auto& [ref, o] : state.objects.objects) {
    if (!(ref == o.ref)) return bad("object '" + ref.key + "' is stored under another key");
    hot += o.hot ? o.size : 0;
    cold += o.cold ? o.size : 0;
  }
  if (hot != state.objects.hot_bytes || cold != state.objects.cold_bytes)
    return bad("the tier byte sums disagree with the objects");
  return {};
}

}  // namespace weightd::events
