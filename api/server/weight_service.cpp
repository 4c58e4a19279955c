#include "api/server/services.hpp"

#include <spdlog/spdlog.h>

#include "actors/errors.hpp"
#include "api/common/grpc_status.hpp"
#include "api/server/convert.hpp"
#include "api/server/service_support.hpp"
#include "api/server/streams.hpp"

namespace weightd::api {

namespace {

/// Commands with a principal are mutations: the journal records who asked.
template <class T, class = void>
struct is_mutation : std::false_type {};
template <class T>
struct is_mutation<T, std::void_t<decltype(std::declval<T&>().principal)>> : std::true_type {};

std::function<void(actors::revision_view&)> view_into(v1::RevisionView* resp) {
  return [resp](actors::revision_view& v) { to_proto(v, resp); };
}

std::function<void(actors::lease_view&)> lease_into(v1::Lease* resp) {
  return [resp](actors::lease_view& l) { to_proto(l, resp); };
}

/// BeginUpsert and AbortUpsert answer with the lineage's claim.
std::function<void(actors::lineage_view&)> claim_into(v1::UpsertClaim* resp) {
  return [resp](actors::lineage_view& l) {
    if (l.claim) to_proto(*l.claim, resp);
  };
}

std::function<void(events::operation_record&)> operation_into(v1::Operation* resp) {
  return [resp](events::operation_record& op) { to_proto(op, resp); };
}

class weight_service final : public v1::WeightService::CallbackService {
 public:
  weight_service(call_bridge& bridge, actors::node& node, server_options o, stream_limits& limits)
      : bridge_(bridge), registry_(node.registry()), reader_(node.reader()),
        local_reads_(o.local_reads), limits_(limits), auth_(o.auth),
        acknowledge_(write_acknowledger(o.sync, node, false)),
        acknowledge_bytes_(write_acknowledger(o.sync, node, true)) {}

