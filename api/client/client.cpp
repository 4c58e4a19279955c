#include "api/client/client.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>
#include <random>
#include <thread>
#include <type_traits>

#include "api/common/grpc_status.hpp"
#include "api/common/pem.hpp"
#include "api/common/wire.hpp"

namespace weightd::api {

result<std::shared_ptr<grpc::ChannelCredentials>> channel_credentials(const client_options& o) {
  if (o.tls_ca_file.empty() && o.tls_cert_file.empty() && o.tls_key_file.empty())
    return grpc::InsecureChannelCredentials();
  if (o.tls_cert_file.empty() != o.tls_key_file.empty())
    return status{errc::invalid_argument, "--tls-cert-file and --tls-key-file go together"};
  auto pem = [](const std::string& path, const char* flag) -> result<std::string> {
    if (path.empty()) return std::string{};
    return read_pem_file(path, flag);
  };
  grpc::SslCredentialsOptions ssl;
  auto ca = pem(o.tls_ca_file, "--tls-ca-file");
  auto cert = pem(o.tls_cert_file, "--tls-cert-file");
  auto key = pem(o.tls_key_file, "--tls-key-file");
  for (const auto* r : {&ca, &cert, &key})
    if (!*r) return r->error();
  ssl.pem_root_certs = *ca;  // "" = the system's roots
  ssl.pem_cert_chain = *cert;
  ssl.pem_private_key = *key;
  return grpc::SslCredentials(ssl);
}

client::client(client_options options) : options_(std::move(options)) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(kMaxChunkBytes + (64u << 10)));
  args.SetMaxSendMessageSize(static_cast<int>(kMaxChunkBytes + (64u << 10)));
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, static_cast<int>(kStreamWindowBytes));
  auto credentials = channel_credentials(options_);
  if (!credentials) setup_ = credentials.error();
  channel_ = grpc::CreateCustomChannel(
      options_.address, credentials ? *credentials : grpc::InsecureChannelCredentials(), args);
  weights_ = v1::WeightService::NewStub(channel_);
  objects_ = v1::ObjectService::NewStub(channel_);
  admin_ = v1::AdminService::NewStub(channel_);
}

void client::prepare(grpc::ClientContext& ctx) const {
  if (!options_.token.empty()) ctx.AddMetadata("authorization", "Bearer " + options_.token);
}

