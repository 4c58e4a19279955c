// The gRPC API end to end: a real server on loopback over the production
// (threaded) actors and an LMDB journal, driven by the generated stubs.
#include <doctest/doctest.h>
#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include "actors/embedded.hpp"
#include "api/common/grpc_status.hpp"
#include "api/server/metrics.hpp"
#include "api/server/server.hpp"
#include "api/weightd.grpc.pb.h"
#include "events/identity.hpp"
#include "persistence/tier_store.hpp"
#include "support.hpp"
#include "test_node.hpp"
#include "events/digest.hpp"

using namespace weightd;
using namespace weightd::test;
namespace ev1 = events::v1;

namespace {

struct api_fixture {
  temp_dir dir;
  std::shared_ptr<api::rpc_metrics> rpcs = std::make_shared<api::rpc_metrics>();
  served_node node{node_in(dir.path(), 256 << 20), with_metrics(rpcs)};
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::WeightService::Stub> weights;
  std::unique_ptr<v1::ObjectService::Stub> objects;
  std::unique_ptr<v1::AdminService::Stub> admin;

  static api::server_options with_metrics(std::shared_ptr<api::rpc_metrics> rpcs) {
    api::server_options o;
    o.metrics = std::move(rpcs);
    return o;
  }
  api_fixture() {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(8 << 20);
    channel = grpc::CreateCustomChannel(node.address(), grpc::InsecureChannelCredentials(), args);
    weights = v1::WeightService::NewStub(channel);
    objects = v1::ObjectService::NewStub(channel);
    admin = v1::AdminService::NewStub(channel);
  }

  status put(v1::PutHeader header, const std::string& bytes, v1::PutResponse* resp = nullptr) {
    return put_stream(*objects, std::move(header), bytes, resp);
  }
  result<std::string> get(const std::string& key, v1::ObjectService::Stub* stub = nullptr) {
    grpc::ClientContext ctx;
    v1::GetRequest req;
    req.set_key(key);
    auto reader = (stub ? stub : objects.get())->Get(&ctx, req);
    v1::GetResponse msg;
    std::string bytes;
    while (reader->Read(&msg))
      if (msg.has_chunk()) bytes += msg.chunk();
    auto st = api::from_grpc(ctx, reader->Finish());
    if (!st.ok()) return st;
    return bytes;
  }
  template <class Call, class Req, class Resp>
  std::pair<grpc::Status, std::string> call(Call fn, const Req& req, Resp* resp) {
    grpc::ClientContext ctx;
    auto st = (weights.get()->*fn)(&ctx, req, resp);
    const auto& trailers = ctx.GetServerTrailingMetadata();
    auto it = trailers.find(api::kErrorMetadata);
    return {st, it == trailers.end() ? "" : std::string(it->second.data(), it->second.size())};
  }
};

ev1::RevisionId rid(uint64_t gen = 1) {
  return events::revision_key{"default", "default", "llama", "main", gen}.to_proto();
}

}  // namespace

