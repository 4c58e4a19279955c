#include "api/server/convert.hpp"

#include <charconv>

#include "events/event_type.hpp"

namespace weightd::api {

namespace ev1 = events::v1;

namespace {

result<events::revision_key> required_id(bool has, const ev1::RevisionId& id) {
  if (!has) return status{errc::invalid_argument, "id is required"};
  return events::revision_key::from_proto(id);  // the registry checks the parts
}

v1::OperationState state_of(events::operation_state s) {
  switch (s) {
    case events::operation_state::running: return v1::RUNNING;
    case events::operation_state::completed: return v1::COMPLETED;
    case events::operation_state::failed: return v1::FAILED;
    case events::operation_state::cancelled: return v1::CANCELLED;
  }
  return v1::OPERATION_STATE_UNSPECIFIED;
}

}  // namespace

void to_proto(const events::operation_record& op, v1::Operation* out) {
  out->set_operation_id(op.id);
  *out->mutable_id() = op.revision.to_proto();
  out->set_kind(op.kind);
  out->set_target(op.target);
  out->set_target_hot_ratio(op.target_hot_ratio);
  out->set_processed_units(op.processed_units);
  out->set_total_units(op.total_units);
  out->set_processed_bytes(op.processed_bytes);
  out->set_total_bytes(op.total_bytes);
  out->set_cursor(op.cursor);
  out->set_state(state_of(op.state));
  out->set_message(op.message);
  out->set_started_at_ms(op.started_at_ms);
  out->set_updated_at_ms(op.updated_at_ms);
}

void to_proto(const actors::revision_view& view, v1::RevisionView* out) {
  const auto& r = view.record;
  *out->mutable_id() = r.id.to_proto();
  out->set_availability(r.availability);
  out->set_residency(r.residency);
  *out->mutable_policy() = r.policy.to_proto();
  out->set_metadata_generation(r.metadata_generation);
  if (!r.manifest.manifest_key.empty()) *out->mutable_manifest() = r.manifest.to_proto();
  for (const auto& k : r.payload_keys) out->add_payload_keys(k);
  out->set_affinity_count(r.affinity_count ? r.affinity_count : r.affinity_units);
  out->set_observed_hot_ratio(r.observed_hot_ratio);
  out->set_operation_id(r.operation_id);
  out->set_created_at_ms(r.created_at_ms);
  out->set_updated_at_ms(r.updated_at_ms);
  out->set_last_accessed_at_ms(r.last_accessed_at_ms);
  out->set_active_lease_count(view.active_lease_count);
  out->set_nearest_lease_expiry_ms(view.nearest_lease_expiry_ms);
  out->set_drain_deadline_ms(r.drain_deadline_ms);
  out->set_retired_by(r.retired_by);
  if (view.operation) to_proto(*view.operation, out->mutable_operation());
}

void to_proto(const actors::object_info& info, v1::ObjectInfo* out) {
  const auto& o = info.record;
  out->set_tenant(o.ref.tenant);
  out->set_key(o.ref.key);
  out->set_data_type(o.data_type);
  out->set_group_id(o.group_id);
  out->set_affinity_id(o.affinity_id);
  out->set_size(o.size);
  out->set_checksum_algorithm(o.checksum_algorithm);
  out->set_checksum(o.checksum);
  out->set_sha256(o.sha256);
  out->set_hard_pin(o.hard_pin);
  out->set_created_at_ms(o.created_at_ms);
  out->set_last_access_ms(info.last_access_ms);
  if (o.hot) out->add_replicas(ev1::TIER_HOT);
  if (o.cold) out->add_replicas(ev1::TIER_COLD);
  out->set_readable(o.readable());
  out->set_managed_by(info.managed_by);
  out->set_read_lease_expiry_ms(info.read_lease_expiry_ms);
}

result<actors::begin_import> from_proto(const v1::BeginImportRequest& req) {
  auto id = required_id(req.has_id(), req.id());
  if (!id) return id.error();
  actors::begin_import cmd;
  cmd.id = *id;
  cmd.payload_group_id = req.payload_group_id();
  cmd.expected_payload_count = req.expected_payload_count();
  cmd.expected_logical_bytes = req.expected_logical_bytes();
  cmd.has_policy = req.has_policy();
  if (req.has_policy()) cmd.policy = events::policy::from_proto(req.policy());
  cmd.affinity_count = req.affinity_count();
  cmd.request_id = req.request_id();
  return cmd;
}

result<actors::commit_import> from_proto(const v1::CommitImportRequest& req) {
  auto id = required_id(req.has_id(), req.id());
  if (!id) return id.error();
  if (!req.has_manifest()) return status{errc::invalid_argument, "manifest is required"};
  return actors::commit_import{*id, req.expected_metadata_generation(),
                               events::manifest_ref::from_proto(req.manifest()),
                               {req.payload_keys().begin(), req.payload_keys().end()}, "",
                               req.request_id()};
}

// ------------------------------------------------------------ lineages

namespace {

/// A nested request's id: unset means `id`; set, it must be `id` (`field` names it).
result<events::revision_key> same_id(bool has, const ev1::RevisionId& nested,
                                     const events::revision_key& id, const std::string& field) {
  if (!has) return id;
  auto given = events::revision_key::from_proto(nested);
  if (!(given == id))
    return status{errc::invalid_argument, field + " names " + events::canonical_text(given) +
                                              ", not the target " + events::canonical_text(id) +
                                              "; leave it unset"};
  return id;
}

}  // namespace

result<actors::begin_upsert> from_proto(const v1::BeginUpsertRequest& req) {
  if (!req.has_base()) return status{errc::invalid_argument, "base is required"};
  if (!v1::UpsertMode_IsValid(req.mode()))
    return status{errc::invalid_argument, "mode must be PUT_FIRST or DELETE_FIRST"};
  actors::begin_upsert cmd;
  cmd.base = events::revision_key::from_proto(req.base());
  cmd.expected_generation = req.expected_metadata_generation();
  cmd.target_generation = req.target_generation();
  cmd.mode = req.mode() == v1::DELETE_FIRST ? ev1::UPSERT_DELETE_FIRST : ev1::UPSERT_PUT_FIRST;
  cmd.request_id = req.request_id();
  auto target = cmd.base;
  target.generation = cmd.target_generation;
  auto id = same_id(req.import().has_id(), req.import().id(), target, "import.id");
  if (!id) return id.error();
  auto import_req = req.import();
  *import_req.mutable_id() = target.to_proto();
  auto import = from_proto(import_req);
  if (!import) return import.error();
  cmd.target = std::move(*import);
  return cmd;
}

result<actors::commit_upsert> from_proto(const v1::CommitUpsertRequest& req) {
  if (!req.has_target()) return status{errc::invalid_argument, "target is required"};
  auto target = events::revision_key::from_proto(req.target());
  auto id = same_id(req.commit().has_id(), req.commit().id(), target, "commit.id");
  if (!id) return id.error();
  auto commit_req = req.commit();
  *commit_req.mutable_id() = target.to_proto();
  auto commit = from_proto(commit_req);
  if (!commit) return status{commit.error().code(), "commit." + commit.error().message()};
  actors::commit_upsert cmd;
  cmd.commit = std::move(*commit);
  cmd.request_id = req.request_id();
  return cmd;
}

result<actors::abort_upsert> from_proto(const v1::AbortUpsertRequest& req) {
  if (!req.has_base()) return status{errc::invalid_argument, "base is required"};
  return actors::abort_upsert{events::revision_key::from_proto(req.base()), "", req.request_id()};
}

result<actors::get_lineage> from_proto(const v1::GetLineageRequest& req) {
  events::revision_key lineage;
  lineage.tenant = req.tenant();
  lineage.ns = req.ns();
  lineage.resource = req.resource();
  lineage.revision = req.revision();
  return actors::get_lineage{lineage};
}

void to_proto(const events::upsert_claim& claim, v1::UpsertClaim* out) {
  out->set_request_id(claim.request_id());
  out->set_base_generation(claim.base_generation());
  out->set_target_generation(claim.target_generation());
  out->set_mode(claim.mode() == ev1::UPSERT_DELETE_FIRST ? v1::DELETE_FIRST : v1::PUT_FIRST);
  out->set_phase(events::phase_name(claim.phase));
}

void to_proto(const actors::lineage_view& lineage, v1::Lineage* out) {
  out->set_watermark(lineage.watermark);
  if (lineage.claim) to_proto(*lineage.claim, out->mutable_claim());
}

result<actors::abort_import> from_proto(const v1::AbortImportRequest& req) {
  auto id = required_id(req.has_id(), req.id());
  if (!id) return id.error();
  return actors::abort_import{*id, req.expected_metadata_generation(),
                              {req.keys_to_remove().begin(), req.keys_to_remove().end()}, "",
                              req.request_id()};
}

result<actors::get_revision> from_proto(const v1::GetRevisionRequest& req) {
  auto id = required_id(req.has_id(), req.id());
  if (!id) return id.error();
  return actors::get_revision{*id, req.include_hidden()};
}

result<actors::list_revisions> from_proto(const v1::ListRevisionsRequest& req) {
  actors::list_revisions q;
  q.tenant = req.tenant();
  q.ns = req.ns();
  q.resource = req.resource();
  for (int s : req.states()) {
    if (!ev1::Availability_IsValid(s) || s == ev1::AVAILABILITY_UNSPECIFIED)
      return status{errc::invalid_argument, "states has an unknown availability " + std::to_string(s)};
    q.states.push_back(static_cast<ev1::Availability>(s));
  }
  q.page_token = req.page_token();
  q.limit = req.limit();
  return q;
}

result<actors::update_policy> from_proto(const v1::UpdatePolicyRequest& req) {
  auto id = required_id(req.has_id(), req.id());
  if (!id) return id.error();
  if (!req.has_policy()) return status{errc::invalid_argument, "policy is required"};
  return actors::update_policy{*id, req.expected_metadata_generation(),
                               events::policy::from_proto(req.policy()), "", req.request_id()};
}

result<actors::remove_revision> from_proto(const v1::RemoveRevisionRequest& req) {
  auto id = required_id(req.has_id(), req.id());
  if (!id) return id.error();
  if (req.drain_timeout_ms() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return status{errc::invalid_argument, "drain_timeout_ms is too large"};
  return actors::remove_revision{*id, req.expected_metadata_generation(),
                                 static_cast<int64_t>(req.drain_timeout_ms()), "",
                                 req.request_id()};
}

void to_proto(const actors::lease_view& lease, v1::Lease* out) {
  out->set_lease_id(lease.lease.id);
  if (!lease.id.tenant.empty()) *out->mutable_id() = lease.id.to_proto();
  out->set_holder(lease.lease.holder);
  out->set_expiry_ms(lease.lease.expiry_ms);
}

result<actors::acquire_lease> from_proto(const v1::AcquireLeaseRequest& req) {
  auto id = required_id(req.has_id(), req.id());
  if (!id) return id.error();
  return actors::acquire_lease{*id, req.expected_metadata_generation(), req.holder(), req.ttl_ms(),
                               "", req.request_id()};
}

result<actors::renew_lease> from_proto(const v1::RenewLeaseRequest& req) {
  return actors::renew_lease{req.lease_id(), req.ttl_ms(), "", req.request_id()};
}

result<actors::release_lease> from_proto(const v1::ReleaseLeaseRequest& req) {
  return actors::release_lease{req.lease_id(), "", req.request_id()};
}

result<actors::revoke_lease> from_proto(const v1::RevokeLeaseRequest& req) {
  if (req.reason().size() > 1024)
    return status{errc::invalid_argument, "reason is longer than 1024 bytes"};
  return actors::revoke_lease{req.lease_id(), req.reason(), "", req.request_id()};
}

result<actors::list_leases> from_proto(const v1::ListLeasesRequest& req) {
  auto id = required_id(req.has_id(), req.id());
  if (!id) return id.error();
  return actors::list_leases{*id};
}

result<actors::migrate_revision> from_proto(const v1::MigrateRequest& req) {
  auto id = required_id(req.has_id(), req.id());
  if (!id) return id.error();
  return actors::migrate_revision{*id, req.expected_metadata_generation(), req.target(),
                                  req.mixed_hot_ratio(), "", req.request_id()};
}

result<actors::get_operation> from_proto(const v1::GetOperationRequest& req) {
  return actors::get_operation{req.operation_id()};
}

result<actors::cancel_operation> from_proto(const v1::CancelOperationRequest& req) {
  return actors::cancel_operation{req.operation_id(), "", req.request_id()};
}

result<actors::reconcile_request> from_proto(const v1::ReconcileRequest& req) {
  return actors::reconcile_request{req.dry_run()};
}

void to_proto(const actors::reconcile_report& report, v1::ReconcileResponse* out) {
  for (const auto& d : report.decisions) {
    auto* p = out->add_decisions();
    *p->mutable_id() = d.id.to_proto();
    p->set_action(d.action);
    p->set_target(d.target);
    p->set_reason(d.reason);
  }
  out->set_pressure(report.pressure);
  out->set_relief(report.relief);
  out->set_hot_used_bytes(report.hot_used_bytes);
  out->set_hot_capacity_bytes(report.hot_capacity_bytes);
}

result<actors::put_request> from_proto(const v1::PutHeader& h) {
  if (!ev1::Tier_IsValid(h.tier())) return status{errc::invalid_argument, "tier is unknown"};
  actors::put_request r;
  r.tenant = h.tenant();
  r.key = h.key();
  r.data_type = h.data_type();
  r.group_id = h.group_id();
  r.affinity_id = h.affinity_id();
  r.size = h.size();
  r.tier = h.tier();
  r.hard_pin = h.hard_pin();
  r.expected_checksum = h.checksum();
  r.expected_algorithm = h.checksum_algorithm();
  return r;
}

// ------------------------------------------------ history, watch, local reads

namespace {

constexpr size_t kMaxWatchTypes = 64;
constexpr size_t kMaxStreamPrefix = 8192;

void to_proto(const actors::local_file& f, v1::LocalFile* out) {
  out->set_key(f.key);
  out->set_path(f.path);
  out->set_offset(0);
  out->set_size(f.size);
  out->set_checksum_algorithm(f.checksum_algorithm);
  out->set_checksum(f.checksum);
  out->set_sha256(f.sha256);
  out->set_tier(f.tier);
}

}  // namespace

std::string history_page_token(uint64_t next_after) {
  return next_after ? std::to_string(next_after) : std::string{};
}

result<actors::history_query> from_proto(const v1::HistoryRequest& req) {
  auto id = required_id(req.has_id(), req.id());
  if (!id) return id.error();
  auto checked = events::checked_revision_key(id->to_proto());
  if (!checked) return checked.error();
  actors::history_query q{*checked, 0, req.limit()};
  const auto& token = req.page_token();
  if (!token.empty()) {
    // A token is the decimal stream seq this server handed out; nothing else parses.
    auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), q.after_stream_seq);
    if (ec != std::errc{} || end != token.data() + token.size() || q.after_stream_seq == 0)
      return status{errc::invalid_argument,
                    "page_token is not one this server handed out; pass next_page_token as "
                    "it came, or \"\" for the first page"};
  }
  return q;
}