template <class Resp, class Fn>
result<Resp> client::unary(Fn call) {
  if (!setup_.ok()) return setup_;
  auto backoff = std::chrono::milliseconds(100);
  for (int attempt = 1;; ++attempt) {
    grpc::ClientContext ctx;
    prepare(ctx);
    ctx.set_deadline(std::chrono::system_clock::now() + options_.deadline);
    Resp resp;
    auto st = call(&ctx, &resp);
    if (st.ok()) return resp;
    auto mapped = from_grpc(ctx, st);
    bool transport = ctx.GetServerTrailingMetadata().count(kErrorMetadata) == 0 &&
                     (st.error_code() == grpc::StatusCode::UNAVAILABLE ||
                      st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
    if (!transport || attempt >= options_.attempts) return mapped;
    std::this_thread::sleep_for(backoff);
    backoff *= 4;
  }
}

namespace {

template <class Req, class = void>
struct has_request_id : std::false_type {};
template <class Req>
struct has_request_id<Req, std::void_t<decltype(std::declval<Req&>().set_request_id(""))>>
    : std::true_type {};

/// `req`, with the client's request id when it names none of its own.
template <class Req>
Req stamped(const Req& req, const std::string& request_id) {
  if constexpr (has_request_id<Req>::value) {
    if (req.request_id().empty() && !request_id.empty()) {
      Req copy = req;
      copy.set_request_id(request_id);
      return copy;
    }
  }
  return req;
}

}  // namespace

std::string new_request_id(const std::string& prefix) {
  std::random_device entropy;
  uint64_t bits = (static_cast<uint64_t>(entropy()) << 32) ^ entropy();
  return fmt::format("{}-{:016x}", prefix, bits);
}

#define WEIGHTD_UNARY(stub, method, Resp, req)                                         \
  unary<Resp>([&, sent = stamped(req, options_.request_id)](grpc::ClientContext* ctx, Resp* resp) { \
    return stub->method(ctx, sent, resp);                                             \
  })

result<v1::RevisionView> client::begin_import(const v1::BeginImportRequest& r) {
  return WEIGHTD_UNARY(weights_, BeginImport, v1::RevisionView, r);
}
result<v1::RevisionView> client::commit_import(const v1::CommitImportRequest& r) {
  return WEIGHTD_UNARY(weights_, CommitImport, v1::RevisionView, r);
}
result<v1::AbortImportResponse> client::abort_import(const v1::AbortImportRequest& r) {
  return WEIGHTD_UNARY(weights_, AbortImport, v1::AbortImportResponse, r);
}
result<v1::RevisionView> client::get_revision(const v1::GetRevisionRequest& r) {
  return WEIGHTD_UNARY(weights_, GetRevision, v1::RevisionView, r);
}
result<v1::ListRevisionsResponse> client::list_revisions(const v1::ListRevisionsRequest& r) {
  return WEIGHTD_UNARY(weights_, ListRevisions, v1::ListRevisionsResponse, r);
}
result<v1::RevisionView> client::update_policy(const v1::UpdatePolicyRequest& r) {
  return WEIGHTD_UNARY(weights_, UpdatePolicy, v1::RevisionView, r);
}
result<v1::RemoveRevisionResponse> client::remove_revision(const v1::RemoveRevisionRequest& r) {
  return WEIGHTD_UNARY(weights_, RemoveRevision, v1::RemoveRevisionResponse, r);
}
result<v1::Lease> client::acquire_lease(const v1::AcquireLeaseRequest& r) {
  return WEIGHTD_UNARY(weights_, AcquireLease, v1::Lease, r);
}
result<v1::Lease> client::renew_lease(const v1::RenewLeaseRequest& r) {
  return WEIGHTD_UNARY(weights_, RenewLease, v1::Lease, r);
}
result<v1::ReleaseLeaseResponse> client::release_lease(const v1::ReleaseLeaseRequest& r) {
  return WEIGHTD_UNARY(weights_, ReleaseLease, v1::ReleaseLeaseResponse, r);
}
result<v1::ListLeasesResponse> client::list_leases(const v1::ListLeasesRequest& r) {
  return WEIGHTD_UNARY(weights_, ListLeases, v1::ListLeasesResponse, r);
}
result<v1::Lease> client::revoke_lease(const v1::RevokeLeaseRequest& r) {
  return WEIGHTD_UNARY(weights_, RevokeLease, v1::Lease, r);
}
result<v1::Operation> client::migrate(const v1::MigrateRequest& r) {
  return WEIGHTD_UNARY(weights_, Migrate, v1::Operation, r);
}
result<v1::Operation> client::get_operation(const v1::GetOperationRequest& r) {
  return WEIGHTD_UNARY(weights_, GetOperation, v1::Operation, r);
}
result<v1::Operation> client::cancel_operation(const v1::CancelOperationRequest& r) {
  return WEIGHTD_UNARY(weights_, CancelOperation, v1::Operation, r);
}
result<v1::ReconcileResponse> client::reconcile(const v1::ReconcileRequest& r) {
  return WEIGHTD_UNARY(weights_, Reconcile, v1::ReconcileResponse, r);
}
result<v1::StatusResponse> client::server_status() {
  v1::StatusRequest r;
  return WEIGHTD_UNARY(admin_, Status, v1::StatusResponse, r);
}
result<v1::PromoteResponse> client::promote(const v1::PromoteRequest& r) {
  return WEIGHTD_UNARY(admin_, Promote, v1::PromoteResponse, r);
}
result<v1::HistoryResponse> client::history(const v1::HistoryRequest& r) {
  return WEIGHTD_UNARY(weights_, History, v1::HistoryResponse, r);
}
result<v1::UpsertClaim> client::begin_upsert(const v1::BeginUpsertRequest& r) {
  return WEIGHTD_UNARY(weights_, BeginUpsert, v1::UpsertClaim, r);
}
result<v1::RevisionView> client::commit_upsert(const v1::CommitUpsertRequest& r) {
  return WEIGHTD_UNARY(weights_, CommitUpsert, v1::RevisionView, r);
}
result<v1::UpsertClaim> client::abort_upsert(const v1::AbortUpsertRequest& r) {
  return WEIGHTD_UNARY(weights_, AbortUpsert, v1::UpsertClaim, r);
}
result<v1::Lineage> client::get_lineage(const v1::GetLineageRequest& r) {
  return WEIGHTD_UNARY(weights_, GetLineage, v1::Lineage, r);
}
result<v1::OpenLocalResponse> client::open_local(const v1::OpenLocalRequest& r) {
  return WEIGHTD_UNARY(weights_, OpenLocal, v1::OpenLocalResponse, r);
}
result<v1::ObjectInfo> client::stat(const std::string& tenant, const std::string& key) {
  v1::StatRequest r;
  r.set_tenant(tenant);
  r.set_key(key);
  return WEIGHTD_UNARY(objects_, Stat, v1::ObjectInfo, r);
}
result<v1::ListObjectsResponse> client::list_objects(const v1::ListObjectsRequest& r) {
  return WEIGHTD_UNARY(objects_, List, v1::ListObjectsResponse, r);
}
result<v1::RemoveResponse> client::remove_object(const v1::RemoveRequest& r) {
  return WEIGHTD_UNARY(objects_, Remove, v1::RemoveResponse, r);
}

#undef WEIGHTD_UNARY

namespace {
/// Streams a put: the header, then `next_chunk` until it yields nothing.
/// Streams a put; `next_chunk` fills the message's chunk in place (its buffer
/// is reused from chunk to chunk) and leaves it empty at the end.
result<v1::ObjectInfo> stream_put(v1::ObjectService::Stub& stub, const v1::PutHeader& header,
                                  const std::function<status(std::string&)>& next_chunk,
                                  std::chrono::milliseconds deadline, const std::string& token) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline * 60);
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  v1::PutResponse resp;
  auto writer = stub.Put(&ctx, &resp);
  v1::PutRequest msg;
  *msg.mutable_header() = header;
  status local;
  if (writer->Write(msg)) {
    std::string* chunk = msg.mutable_chunk();
    for (;;) {
      if (auto st = next_chunk(*chunk); !st.ok()) {
        local = st;
        ctx.TryCancel();
        break;
      }
      if (chunk->empty()) break;
      if (!writer->Write(msg)) break;  // the server ended the call: Finish says why
    }
  }
  writer->WritesDone();
  auto st = from_grpc(ctx, writer->Finish());
  if (!local.ok()) return local;
  if (!st.ok()) return st;
  return resp.object();
}
}  // namespace

