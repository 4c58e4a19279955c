// Security (SPEC §9): every RPC with no token, an unknown token, each role and
// a foreign tenant, against a real server on loopback with a tokens file; a
// refused call changes nothing (the journal does not grow). Then the tokens
// file itself: its format, its mode, its reload.
#include <doctest/doctest.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <functional>

#include "api/common/grpc_status.hpp"
#include "api/server/auth.hpp"
#include "api/server/server.hpp"
#include "api/weightd.grpc.pb.h"
#include "events/identity.hpp"
#include "support.hpp"
#include "test_node.hpp"

using namespace weightd;
using namespace weightd::test;
namespace ev1 = events::v1;

namespace {

constexpr const char* kTokens =
    "# token,name,tenant,role\n"
    "reader-token-0123456789,alice,acme,reader\n"
    "writer-token-0123456789,bob,acme,writer\n"
    "admin-token-01234567890,root,ops,admin\n";

std::filesystem::path private_file(const std::filesystem::path& path, const std::string& text) {
  write_file(path, text);
  ::chmod(path.c_str(), 0600);
  return path;
}

struct secured_fixture {
  temp_dir dir;
  std::shared_ptr<api::authenticator> auth = [this] {
    auto a = api::authenticator::open(private_file(dir.path() / "tokens.csv", kTokens).string());
    REQUIRE_MESSAGE(a.ok(), a.error().to_string());
    return *a;
  }();
  served_node node{node_in(dir.path(), 256 << 20), options(auth)};
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(node.address(), grpc::InsecureChannelCredentials());
  std::unique_ptr<v1::WeightService::Stub> weights = v1::WeightService::NewStub(channel);
  std::unique_ptr<v1::ObjectService::Stub> objects = v1::ObjectService::NewStub(channel);
  std::unique_ptr<v1::AdminService::Stub> admin = v1::AdminService::NewStub(channel);

  static api::server_options options(std::shared_ptr<api::authenticator> a) {
    api::server_options o;
    o.auth = std::move(a);
    return o;
  }
  uint64_t journal_seq() {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer admin-token-01234567890");
    v1::StatusResponse resp;
    REQUIRE(admin->Status(&ctx, v1::StatusRequest{}, &resp).ok());
    return resp.journal_seq();
  }
};

/// One RPC of the table: the role it needs, and a call naming `tenant` in
/// every tenant field it has ("" = none named).
struct rpc_case {
  const char* name;
  api::role needs;
  bool has_tenant;  // the request names a tenant (revision id, tenant field)
  std::function<grpc::Status(secured_fixture&, grpc::ClientContext*, const std::string& tenant)> call;
};

ev1::RevisionId rid(const std::string& tenant) {
  ev1::RevisionId id;
  id.set_tenant(tenant);
  id.set_ns("default");
  id.set_resource("m");
  id.set_revision("main");
  id.set_weight_generation(1);
  return id;
}

template <class Req, class Resp, class Stub>
grpc::Status unary(Stub& stub, grpc::Status (Stub::*fn)(grpc::ClientContext*, const Req&, Resp*),
                   grpc::ClientContext* ctx, const Req& req) {
  Resp resp;
  return (stub.*fn)(ctx, req, &resp);
}

#define WEIGHT_RPC(Method, needs, has_tenant, fill)                                        \
  rpc_case {                                                                               \
    #Method, needs, has_tenant, [](secured_fixture& f, grpc::ClientContext* ctx,           \
                                   [[maybe_unused]] const std::string& tenant) {           \
      v1::Method##Request req;                                                             \
      fill;                                                                                \
      return unary(*f.weights, &v1::WeightService::Stub::Method, ctx, req);                \
    }                                                                                      \
  }
#define OBJECT_RPC(Method, Request, needs, has_tenant, fill)                               \
  rpc_case {                                                                               \
    #Method, needs, has_tenant, [](secured_fixture& f, grpc::ClientContext* ctx,           \
                                   [[maybe_unused]] const std::string& tenant) {           \
      v1::Request req;                                                                     \
      fill;                                                                                \
      return unary(*f.objects, &v1::ObjectService::Stub::Method, ctx, req);                \
    }                                                                                      \
  }

