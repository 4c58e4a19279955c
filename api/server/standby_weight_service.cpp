// WeightService on a standby (SPEC §11 Standby serving): the reads from its
// fold, History and Watch from its journal, and NOT_LEADER naming the leader
// for everything that would change the store.
//
// GetRevision, ListRevisions, GetOperation and GetLineage run the leader's
// rules (core/reads.hpp) on the follower's fold, under the lock its fold
// step takes: a lookup or a page, on the gRPC thread, with no I/O. History
// and Watch are the leader's own code over the standby's journal (a journal
// reader actor; the follower is its writer). What a standby shows is what
// its journal holds: durable here, acknowledged by the leader.
#include <spdlog/spdlog.h>

#include "api/server/convert.hpp"
#include "api/server/service_support.hpp"
#include "api/server/services.hpp"
#include "api/server/standby_server.hpp"
#include "api/server/streams.hpp"
#include "core/reads.hpp"

namespace weightd::api {

namespace {

/// Every mutation: UNAVAILABLE, NOT_LEADER, the leader in the trailer.
#define WEIGHTD_NOT_LEADER(Rpc, Request, Response)                                   \
  ServerUnaryReactor* Rpc(CallbackServerContext* ctx, const v1::Request*, v1::Response*) \
      override {                                                                     \
    return reject_not_leader(ctx, leader_, #Rpc);                                    \
  }

class standby_weight_service final : public v1::WeightService::CallbackService {
 public:
  standby_weight_service(const standby_reads& reads, std::string leader)
      : reads_(reads), leader_(std::move(leader)) {}

  ServerUnaryReactor* GetRevision(CallbackServerContext* ctx, const v1::GetRevisionRequest* req,
                                  v1::RevisionView* resp) override {
    return read(ctx, *req, actors::get_revision_in,
                [resp](const actors::revision_view& v) { to_proto(v, resp); });
  }
  ServerUnaryReactor* ListRevisions(CallbackServerContext* ctx,
                                    const v1::ListRevisionsRequest* req,
                                    v1::ListRevisionsResponse* resp) override {
    return read(ctx, *req, actors::list_revisions_in, [resp](const actors::revision_page& page) {
      for (const auto& v : page.revisions) to_proto(v, resp->add_revisions());
      resp->set_next_page_token(page.next_page_token);
    });
  }
  ServerUnaryReactor* GetOperation(CallbackServerContext* ctx, const v1::GetOperationRequest* req,
                                   v1::Operation* resp) override {
    return read(ctx, *req, actors::get_operation_in,
                [resp](const events::operation_record& op) { to_proto(op, resp); });
  }
  ServerUnaryReactor* GetLineage(CallbackServerContext* ctx, const v1::GetLineageRequest* req,
                                 v1::Lineage* resp) override {
    return read(ctx, *req, actors::get_lineage_in,
                [resp](const actors::lineage_view& l) { to_proto(l, resp); });
  }
  ServerUnaryReactor* History(CallbackServerContext* ctx, const v1::HistoryRequest* req,
                              v1::HistoryResponse* resp) override {
    if (auto st = confirmed(); !st.ok()) return reject(ctx, st);
    return answer_history(reads_.bridge, reads_.reader(), *reads_.auth, ctx, *req, resp);
  }
  grpc::ServerWriteReactor<events::v1::Envelope>* Watch(CallbackServerContext* ctx,
                                                        const v1::WatchRequest* req) override {
    auto st = confirmed();
    return start_watch(st.ok() ? reads_.reader() : actors::journal_reader_actor{}, reads_.limits,
                       *reads_.auth, ctx, *req, st);
  }

  WEIGHTD_NOT_LEADER(BeginImport, BeginImportRequest, RevisionView)
  WEIGHTD_NOT_LEADER(CommitImport, CommitImportRequest, RevisionView)
  WEIGHTD_NOT_LEADER(AbortImport, AbortImportRequest, AbortImportResponse)
  WEIGHTD_NOT_LEADER(UpdatePolicy, UpdatePolicyRequest, RevisionView)
  WEIGHTD_NOT_LEADER(RemoveRevision, RemoveRevisionRequest, RemoveRevisionResponse)
  WEIGHTD_NOT_LEADER(AcquireLease, AcquireLeaseRequest, Lease)
  WEIGHTD_NOT_LEADER(RenewLease, RenewLeaseRequest, Lease)
  WEIGHTD_NOT_LEADER(ReleaseLease, ReleaseLeaseRequest, ReleaseLeaseResponse)
  WEIGHTD_NOT_LEADER(ListLeases, ListLeasesRequest, ListLeasesResponse)
  WEIGHTD_NOT_LEADER(RevokeLease, RevokeLeaseRequest, Lease)
  WEIGHTD_NOT_LEADER(Migrate, MigrateRequest, Operation)
  WEIGHTD_NOT_LEADER(CancelOperation, CancelOperationRequest, Operation)
  WEIGHTD_NOT_LEADER(Reconcile, ReconcileRequest, ReconcileResponse)
  WEIGHTD_NOT_LEADER(BeginUpsert, BeginUpsertRequest, UpsertClaim)
  WEIGHTD_NOT_LEADER(CommitUpsert, CommitUpsertRequest, RevisionView)
  WEIGHTD_NOT_LEADER(AbortUpsert, AbortUpsertRequest, UpsertClaim)
  WEIGHTD_NOT_LEADER(OpenLocal, OpenLocalRequest, OpenLocalResponse)

 private:
  /// Admits the caller (SPEC §9), converts the request (bad input fails
  /// here, naming the field), answers it from the fold.
  template <class Request, class Answer, class Fill>
  ServerUnaryReactor* read(CallbackServerContext* ctx, const Request& req, Answer answer,
                           Fill fill) {
    auto admitted = admit(*reads_.auth, ctx, req);
    if (!admitted) return reject(ctx, admitted.error());
    if (auto st = confirmed(); !st.ok()) return reject(ctx, st);
    const auto& [who, request] = *admitted;
    auto cmd = from_proto(request);
    if (!cmd) return reject(ctx, cmd.error());
    if constexpr (names_by_id<std::decay_t<decltype(*cmd)>>::value)
      cmd->caller_tenant = who.any_tenant() ? "" : who.tenant;
    auto answered = reads_.standby.read(
        [&](const events::store_state& fold) { return answer(fold, *cmd); });
    if (!answered) return reject(ctx, answered.error());
    fill(*answered);
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  /// A standby serves reads once its leader welcomed it in this run: until
  /// then its journal may hold a former leader's diverged tail, which the
  /// leader's first message would have it set aside.
  weightd::status confirmed() const {
    if (reads_.standby.status().streams > 0) return {};
    return {errc::not_ready, "this standby has not reached its leader " + leader_ +
                                 " since it started, so its copy is unconfirmed; read from the "
                                 "leader, or wait until `weightctl status` says following yes"};
  }

  const standby_reads& reads_;
  std::string leader_;
};

#undef WEIGHTD_NOT_LEADER

}  // namespace

std::unique_ptr<grpc::Service> make_standby_weight_service(const standby_reads& reads,
                                                           const std::string& leader) {
  return std::make_unique<standby_weight_service>(reads, leader);
}

}  // namespace weightd::api