TEST_CASE_FIXTURE(api_fixture, "api: import, commit, read back byte for byte, list, remove") {
  auto key = events::revision_key::from_proto(rid());
  v1::BeginImportRequest begin;
  *begin.mutable_id() = rid();
  std::string big = pattern(5u << 20, 3);  // more than one chunk
  std::string small = pattern(1000, 4);
  begin.set_expected_payload_count(2);
  begin.set_expected_logical_bytes(big.size() + small.size());
  v1::RevisionView view;
  auto st = call(&v1::WeightService::Stub::BeginImport, begin, &view).first;
  REQUIRE_MESSAGE(st.ok(), st.error_message());
  CHECK(view.availability() == ev1::IMPORTING);

  std::vector<std::string> keys = {"weights/llama/a.safetensors", "weights/llama/b.safetensors"};
  for (size_t i = 0; i < 2; ++i) {
    v1::PutHeader h;
    h.set_key(keys[i]);
    h.set_group_id(events::payload_group_id(key));
    h.set_data_type(ev1::DATA_TYPE_WEIGHT);
    REQUIRE(put(h, i == 0 ? big : small).ok());
  }
  std::string manifest = "{\"files\":2}";
  v1::PutHeader mh;
  mh.set_key(events::manifest_key(key));
  mh.set_group_id(events::payload_group_id(key));
  mh.set_data_type(ev1::DATA_TYPE_METADATA);
  v1::PutResponse put_manifest;
  REQUIRE(put(mh, manifest, &put_manifest).ok());
  CHECK(put_manifest.object().sha256() == events::sha256_hex(manifest));

  v1::CommitImportRequest commit;
  *commit.mutable_id() = rid();
  commit.set_expected_metadata_generation(1);
  auto* m = commit.mutable_manifest();
  m->set_manifest_key(events::manifest_key(key));
  m->set_manifest_sha256(events::sha256_hex(manifest));
  m->set_payload_keys_sha256(events::payload_keys_sha256(keys));
  m->set_payload_count(2);
  m->set_logical_bytes(big.size() + small.size());
  for (const auto& k : keys) commit.add_payload_keys(k);
  auto cst = call(&v1::WeightService::Stub::CommitImport, commit, &view).first;
  REQUIRE_MESSAGE(cst.ok(), cst.error_message());
  CHECK(view.availability() == ev1::READY);
  CHECK(view.metadata_generation() == 2);

  auto read = get(keys[0]);
  REQUIRE(read.ok());
  CHECK(*read == big);

  v1::ListRevisionsRequest list;
  v1::ListRevisionsResponse listed;
  REQUIRE(call(&v1::WeightService::Stub::ListRevisions, list, &listed).first.ok());
  REQUIRE(listed.revisions_size() == 1);
  CHECK(listed.revisions(0).payload_keys_size() == 2);

  v1::StatusRequest sreq;
  v1::StatusResponse status_resp;
  grpc::ClientContext sctx;
  REQUIRE(admin->Status(&sctx, sreq, &status_resp).ok());
  CHECK(status_resp.hot().used_bytes() == big.size() + small.size() + manifest.size());
  CHECK(status_resp.journal_seq() >= 6);
  REQUIRE(status_resp.revisions_by_state().count("READY") == 1);
  CHECK(status_resp.revisions_by_state().at("READY") == 1);

  v1::RemoveRevisionRequest remove;
  *remove.mutable_id() = rid();
  remove.set_expected_metadata_generation(2);
  v1::RemoveRevisionResponse removed;
  REQUIRE(call(&v1::WeightService::Stub::RemoveRevision, remove, &removed).first.ok());
  CHECK(removed.removed_keys_size() == 3);
  CHECK(removed.removed_keys(2) == events::manifest_key(key));
  CHECK(get(keys[0]).error().code() == errc::not_found);
}

