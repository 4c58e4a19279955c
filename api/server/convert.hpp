// Wire messages (weightd.proto) <-> actor commands and views. Requests that
// are malformed before any actor sees them fail here, naming the field.
#pragma once

#include "actors/actors.hpp"
#include "api/weightd.pb.h"

namespace weightd::api {

void to_proto(const events::operation_record& op, v1::Operation* out);
void to_proto(const actors::revision_view& view, v1::RevisionView* out);
void to_proto(const actors::object_info& info, v1::ObjectInfo* out);
void to_proto(const actors::lease_view& lease, v1::Lease* out);

result<actors::begin_import> from_proto(const v1::BeginImportRequest& req);
result<actors::commit_import> from_proto(const v1::CommitImportRequest& req);
result<actors::abort_import> from_proto(const v1::AbortImportRequest& req);
result<actors::get_revision> from_proto(const v1::GetRevisionRequest& req);
result<actors::list_revisions> from_proto(const v1::ListRevisionsRequest& req);
result<actors::update_policy> from_proto(const v1::UpdatePolicyRequest& req);
result<actors::remove_revision> from_proto(const v1::RemoveRevisionRequest& req);
result<actors::acquire_lease> from_proto(const v1::AcquireLeaseRequest& req);
result<actors::renew_lease> from_proto(const v1::RenewLeaseRequest& req);
result<actors::release_lease> from_proto(const v1::ReleaseLeaseRequest& req);
result<actors::revoke_lease> from_proto(const v1::RevokeLeaseRequest& req);
result<actors::list_leases> from_proto(const v1::ListLeasesRequest& req);
result<actors::migrate_revision> from_proto(const v1::MigrateRequest& req);
result<actors::get_operation> from_proto(const v1::GetOperationRequest& req);
result<actors::cancel_operation> from_proto(const v1::CancelOperationRequest& req);
result<actors::reconcile_request> from_proto(const v1::ReconcileRequest& req);
result<actors::history_query> from_proto(const v1::HistoryRequest& req);
result<actors::open_local> from_proto(const v1::OpenLocalRequest& req);
/// A Watch's position and filter (the sink is the server's).
result<actors::watch_pull> from_proto(const v1::WatchRequest& req);
void to_proto(const actors::local_listing& listing, v1::OpenLocalResponse* out);
result<actors::begin_upsert> from_proto(const v1::BeginUpsertRequest& req);
result<actors::commit_upsert> from_proto(const v1::CommitUpsertRequest& req);
result<actors::abort_upsert> from_proto(const v1::AbortUpsertRequest& req);
result<actors::get_lineage> from_proto(const v1::GetLineageRequest& req);
void to_proto(const events::upsert_claim& claim, v1::UpsertClaim* out);
void to_proto(const actors::lineage_view& lineage, v1::Lineage* out);
/// History's page token: the last stream seq shown, "" at the end.
std::string history_page_token(uint64_t next_after);
void to_proto(const actors::reconcile_report& report, v1::ReconcileResponse* out);
result<actors::put_request> from_proto(const v1::PutHeader& header);

}  // namespace weightd::api