std::vector<rpc_case> every_rpc() {
  using api::role;
  return {
      WEIGHT_RPC(BeginImport, role::writer, true, *req.mutable_id() = rid(tenant)),
      WEIGHT_RPC(CommitImport, role::writer, true, *req.mutable_id() = rid(tenant)),
      WEIGHT_RPC(AbortImport, role::writer, true, *req.mutable_id() = rid(tenant)),
      WEIGHT_RPC(GetRevision, role::reader, true, *req.mutable_id() = rid(tenant)),
      WEIGHT_RPC(ListRevisions, role::reader, true, req.set_tenant(tenant)),
      WEIGHT_RPC(UpdatePolicy, role::writer, true, *req.mutable_id() = rid(tenant)),
      WEIGHT_RPC(RemoveRevision, role::writer, true, *req.mutable_id() = rid(tenant)),
      WEIGHT_RPC(AcquireLease, role::reader, true, *req.mutable_id() = rid(tenant)),
      WEIGHT_RPC(RenewLease, role::reader, false, req.set_lease_id(1)),
      WEIGHT_RPC(ReleaseLease, role::reader, false, req.set_lease_id(1)),
      WEIGHT_RPC(ListLeases, role::reader, true, *req.mutable_id() = rid(tenant)),
      WEIGHT_RPC(RevokeLease, role::admin, false, req.set_lease_id(1)),
      WEIGHT_RPC(Migrate, role::writer, true, *req.mutable_id() = rid(tenant)),
      WEIGHT_RPC(GetOperation, role::reader, false, req.set_operation_id(1)),
      WEIGHT_RPC(CancelOperation, role::writer, false, req.set_operation_id(1)),
      WEIGHT_RPC(Reconcile, role::admin, false, req.set_dry_run(true)),
      WEIGHT_RPC(BeginUpsert, role::writer, true, *req.mutable_base() = rid(tenant)),
      WEIGHT_RPC(CommitUpsert, role::writer, true, *req.mutable_target() = rid(tenant)),
      WEIGHT_RPC(AbortUpsert, role::writer, true, *req.mutable_base() = rid(tenant)),
      WEIGHT_RPC(GetLineage, role::reader, true, req.set_tenant(tenant); req.set_resource("m");
                 req.set_revision("main")),
      WEIGHT_RPC(History, role::reader, true, *req.mutable_id() = rid(tenant)),
      WEIGHT_RPC(OpenLocal, role::reader, true, *req.mutable_id() = rid(tenant)),
      rpc_case{"Watch", role::reader, false,
               [](secured_fixture& f, grpc::ClientContext* ctx, const std::string&) {
                 ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
                 v1::WatchRequest req;
                 req.set_from_seq(1);
                 auto reader = f.weights->Watch(ctx, req);
                 ev1::Envelope e;
                 while (reader->Read(&e)) {
                 }
                 return reader->Finish();
               }},
      rpc_case{"Put", role::writer, true,
               [](secured_fixture& f, grpc::ClientContext* ctx, const std::string& tenant) {
                 v1::PutResponse resp;
                 auto writer = f.objects->Put(ctx, &resp);
                 v1::PutRequest msg;
                 msg.mutable_header()->set_tenant(tenant);
                 msg.mutable_header()->set_key("k");
                 msg.mutable_header()->set_size(1);
                 if (writer->Write(msg)) {
                   msg.set_chunk("x");
                   writer->Write(msg);
                 }
                 writer->WritesDone();
                 return writer->Finish();
               }},
      rpc_case{"Get", role::reader, true,
               [](secured_fixture& f, grpc::ClientContext* ctx, const std::string& tenant) {
                 v1::GetRequest req;
                 req.set_tenant(tenant);
                 req.set_key("k");
                 auto reader = f.objects->Get(ctx, req);
                 v1::GetResponse msg;
                 while (reader->Read(&msg)) {
                 }
                 return reader->Finish();
               }},
      OBJECT_RPC(Stat, StatRequest, role::reader, true, req.set_tenant(tenant); req.set_key("k")),
      OBJECT_RPC(Remove, RemoveRequest, role::writer, true, req.set_tenant(tenant); req.set_key("k")),
      OBJECT_RPC(BatchRemove, BatchRemoveRequest, role::writer, true, req.set_tenant(tenant);
                 req.add_keys("k")),
      OBJECT_RPC(RemoveAll, RemoveAllRequest, role::admin, true, req.set_tenant(tenant);
                 req.set_prefix("nothing/")),
      OBJECT_RPC(Evict, EvictRequest, role::admin, false, req.set_target_ratio(0.99)),
      OBJECT_RPC(List, ListObjectsRequest, role::reader, true, req.set_tenant(tenant)),
      rpc_case{"Status", role::reader, false,
               [](secured_fixture& f, grpc::ClientContext* ctx, const std::string&) {
                 return unary(*f.admin, &v1::AdminService::Stub::Status, ctx, v1::StatusRequest{});
               }},
      rpc_case{"Snapshot", role::admin, false,
               [](secured_fixture& f, grpc::ClientContext* ctx, const std::string&) {
                 return unary(*f.admin, &v1::AdminService::Stub::Snapshot, ctx,
                              v1::SnapshotRequest{});
               }},
  };
}