TEST_CASE_FIXTURE(api_fixture, "api: every error reaches the client with its status, code and what to do") {
  v1::RevisionView view;
  v1::BeginImportRequest no_id;
  auto [s1, c1] = call(&v1::WeightService::Stub::BeginImport, no_id, &view);
  CHECK(s1.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(c1 == "INVALID_ARGUMENT");
  CHECK(s1.error_message() == "id is required");

  v1::GetRevisionRequest missing;
  *missing.mutable_id() = rid();
  auto [s2, c2] = call(&v1::WeightService::Stub::GetRevision, missing, &view);
  CHECK(s2.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(c2 == "NOT_FOUND");

  v1::BeginImportRequest begin;
  *begin.mutable_id() = rid();
  begin.set_expected_payload_count(1);
  begin.set_expected_logical_bytes(1);
  REQUIRE(call(&v1::WeightService::Stub::BeginImport, begin, &view).first.ok());
  v1::AbortImportRequest stale;
  *stale.mutable_id() = rid();
  stale.set_expected_metadata_generation(7);
  v1::AbortImportResponse aborted;
  grpc::ClientContext ctx;
  auto s3 = weights->AbortImport(&ctx, stale, &aborted);
  CHECK(s3.error_code() == grpc::StatusCode::ABORTED);
  auto st3 = api::from_grpc(ctx, s3);
  CHECK(st3.code() == errc::stale_generation);
  CHECK(st3.message().find("re-read the revision and retry") != std::string::npos);

  v1::PutHeader h;
  h.set_key("k");
  REQUIRE(put(h, "one").ok());
  auto again = put(h, "one");
  CHECK(again.code() == errc::object_already_exists);
  v1::PutHeader wrong_size;
  wrong_size.set_key("k2");
  wrong_size.set_size(10);
  auto short_put = put(wrong_size, "12345");
  CHECK(short_put.code() == errc::invalid_argument);
  CHECK(short_put.message().find("size:") == 0);

  v1::BeginUpsertRequest upsert;
  v1::UpsertClaim out;
  grpc::ClientContext mctx;
  auto no_base = weights->BeginUpsert(&mctx, upsert, &out);
  CHECK(no_base.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(api::from_grpc(mctx, no_base).code() == errc::invalid_argument);  // the trailer is there too
  CHECK(no_base.error_message().find("base") == 0);
}

TEST_CASE_FIXTURE(api_fixture, "api: /metrics counts calls by RPC and code, /healthz answers") {
  v1::BeginImportRequest begin;
  *begin.mutable_id() = rid();
  begin.set_expected_payload_count(1);
  begin.set_expected_logical_bytes(1);
  v1::RevisionView view;
  REQUIRE(call(&v1::WeightService::Stub::BeginImport, begin, &view).first.ok());
  v1::GetRevisionRequest missing;
  *missing.mutable_id() = rid(9);
  CHECK_FALSE(call(&v1::WeightService::Stub::GetRevision, missing, &view).first.ok());
  v1::PutHeader h;
  h.set_key("plain");
  REQUIRE(put(h, "bytes").ok());
  auto m = api::metrics_server::start(node.store->system(), node.store->handles(), rpcs, "127.0.0.1:0");
  REQUIRE_MESSAGE(m.ok(), m.error().to_string());
  httplib::Client http("127.0.0.1", (*m)->port());
  auto scraped = http.Get("/metrics");
  REQUIRE(scraped);
  CHECK(scraped->status == 200);
  const auto& text = scraped->body;
  CHECK(text.find("weightd_requests_total{rpc=\"BeginImport\",code=\"OK\"} 1") != std::string::npos);
  CHECK(text.find("weightd_requests_total{rpc=\"GetRevision\",code=\"NOT_FOUND\"} 1") != std::string::npos);
  CHECK(text.find("weightd_requests_total{rpc=\"Put\",code=\"OK\"} 1") != std::string::npos);
  CHECK(text.find("weightd_tier_used_bytes{tier=\"HOT\"} 5") != std::string::npos);
  CHECK(text.find("weightd_revisions{state=\"IMPORTING\"} 1") != std::string::npos);
  CHECK(text.find("weightd_leases 0") != std::string::npos);
  CHECK(text.find("weightd_journal_seq ") != std::string::npos);
  CHECK(text.find("weightd_startup_seconds ") != std::string::npos);
  CHECK(text.find("weightd_scrub_bytes_total ") != std::string::npos);
  CHECK(text.find("weightd_scrub_corrupt_total 0") != std::string::npos);
  auto health = http.Get("/healthz");
  REQUIRE(health);
  CHECK(health->status == 200);
  CHECK(health->body == "ok\n");
}

TEST_CASE("api: listening beyond loopback is refused until authentication exists") {
  temp_dir dir;
  auto c = node_in(dir.path(), 1 << 20);
  auto store = actors::embedded::start(c, 2);
  REQUIRE(store.ok());
  api::server_options o;
  o.listen = "0.0.0.0:0";
  auto s = api::grpc_server::start((*store)->system(), (*store)->handles(), o);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message().find("not a loopback address") != std::string::npos);
}

// Every RPC that takes input: a malformed request gets INVALID_ARGUMENT, the
// message names the field, and nothing changes (the journal does not grow).
TEST_CASE_FIXTURE(api_fixture, "api: malformed requests of every RPC get INVALID_ARGUMENT naming the field") {
  auto journal_seq = [&] {
    v1::StatusResponse s;
    grpc::ClientContext ctx;
    REQUIRE(admin->Status(&ctx, v1::StatusRequest{}, &s).ok());
    return s.journal_seq();
  };
  auto seq_before = journal_seq();
  struct bad_call {
    std::string rpc, field;
    std::function<grpc::Status(grpc::ClientContext*)> call;
  };
  auto id_with = [](const std::string& resource) {
    ev1::RevisionId id;
    id.set_resource(resource);
    id.set_revision("main");
    id.set_weight_generation(1);
    return id;
  };
  std::vector<bad_call> calls;
  auto weight_call = [&](std::string rpc, std::string field, auto method, auto req, auto resp) {
    calls.push_back({rpc, field, [this, method, req, resp](grpc::ClientContext* ctx) mutable {
                       return (weights.get()->*method)(ctx, req, &resp);
                     }});
  };
  auto object_call = [&](std::string rpc, std::string field, auto method, auto req, auto resp) {
    calls.push_back({rpc, field, [this, method, req, resp](grpc::ClientContext* ctx) mutable {
                       return (objects.get()->*method)(ctx, req, &resp);
                     }});
  };
  using W = v1::WeightService::Stub;
  using O = v1::ObjectService::Stub;
  {
    v1::BeginImportRequest r;
    weight_call("BeginImport", "id", &W::BeginImport, r, v1::RevisionView{});
    *r.mutable_id() = id_with("m");
    weight_call("BeginImport", "expected_payload_count", &W::BeginImport, r, v1::RevisionView{});
    *r.mutable_id() = id_with(std::string("bad\x01", 4));
    r.set_expected_payload_count(1);
    r.set_expected_logical_bytes(1);
    weight_call("BeginImport", "resource", &W::BeginImport, r, v1::RevisionView{});
  }
  {
    v1::CommitImportRequest r;
    *r.mutable_id() = id_with("m");
    weight_call("CommitImport", "manifest", &W::CommitImport, r, v1::RevisionView{});
  }
  {
    v1::AbortImportRequest r;
    weight_call("AbortImport", "id", &W::AbortImport, r, v1::AbortImportResponse{});
  }
  {
    v1::GetRevisionRequest r;
    *r.mutable_id() = id_with("");
    weight_call("GetRevision", "resource", &W::GetRevision, r, v1::RevisionView{});
  }
  {
    v1::ListRevisionsRequest r;
    r.set_limit(1001);
    weight_call("ListRevisions", "limit", &W::ListRevisions, r, v1::ListRevisionsResponse{});
  }
  {
    v1::UpdatePolicyRequest r;
    *r.mutable_id() = id_with("m");
    weight_call("UpdatePolicy", "policy", &W::UpdatePolicy, r, v1::RevisionView{});
  }
  {
    v1::RemoveRevisionRequest r;
    weight_call("RemoveRevision", "id", &W::RemoveRevision, r, v1::RemoveRevisionResponse{});
  }
  {
    v1::AcquireLeaseRequest r;
    *r.mutable_id() = id_with("m");
    r.set_holder("reader");
    weight_call("AcquireLease", "ttl_ms", &W::AcquireLease, r, v1::Lease{});
    r.set_ttl_ms(1000);
    r.set_holder("");
    weight_call("AcquireLease", "holder", &W::AcquireLease, r, v1::Lease{});
  }
  {
    v1::RenewLeaseRequest r;
    r.set_ttl_ms(1000);
    weight_call("RenewLease", "lease_id", &W::RenewLease, r, v1::Lease{});
  }
  {
    v1::ReleaseLeaseRequest r;
    weight_call("ReleaseLease", "lease_id", &W::ReleaseLease, r, v1::ReleaseLeaseResponse{});
  }
  {
    v1::RevokeLeaseRequest r;
    weight_call("RevokeLease", "lease_id", &W::RevokeLease, r, v1::Lease{});
  }
  {
    v1::ListLeasesRequest r;
    weight_call("ListLeases", "id", &W::ListLeases, r, v1::ListLeasesResponse{});
  }
  {
    v1::MigrateRequest r;
    weight_call("Migrate", "id", &W::Migrate, r, v1::Operation{});
    *r.mutable_id() = id_with("m");
    r.set_target(events::v1::RESIDENCY_ABSENT);
    weight_call("Migrate", "target", &W::Migrate, r, v1::Operation{});
    r.set_target(events::v1::RESIDENCY_MIXED);
    r.set_mixed_hot_ratio(1.5);
    weight_call("Migrate", "mixed_hot_ratio", &W::Migrate, r, v1::Operation{});
  }
  {
    v1::GetOperationRequest r;
    weight_call("GetOperation", "operation_id", &W::GetOperation, r, v1::Operation{});
  }
  {
    v1::CancelOperationRequest r;
    weight_call("CancelOperation", "operation_id", &W::CancelOperation, r, v1::Operation{});
  }
  // Page tokens the server never handed out (these once threw in the
  // registry and stopped it for good).
  for (const char* token : {"3a", "7a3a", "zz", "313a78", "39393939393939393939393939393a"}) {
    v1::ListRevisionsRequest r;
    r.set_page_token(token);
    weight_call("ListRevisions", "page_token", &W::ListRevisions, r, v1::ListRevisionsResponse{});
  }
  {
    v1::StatRequest r;
    object_call("Stat", "key", &O::Stat, r, v1::ObjectInfo{});
  }
  {
    v1::RemoveRequest r;
    object_call("Remove", "key", &O::Remove, r, v1::RemoveResponse{});
  }
  {
    v1::BatchRemoveRequest r;
    r.add_keys(std::string(5000, 'k'));
    object_call("BatchRemove", "keys", &O::BatchRemove, r, v1::BatchRemoveResponse{});
  }
  {
    v1::RemoveAllRequest r;
    r.set_tenant(std::string("t\x02", 2));
    object_call("RemoveAll", "tenant", &O::RemoveAll, r, v1::RemoveAllResponse{});
    // An empty request must not remove every object of tenant default.
    object_call("RemoveAll", "prefix", &O::RemoveAll, v1::RemoveAllRequest{}, v1::RemoveAllResponse{});
  }
  {
    v1::EvictRequest r;
    r.set_target_ratio(1.5);
    object_call("Evict", "target_ratio", &O::Evict, r, v1::EvictResponse{});
  }
  {
    v1::ListObjectsRequest r;
    r.set_limit(5000);
    object_call("List", "limit", &O::List, r, v1::ListObjectsResponse{});
  }
  for (auto& c : calls) {
    CAPTURE(c.rpc);
    CAPTURE(c.field);
    grpc::ClientContext ctx;
    auto st = c.call(&ctx);
    CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(api::from_grpc(ctx, st).code() == errc::invalid_argument);
    CHECK(st.error_message().find(c.field) != std::string::npos);
  }
  // The streaming RPCs: a Put without a key, a Get without a key.
  v1::PutHeader no_key;
  auto put_status = put(no_key, "bytes");
  CHECK(put_status.code() == errc::invalid_argument);
  CHECK(put_status.message().find("key") != std::string::npos);
  auto got = get("");
  CHECK(got.error().code() == errc::invalid_argument);
  CHECK(got.error().message().find("key") != std::string::npos);
  CHECK(journal_seq() == seq_before);
}

TEST_CASE_FIXTURE(api_fixture, "api: a stock gRPC client (4 MiB receive limit) reads an object larger than 4 MiB") {
  std::string big(9u << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 4099) big[i] = static_cast<char>(i % 251);
  v1::PutHeader h;
  h.set_key("big.bin");
  REQUIRE(put(h, big).ok());
  auto stock = v1::ObjectService::NewStub(grpc::CreateChannel(
      node.address(), grpc::InsecureChannelCredentials()));
  auto read = get("big.bin", stock.get());
  REQUIRE_MESSAGE(read.ok(), read.error().to_string());
  CHECK(*read == big);
}