result<v1::ObjectInfo> client::put_file(v1::PutHeader header, const std::filesystem::path& file,
                                        uint64_t offset, uint64_t size, const progress_fn& progress) {
  if (!setup_.ok()) return setup_;
  std::error_code ec;
  uint64_t file_size = std::filesystem::file_size(file, ec);
  if (ec) return status{errc::not_found, "cannot read " + file.string() + ": " + ec.message()};
  size = std::min(size, file_size - std::min(offset, file_size));
  header.set_size(size);
  std::ifstream in(file, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  uint64_t done = 0;
  return stream_put(
      *objects_, header,
      [&](std::string& chunk) -> status {
        chunk.resize(std::min<uint64_t>(kMaxChunkBytes, size - done));
        if (chunk.empty()) return {};
        if (!in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())))
          return {errc::internal, "reading " + file.string() + " failed"};
        done += chunk.size();
        if (progress && !progress(done)) return {errc::internal, "stopped by the caller"};
        return {};
      },
      options_.deadline, options_.token);
}

result<v1::ObjectInfo> client::put_bytes(v1::PutHeader header, const std::string& bytes) {
  if (!setup_.ok()) return setup_;
  header.set_size(bytes.size());
  size_t at = 0;
  return stream_put(
      *objects_, header,
      [&](std::string& chunk) -> status {
        chunk.assign(bytes, std::min(at, bytes.size()), kMaxChunkBytes);
        at += chunk.size();
        return {};
      },
      options_.deadline, options_.token);
}

result<v1::ObjectInfo> client::get(const std::string& tenant, const std::string& key,
                                   const std::function<status(const std::string&)>& sink) {
  v1::GetRequest req;
  req.set_tenant(tenant);
  req.set_key(key);
  return get(std::move(req), sink);
}

result<v1::ObjectInfo> client::get(v1::GetRequest req,
                                   const std::function<status(const std::string&)>& sink,
                                   grpc::ClientContext* caller_ctx) {
  if (!setup_.ok()) return setup_;
  grpc::ClientContext own_ctx;
  grpc::ClientContext& ctx = caller_ctx ? *caller_ctx : own_ctx;
  prepare(ctx);
  auto reader = objects_->Get(&ctx, req);
  v1::GetResponse msg;
  v1::ObjectInfo info;
  status local;
  while (reader->Read(&msg)) {
    if (msg.has_info()) info = msg.info();
    else if (auto st = sink(msg.chunk()); !st.ok()) {
      local = st;
      ctx.TryCancel();
      break;
    }
  }
  auto st = from_grpc(ctx, reader->Finish());
  if (!local.ok()) return local;
  if (!st.ok()) return st;
  return info;
}

status client::watch(const v1::WatchRequest& req,
                     const std::function<bool(const events::v1::Envelope&)>& on_event,
                     grpc::ClientContext* caller_ctx) {
  if (!setup_.ok()) return setup_;
  grpc::ClientContext own_ctx;
  grpc::ClientContext& ctx = caller_ctx ? *caller_ctx : own_ctx;
  prepare(ctx);
  auto reader = weights_->Watch(&ctx, req);
  events::v1::Envelope event;
  bool stopped = false;
  while (reader->Read(&event)) {
    if (!on_event(event)) {
      stopped = true;
      ctx.TryCancel();
      break;
    }
  }
  auto raw = reader->Finish();
  if (stopped) return {};
  // A daemon that shuts down cancels its streams: CANCELLED with no weightd
  // code is the daemon going away, like a broken connection.
  if (raw.error_code() == grpc::StatusCode::CANCELLED &&
      ctx.GetServerTrailingMetadata().count(kErrorMetadata) == 0)
    return from_grpc(ctx, grpc::Status(grpc::StatusCode::UNAVAILABLE, raw.error_message()));
  return from_grpc(ctx, raw);
}

}  // namespace weightd::api