struct outcome {
  grpc::StatusCode code;
  std::string message;
};

outcome call(secured_fixture& f, const rpc_case& rpc, const std::string& token,
             const std::string& tenant) {
  grpc::ClientContext ctx;
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  if (ctx.deadline() == std::chrono::system_clock::time_point::max())
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto st = rpc.call(f, &ctx, tenant);
  return {st.error_code(), st.error_message()};
}

}  // namespace

TEST_CASE_FIXTURE(secured_fixture,
                  "security: every RPC without a token or with an unknown one is UNAUTHENTICATED, "
                  "and changes nothing") {
  auto before = journal_seq();
  for (const auto& rpc : every_rpc()) {
    CAPTURE(rpc.name);
    CHECK(call(*this, rpc, "", "acme").code == grpc::StatusCode::UNAUTHENTICATED);
    auto wrong = call(*this, rpc, "not-a-token-of-this-daemon", "acme");
    CHECK(wrong.code == grpc::StatusCode::UNAUTHENTICATED);
    CHECK(wrong.message.find("not-a-token") == std::string::npos);  // tokens are never echoed
  }
  CHECK(journal_seq() == before);
}

TEST_CASE_FIXTURE(secured_fixture,
                  "security: every row of the role table: a role below the one needed is "
                  "PERMISSION_DENIED naming it and changes nothing, one at or above passes") {
  const std::vector<std::pair<api::role, std::string>> callers = {
      {api::role::reader, "reader-token-0123456789"},
      {api::role::writer, "writer-token-0123456789"},
      {api::role::admin, "admin-token-01234567890"}};
  for (const auto& rpc : every_rpc()) {
    for (const auto& caller : callers) {
      // (no structured binding: clang refuses one captured by CAPTURE)
      auto role = caller.first;
      const auto& token = caller.second;
      CAPTURE(rpc.name);
      CAPTURE(api::role_name(role));
      auto before = journal_seq();
      auto got = call(*this, rpc, token, role == api::role::admin ? "ops" : "acme");
      if (role < rpc.needs) {
        CHECK(got.code == grpc::StatusCode::PERMISSION_DENIED);
        CHECK(got.message.find("needs the " + api::role_name(rpc.needs) + " role") !=
              std::string::npos);
        CHECK(journal_seq() == before);
      } else {
        CHECK(got.code != grpc::StatusCode::PERMISSION_DENIED);
        CHECK(got.code != grpc::StatusCode::UNAUTHENTICATED);
      }
    }
  }
}