result<actors::open_local> from_proto(const v1::OpenLocalRequest& req) {
  auto id = required_id(req.has_id(), req.id());
  if (!id) return id.error();
  if (req.lease_id() == 0)
    return status{errc::invalid_argument, "lease_id is required: local reads need a live lease"};
  return actors::open_local{*id, req.lease_id()};
}

result<actors::watch_pull> from_proto(const v1::WatchRequest& req) {
  actors::watch_pull pull;
  pull.from_seq = req.from_seq();
  if (req.stream_prefix().size() > kMaxStreamPrefix)
    return status{errc::invalid_argument, "stream_prefix has " +
                                              std::to_string(req.stream_prefix().size()) +
                                              " characters; the limit is " +
                                              std::to_string(kMaxStreamPrefix)};
  pull.filter.stream_prefix = req.stream_prefix();
  if (static_cast<size_t>(req.types_size()) > kMaxWatchTypes)
    return status{errc::invalid_argument, "types has " + std::to_string(req.types_size()) +
                                              " entries; the limit is " +
                                              std::to_string(kMaxWatchTypes)};
  for (const auto& t : req.types()) {
    if (!events::is_event_type_name(t))
      return status{errc::invalid_argument,
                    "types: '" + (t.size() > 64 ? t.substr(0, 64) + "..." : t) +
                        "' is not an event type (the names are the catalog's, e.g. "
                        "lease_granted; weightctl journal dump --help lists them)"};
    pull.filter.types.push_back(t);
  }
  return pull;
}

void to_proto(const actors::local_listing& listing, v1::OpenLocalResponse* out) {
  for (const auto& f : listing.payloads) to_proto(f, out->add_payloads());
  to_proto(listing.manifest, out->mutable_manifest());
  *out->mutable_id() = listing.id.to_proto();
}

}  // namespace weightd::api