  ServerUnaryReactor* BeginImport(CallbackServerContext* ctx, const v1::BeginImportRequest* req,
                                  v1::RevisionView* resp) override {
    return command<actors::revision_view>(ctx, *req, view_into(resp));
  }
  ServerUnaryReactor* CommitImport(CallbackServerContext* ctx, const v1::CommitImportRequest* req,
                                   v1::RevisionView* resp) override {
    return command<actors::revision_view>(ctx, *req, view_into(resp));
  }
  ServerUnaryReactor* AbortImport(CallbackServerContext* ctx, const v1::AbortImportRequest* req,
                                  v1::AbortImportResponse* resp) override {
    return command<actors::removal_result>(ctx, *req, [resp](actors::removal_result& r) {
      to_proto(r.view, resp->mutable_revision());
      for (const auto& k : r.removed_keys) resp->add_removed_keys(k);
      for (const auto& k : r.refused_keys) {
        auto* refused = resp->add_refused_keys();
        refused->set_key(k.key);
        refused->set_reason(k.reason);
      }
    });
  }
  ServerUnaryReactor* GetRevision(CallbackServerContext* ctx, const v1::GetRevisionRequest* req,
                                  v1::RevisionView* resp) override {
    return command<actors::revision_view>(ctx, *req, view_into(resp));
  }
  ServerUnaryReactor* ListRevisions(CallbackServerContext* ctx,
                                    const v1::ListRevisionsRequest* req,
                                    v1::ListRevisionsResponse* resp) override {
    return command<actors::revision_page>(ctx, *req, [resp](actors::revision_page& page) {
      for (const auto& v : page.revisions) to_proto(v, resp->add_revisions());
      resp->set_next_page_token(page.next_page_token);
    });
  }
  ServerUnaryReactor* UpdatePolicy(CallbackServerContext* ctx, const v1::UpdatePolicyRequest* req,
                                   v1::RevisionView* resp) override {
    return command<actors::revision_view>(ctx, *req, view_into(resp));
  }
  ServerUnaryReactor* RemoveRevision(CallbackServerContext* ctx,
                                     const v1::RemoveRevisionRequest* req,
                                     v1::RemoveRevisionResponse* resp) override {
    return command<actors::removal_result>(ctx, *req, [resp](actors::removal_result& r) {
      to_proto(r.view, resp->mutable_revision());
      for (const auto& k : r.removed_keys) resp->add_removed_keys(k);
    });
  }
  ServerUnaryReactor* AcquireLease(CallbackServerContext* ctx, const v1::AcquireLeaseRequest* req,
                                   v1::Lease* resp) override {
    return command<actors::lease_view>(ctx, *req, lease_into(resp));
  }
  ServerUnaryReactor* RenewLease(CallbackServerContext* ctx, const v1::RenewLeaseRequest* req,
                                 v1::Lease* resp) override {
    return command<actors::lease_view>(ctx, *req, lease_into(resp));
  }
  ServerUnaryReactor* ReleaseLease(CallbackServerContext* ctx, const v1::ReleaseLeaseRequest* req,
                                   v1::ReleaseLeaseResponse*) override {
    return command<actors::lease_view>(ctx, *req, [](actors::lease_view&) {});
  }
  ServerUnaryReactor* RevokeLease(CallbackServerContext* ctx, const v1::RevokeLeaseRequest* req,
                                  v1::Lease* resp) override {
    return command<actors::lease_view>(ctx, *req, lease_into(resp));
  }
  ServerUnaryReactor* ListLeases(CallbackServerContext* ctx, const v1::ListLeasesRequest* req,
                                 v1::ListLeasesResponse* resp) override {
    return command<actors::lease_list>(ctx, *req, [resp](actors::lease_list& list) {
      for (const auto& l : list.leases) to_proto(l, resp->add_leases());
    });
  }
  ServerUnaryReactor* Migrate(CallbackServerContext* ctx, const v1::MigrateRequest* req,
                              v1::Operation* resp) override {
    return command<events::operation_record>(ctx, *req, operation_into(resp));
  }
  ServerUnaryReactor* GetOperation(CallbackServerContext* ctx, const v1::GetOperationRequest* req,
                                   v1::Operation* resp) override {
    return command<events::operation_record>(ctx, *req, operation_into(resp));
  }
  ServerUnaryReactor* CancelOperation(CallbackServerContext* ctx,
                                      const v1::CancelOperationRequest* req,
                                      v1::Operation* resp) override {
    return command<events::operation_record>(ctx, *req, operation_into(resp));
  }
  ServerUnaryReactor* Reconcile(CallbackServerContext* ctx, const v1::ReconcileRequest* req,
                                v1::ReconcileResponse* resp) override {
    return command<actors::reconcile_report>(
        ctx, *req, [resp](actors::reconcile_report& r) { to_proto(r, resp); });
  }
  ServerUnaryReactor* History(CallbackServerContext* ctx, const v1::HistoryRequest* req,
                              v1::HistoryResponse* resp) override {
    return answer_history(bridge_, reader_, *auth_, ctx, *req, resp);
  }
  ServerUnaryReactor* OpenLocal(CallbackServerContext* ctx, const v1::OpenLocalRequest* req,
                                v1::OpenLocalResponse* resp) override {
    if (!local_reads_)
      return reject(ctx, {errc::permission_denied,
                          "local reads are off on this daemon (--local-reads=false); read the "
                          "objects with Get instead"});
    return command<actors::local_listing>(
        ctx, *req, [resp](actors::local_listing& l) { to_proto(l, resp); });
  }
  ServerUnaryReactor* BeginUpsert(CallbackServerContext* ctx, const v1::BeginUpsertRequest* req,
                                  v1::UpsertClaim* resp) override {
    return command<actors::lineage_view>(ctx, *req, claim_into(resp));
  }
  ServerUnaryReactor* CommitUpsert(CallbackServerContext* ctx, const v1::CommitUpsertRequest* req,
                                   v1::RevisionView* resp) override {
    return command<actors::revision_view>(ctx, *req, view_into(resp));
  }
  ServerUnaryReactor* AbortUpsert(CallbackServerContext* ctx, const v1::AbortUpsertRequest* req,
                                  v1::UpsertClaim* resp) override {
    return command<actors::lineage_view>(ctx, *req, claim_into(resp));
  }
  ServerUnaryReactor* GetLineage(CallbackServerContext* ctx, const v1::GetLineageRequest* req,
                                 v1::Lineage* resp) override {
    return command<actors::lineage_view>(ctx, *req,
                                         [resp](actors::lineage_view& l) { to_proto(l, resp); });
  }
  grpc::ServerWriteReactor<events::v1::Envelope>* Watch(CallbackServerContext* ctx,
                                                        const v1::WatchRequest* req) override {
    return start_watch(reader_, limits_, *auth_, ctx, *req);
  }

