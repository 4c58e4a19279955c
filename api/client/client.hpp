// The C++ client of the gRPC API (weightctl and tests use it). Every call has
// a deadline; calls that fail before reaching weightd (transport errors) are
// retried with backoff — safe for every RPC, because mutations are fenced by
// expected_metadata_generation and recognised as retries by their digest.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>

#include "api/weightd.grpc.pb.h"
#include "events/status.hpp"

namespace weightd::api {

struct client_options {
  std::string address = "127.0.0.1:7070";
  std::chrono::milliseconds deadline{30'000};  // per call (streams: per 4 MiB chunk)
  int attempts = 3;                             // transport failures are retried
  // Stamped on every request that has a request_id field and none of its
  // own, so the daemon's log lines and the journal's envelopes name the
  // command that caused them ("" = none).
  std::string request_id;
  // SPEC §9: the bearer token sent with every call ("" = none), and TLS: the
  // CA that signed the daemon's certificate (set: TLS), a client certificate
  // and key for mutual TLS. PEM file paths.
  std::string token;
  std::string tls_ca_file, tls_cert_file, tls_key_file;
};

/// The channel's credentials: TLS when a CA or a client certificate is named.
result<std::shared_ptr<grpc::ChannelCredentials>> channel_credentials(const client_options& o);

/// A request id no other command will have: "<prefix>-" and 16 hex digits.
std::string new_request_id(const std::string& prefix);

/// Called with bytes done after each chunk of a transfer.
/// Called after each chunk sent; false stops the put (it then fails with
/// "stopped by the caller" and stores nothing).
using progress_fn = std::function<bool(uint64_t bytes_done)>;

class client {
 public:
  explicit client(client_options options = {});

  result<v1::RevisionView> begin_import(const v1::BeginImportRequest& req);
  result<v1::RevisionView> commit_import(const v1::CommitImportRequest& req);
  result<v1::AbortImportResponse> abort_import(const v1::AbortImportRequest& req);
  result<v1::RevisionView> get_revision(const v1::GetRevisionRequest& req);
  result<v1::ListRevisionsResponse> list_revisions(const v1::ListRevisionsRequest& req);
  result<v1::RevisionView> update_policy(const v1::UpdatePolicyRequest& req);
  result<v1::RemoveRevisionResponse> remove_revision(const v1::RemoveRevisionRequest& req);
  result<v1::Lease> acquire_lease(const v1::AcquireLeaseRequest& req);
  result<v1::Lease> renew_lease(const v1::RenewLeaseRequest& req);
  result<v1::ReleaseLeaseResponse> release_lease(const v1::ReleaseLeaseRequest& req);
  result<v1::ListLeasesResponse> list_leases(const v1::ListLeasesRequest& req);
  result<v1::Lease> revoke_lease(const v1::RevokeLeaseRequest& req);
  result<v1::Operation> migrate(const v1::MigrateRequest& req);
  result<v1::Operation> get_operation(const v1::GetOperationRequest& req);
  result<v1::Operation> cancel_operation(const v1::CancelOperationRequest& req);
  result<v1::ReconcileResponse> reconcile(const v1::ReconcileRequest& req);
  result<v1::StatusResponse> server_status();
  /// SPEC §11: a standby becomes the leader (see PromoteRequest).
  result<v1::PromoteResponse> promote(const v1::PromoteRequest& req);
  /// Lineage replacement (SPEC §4 upsert).
  result<v1::UpsertClaim> begin_upsert(const v1::BeginUpsertRequest& req);
  result<v1::RevisionView> commit_upsert(const v1::CommitUpsertRequest& req);
  result<v1::UpsertClaim> abort_upsert(const v1::AbortUpsertRequest& req);
  result<v1::Lineage> get_lineage(const v1::GetLineageRequest& req);
  /// One page of a revision's events (History); next_page_token "" at the end.
  result<v1::HistoryResponse> history(const v1::HistoryRequest& req);
  /// The replica files of a revision under a live lease (SPEC §4 Local
  /// reads); local_mapping.hpp maps them read-only.
  result<v1::OpenLocalResponse> open_local(const v1::OpenLocalRequest& req);

  /// Watch: calls `on_event` for each event from req.from_seq in order until
  /// it returns false (the stream is cancelled; ok is returned) or the stream
  /// ends (its status: the daemon cut a stalled watcher, went away, ...).
  /// No deadline: a watch lasts as long as the caller wants it. With `ctx`
  /// (the caller's, fresh), another thread may stop it with ctx->TryCancel().
  status watch(const v1::WatchRequest& req,
               const std::function<bool(const events::v1::Envelope&)>& on_event,
               grpc::ClientContext* ctx = nullptr);

  /// Puts `size` bytes of `file` from `offset` (the whole file by default).
  result<v1::ObjectInfo> put_file(v1::PutHeader header, const std::filesystem::path& file,
                                  uint64_t offset = 0, uint64_t size = UINT64_MAX,
                                  const progress_fn& progress = {});
  result<v1::ObjectInfo> put_bytes(v1::PutHeader header, const std::string& bytes);
  /// Streams an object into `sink` (called per chunk); returns its info.
  result<v1::ObjectInfo> get(const std::string& tenant, const std::string& key,
                             const std::function<status(const std::string&)>& sink);
  /// The same for a whole request (a standby's copy sets for_replica), on
  /// the caller's context when given (to cancel it from another thread).
  result<v1::ObjectInfo> get(v1::GetRequest req,
                             const std::function<status(const std::string&)>& sink,
                             grpc::ClientContext* caller_ctx = nullptr);
  result<v1::ObjectInfo> stat(const std::string& tenant, const std::string& key);
  result<v1::ListObjectsResponse> list_objects(const v1::ListObjectsRequest& req);
  result<v1::RemoveResponse> remove_object(const v1::RemoveRequest& req);

 private:
  template <class Resp, class Fn>
  result<Resp> unary(Fn call);
  /// Every call's context: the bearer token.
  void prepare(grpc::ClientContext& ctx) const;

  client_options options_;
  status setup_;  // a TLS file that cannot be read: every call fails with it
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WeightService::Stub> weights_;
  std::unique_ptr<v1::ObjectService::Stub> objects_;
  std::unique_ptr<v1::AdminService::Stub> admin_;
};

}  // namespace weightd::api