TEST_CASE_FIXTURE(secured_fixture,
                  "security: a request naming another tenant is PERMISSION_DENIED (admin "
                  "excepted) and changes nothing, an empty tenant is the credential's") {
  for (const auto& rpc : every_rpc()) {
    if (!rpc.has_tenant || rpc.needs == api::role::admin) continue;
    CAPTURE(rpc.name);
    auto before = journal_seq();
    auto foreign = call(*this, rpc, "writer-token-0123456789", "globex");
    CHECK(foreign.code == grpc::StatusCode::PERMISSION_DENIED);
    CHECK(foreign.message.find("tenant 'globex'") != std::string::npos);
    CHECK(journal_seq() == before);
    auto as_admin = call(*this, rpc, "admin-token-01234567890", "globex");
    CHECK(as_admin.code != grpc::StatusCode::PERMISSION_DENIED);
  }
  // An empty tenant is the credential's: the revision lands in acme.
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer writer-token-0123456789");
  v1::BeginImportRequest begin;
  *begin.mutable_id() = rid("");
  begin.set_expected_payload_count(1);
  begin.set_expected_logical_bytes(1);
  v1::RevisionView view;
  REQUIRE(weights->BeginImport(&ctx, begin, &view).ok());
  CHECK(view.id().tenant() == "acme");
}

TEST_CASE("security: the tokens file: CSV with comments, tokens of 16 characters or more, "
          "known roles, a group- or world-readable file is refused") {
  auto parsed = api::parse_tokens(kTokens);
  REQUIRE(parsed.ok());
  REQUIRE(parsed->size() == 3);
  CHECK((*parsed)[1].name == "bob");
  CHECK((*parsed)[1].tenant == "acme");
  CHECK((*parsed)[1].role == api::role::writer);
  CHECK(api::parse_tokens("short-token,a,t,reader\n").error().message().find("line 1") == 0);
  CHECK_FALSE(api::parse_tokens("reader-token-0123456789,a,t,owner\n").ok());
  CHECK_FALSE(api::parse_tokens("reader-token-0123456789,a,t\n").ok());
  CHECK_FALSE(api::parse_tokens("reader-token-0123456789,a,t,reader\n"
                                "reader-token-0123456789,b,t,reader\n")
                  .ok());
  temp_dir dir;
  auto file = dir.path() / "tokens.csv";
  write_file(file, kTokens);
  ::chmod(file.c_str(), 0644);
  auto open = api::load_tokens_file(file.string());
  REQUIRE_FALSE(open.ok());
  CHECK(open.error().message().find("chmod 600") != std::string::npos);
  ::chmod(file.c_str(), 0600);
  CHECK(api::load_tokens_file(file.string()).ok());
}

TEST_CASE("security: a reload takes the new tokens, a malformed file keeps the old ones") {
  temp_dir dir;
  auto file = private_file(dir.path() / "tokens.csv", "first-token-0123456789,a,t,reader\n");
  auto auth = api::authenticator::open(file.string());
  REQUIRE(auth.ok());
  served_node node{node_in(dir.path(), 64 << 20), secured_fixture::options(*auth)};
  auto stub = v1::AdminService::NewStub(
      grpc::CreateChannel(node.address(), grpc::InsecureChannelCredentials()));
  auto status_with = [&](const std::string& token) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + token);
    v1::StatusResponse resp;
    return stub->Status(&ctx, v1::StatusRequest{}, &resp).error_code();
  };
  CHECK(status_with("first-token-0123456789") == grpc::StatusCode::OK);
  private_file(file, "second-token-0123456789,b,t,reader\n");
  REQUIRE((*auth)->reload().ok());
  CHECK(status_with("second-token-0123456789") == grpc::StatusCode::OK);
  CHECK(status_with("first-token-0123456789") == grpc::StatusCode::UNAUTHENTICATED);
  private_file(file, "this line is not a token line\n");
  CHECK_FALSE((*auth)->reload().ok());
  CHECK(status_with("second-token-0123456789") == grpc::StatusCode::OK);
}