 private:
  /// Converts the request (bad input fails here, naming the field), records
  /// who asked on mutations, and sends the command to the registry.
  template <class Reply, class Request, class Fill>
  ServerUnaryReactor* command(CallbackServerContext* ctx, const Request& req, Fill fill) {
    auto admitted = admit(*auth_, ctx, req);
    if (!admitted) return reject(ctx, admitted.error());
    const auto& [who, request] = *admitted;
    auto cmd = from_proto(request);
    if (!cmd) return reject(ctx, cmd.error());
    using command_type = std::decay_t<decltype(*cmd)>;
    // The command's fields are checked once, where every entry passes: the
    // registry (core/validate.hpp's check_command).
    if constexpr (is_mutation<command_type>::value) cmd->principal = who.principal;
    if constexpr (names_by_id<command_type>::value)  // a lease or operation of another tenant
      cmd->caller_tenant = who.any_tenant() ? "" : who.tenant;
    // SPEC §11 Acknowledgement: a write is answered once --sync-standbys
    // standbys hold it; a commit, once they hold its members' bytes too.
    if constexpr (is_mutation<command_type>::value) {
      constexpr bool commits = std::is_same_v<command_type, actors::commit_import> ||
                               std::is_same_v<command_type, actors::commit_upsert>;
      return bridge_.call_write<Reply>(ctx, commits ? acknowledge_bytes_ : acknowledge_, registry_,
                                       fill, std::move(*cmd));
    }
    return bridge_.call<Reply>(ctx, registry_, fill, std::move(*cmd));
  }

  call_bridge& bridge_;
  actors::registry_actor registry_;
  actors::journal_reader_actor reader_;
  bool local_reads_;
  stream_limits& limits_;
  std::shared_ptr<authenticator> auth_;
  call_bridge::acknowledger acknowledge_, acknowledge_bytes_;  // null: answered at once
};

}  // namespace

ServerUnaryReactor* answer_history(call_bridge& bridge, actors::journal_reader_actor reader,
                                   const authenticator& auth, CallbackServerContext* ctx,
                                   const v1::HistoryRequest& req, v1::HistoryResponse* resp) {
  auto admitted = admit(auth, ctx, req);
  if (!admitted) return reject(ctx, admitted.error());
  auto query = from_proto(admitted->second);
  if (!query) return reject(ctx, query.error());
  return bridge.call<actors::history_page>(
      ctx, reader,
      [resp](actors::history_page& page) {
        for (auto& e : page.events) *resp->add_events() = std::move(e);
        resp->set_next_page_token(history_page_token(page.next_after));
      },
      actors::history_atom::value, std::move(*query));
}

std::unique_ptr<grpc::Service> make_weight_service(call_bridge& bridge, actors::node& node,
                                                   const server_options& o, stream_limits& limits) {
  return std::make_unique<weight_service>(bridge, node, o, limits);
}

}  // namespace weightd::api
