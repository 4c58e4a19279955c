// SPEC §9 limits on every input, for the streams that hold resources: open
// streams in all and per connection, Puts that stop sending, and one tenant's
// reservations. Each refusal is RESOURCE_EXHAUSTED naming the flag, and what a
// refused or ended stream held is given back.
#include <doctest/doctest.h>
#include <grpcpp/grpcpp.h>

#include <thread>

#include "actors/embedded.hpp"
#include "api/common/grpc_status.hpp"
#include "api/server/server.hpp"
#include "api/weightd.grpc.pb.h"
#include "support.hpp"
#include "test_node.hpp"

using namespace weightd;
using namespace weightd::test;
namespace ev1 = events::v1;

namespace {

constexpr uint64_t MiB = 1ull << 20;

struct limits_fixture {
  temp_dir dir;
  served_node node;
  std::unique_ptr<v1::ObjectService::Stub> objects;
  std::unique_ptr<v1::AdminService::Stub> admin;

  static actors::node_config config(const temp_dir& dir, double tenant_reserve_ratio) {
    auto c = node_in(dir.path(), 256 * MiB);
    c.objects.tenant_reserve_ratio = tenant_reserve_ratio;
    return c;
  }
  static api::server_options options(api::stream_limit_options limits) {
    api::server_options o;
    o.streams = limits;
    return o;
  }
  explicit limits_fixture(api::stream_limit_options limits, double tenant_reserve_ratio = 1.0)
      : node(config(dir, tenant_reserve_ratio), options(limits)) {
    auto channel = grpc::CreateChannel(node.address(), grpc::InsecureChannelCredentials());
    objects = v1::ObjectService::NewStub(channel);
    admin = v1::AdminService::NewStub(channel);
  }

  status put(const std::string& tenant, const std::string& key, const std::string& bytes) {
    v1::PutHeader header;
    header.set_tenant(tenant);
    header.set_key(key);
    return put_stream(*objects, header, bytes);
  }

  uint64_t hot_reserved() {
    grpc::ClientContext ctx;
    v1::StatusResponse resp;
    REQUIRE(admin->Status(&ctx, {}, &resp).ok());
    return resp.hot().reserved_bytes();
  }
  /// Waits (bounded) until the HOT tier's reservations are `bytes`.
  bool hot_reserved_becomes(uint64_t bytes) {
    for (int i = 0; i < 200; ++i) {
      if (hot_reserved() == bytes) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
};

/// A Put stream that sent its header and then nothing.
struct silent_put {
  grpc::ClientContext ctx;
  v1::PutResponse resp;
  std::unique_ptr<grpc::ClientWriter<v1::PutRequest>> writer;

  silent_put(v1::ObjectService::Stub& objects, const std::string& tenant, const std::string& key,
             uint64_t size) {
    writer = objects.Put(&ctx, &resp);
    v1::PutRequest msg;
    msg.mutable_header()->set_tenant(tenant);
    msg.mutable_header()->set_key(key);
    msg.mutable_header()->set_size(size);
    writer->Write(msg);
  }
  status finish() {
    writer->WritesDone();
    return api::from_grpc(ctx, writer->Finish());
  }
};

/// A Get stream whose client never reads.
struct idle_get {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<v1::GetResponse>> reader;

  idle_get(v1::ObjectService::Stub& objects, const std::string& key) {
    v1::GetRequest req;
    req.set_key(key);
    reader = objects.Get(&ctx, req);
  }
  /// True once the server admitted the stream (its first message arrived).
  bool admitted() {
    v1::GetResponse msg;
    return reader->Read(&msg);
  }
  bool finished = false;
  ~idle_get() {
    if (finished) return;
    ctx.TryCancel();
    reader->Finish();
  }
  /// Reads the rest; the status of the stream.
  status drain() {
    v1::GetResponse msg;
    while (reader->Read(&msg)) {
    }
    finished = true;
    return api::from_grpc(ctx, reader->Finish());
  }
};

}  // namespace

TEST_CASE("limits: one connection may open at most --max-streams-per-connection object streams") {
  limits_fixture f({1024, 2, std::chrono::milliseconds{30'000}});
  REQUIRE(f.put("default", "big", std::string(64 * MiB, 'x')).ok());
  auto first = std::make_unique<idle_get>(*f.objects, "big");
  idle_get second(*f.objects, "big");
  REQUIRE(first->admitted());
  REQUIRE(second.admitted());
  idle_get third(*f.objects, "big");
  auto refused = third.drain();
  CHECK(refused.code() == errc::resource_exhausted);
  CHECK(refused.message().find("--max-streams-per-connection 2") != std::string::npos);
  // A put on the same connection is a stream too.
  CHECK(f.put("default", "small", "abc").code() == errc::resource_exhausted);

  first.reset();  // cancelled: its place is free again
  bool admitted = false;
  for (int i = 0; i < 100 && !admitted; ++i) {
    admitted = f.put("default", "small", "abc").ok();
    if (!admitted) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(admitted);
}

TEST_CASE("limits: at most --max-streams object streams are open in all") {
  limits_fixture f({1, 1024, std::chrono::milliseconds{30'000}});
  REQUIRE(f.put("default", "big", std::string(64 * MiB, 'x')).ok());
  idle_get open(*f.objects, "big");
  REQUIRE(open.admitted());
  auto refused = f.put("default", "other", "abc");
  CHECK(refused.code() == errc::resource_exhausted);
  CHECK(refused.message().find("--max-streams 1") != std::string::npos);
}

TEST_CASE("limits: a Get that is never read holds a small chunk, and a reader still gets every byte") {
  limits_fixture f({1024, 1024, std::chrono::milliseconds{30'000}});
  std::string bytes(8 * MiB + 123, 'y');
  for (size_t i = 0; i < bytes.size(); i += 4096) bytes[i] = static_cast<char>(i / 4096);
  REQUIRE(f.put("default", "big", bytes).ok());
  idle_get stream(*f.objects, "big");
  std::string got;
  v1::GetResponse msg;
  size_t first_chunk = 0, largest_chunk = 0;
  while (stream.reader->Read(&msg)) {
    if (msg.part_case() != v1::GetResponse::kChunk) continue;
    if (first_chunk == 0) first_chunk = msg.chunk().size();
    largest_chunk = std::max(largest_chunk, msg.chunk().size());
    got += msg.chunk();
  }
  stream.finished = true;
  CHECK(api::from_grpc(stream.ctx, stream.reader->Finish()).ok());
  CHECK(got == bytes);
  CHECK(first_chunk == api::kFirstGetChunkBytes);
  CHECK(largest_chunk == api::kGetChunkBytes);
}

TEST_CASE("limits: Get chunks above the first size come out of one budget (--get-buffer), past it a stream sends first-size chunks") {
  api::stream_limit_options o;
  o.get_buffer_bytes = 3 * MiB;
  api::stream_limits limits{o};
  auto floor = api::kFirstGetChunkBytes;
  CHECK(limits.take_get_bytes(floor, floor) == floor);  // the floor is never counted
  CHECK(limits.get_bytes_held() == 0);
  CHECK(limits.take_get_bytes(MiB, floor) == MiB);
  CHECK(limits.take_get_bytes(MiB, floor) == MiB);
  CHECK(limits.take_get_bytes(MiB, floor) == MiB);
  CHECK(limits.get_bytes_held() == 3 * MiB);
  CHECK(limits.take_get_bytes(MiB, floor) == floor);  // the budget is spent: every stream still moves
  limits.give_get_bytes(MiB);
  CHECK(limits.take_get_bytes(MiB, floor) == MiB);
  for (int i = 0; i < 3; ++i) limits.give_get_bytes(MiB);
  CHECK(limits.get_bytes_held() == 0);
}

TEST_CASE("limits: Get streams that are never read hold no more than --get-buffer between them, and give it back when they end") {
  limits_fixture f({1024, 1024, std::chrono::milliseconds{30'000}, std::chrono::milliseconds{30'000},
                    256, 2 * MiB});
  REQUIRE(f.put("default", "big", std::string(16 * MiB, 'z')).ok());
  {
    std::vector<std::unique_ptr<idle_get>> streams;
    for (int i = 0; i < 16; ++i) streams.push_back(std::make_unique<idle_get>(*f.objects, "big"));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // each sends what its window takes
    CHECK(f.node.server->limits().get_bytes_held() <= 2 * MiB);
  }
  for (int i = 0; i < 100 && f.node.server->limits().get_bytes_held() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(f.node.server->limits().get_bytes_held() == 0);
}

TEST_CASE("limits: a Put that sends nothing for --put-idle-timeout is ended and its reservation given back") {
  limits_fixture f({1024, 1024, std::chrono::milliseconds{1'000}});  // long enough to see the reservation
  silent_put idle(*f.objects, "default", "stalled", 64 * MiB);
  REQUIRE(f.hot_reserved_becomes(64 * MiB));
  CHECK(f.hot_reserved_becomes(0));  // the sweeper gave it back
  auto ended = idle.finish();
  CHECK(ended.code() == errc::resource_exhausted);
  CHECK(ended.message().find("--put-idle-timeout") != std::string::npos);
  // A put that keeps sending is not idle, however long it takes in all.
  grpc::ClientContext ctx;
  v1::PutResponse resp;
  auto writer = f.objects->Put(&ctx, &resp);
  v1::PutRequest msg;
  msg.mutable_header()->set_key("steady");
  msg.mutable_header()->set_size(8);
  REQUIRE(writer->Write(msg));
  for (int i = 0; i < 8; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    msg.set_chunk("z");
    REQUIRE(writer->Write(msg));
  }
  writer->WritesDone();
  CHECK(api::from_grpc(ctx, writer->Finish()).ok());
}

TEST_CASE("limits: one tenant's puts in flight reserve at most --tenant-reserve-ratio of a tier") {
  limits_fixture f({1024, 1024, std::chrono::milliseconds{30'000}}, 0.5);  // 128 MiB of 256
  silent_put first(*f.objects, "alpha", "one", 100 * MiB);  // alone, any size that fits
  REQUIRE(f.hot_reserved_becomes(100 * MiB));
  auto refused = f.put("alpha", "two", std::string(40 * MiB, 'a'));
  CHECK(refused.code() == errc::resource_exhausted);
  CHECK(refused.message().find("--tenant-reserve-ratio") != std::string::npos);
  CHECK(f.put("beta", "two", std::string(40 * MiB, 'b')).ok());  // another tenant is not held up
  CHECK(f.put("alpha", "small", std::string(MiB, 'a')).ok());    // within alpha's share
  first.ctx.TryCancel();
  first.writer->Finish();
  CHECK(f.hot_reserved_becomes(0));
  CHECK(f.put("alpha", "two", std::string(40 * MiB, 'a')).ok());  // its share is free again
}

TEST_CASE("limits: at most --max-puts-per-tenant Put streams of one tenant are open, another "
          "tenant still puts") {
  limits_fixture f({1024, 1024, std::chrono::milliseconds{30'000}, std::chrono::milliseconds{30'000}, 1});
  silent_put open(*f.objects, "acme", "big", 1 * MiB);
  REQUIRE(f.hot_reserved_becomes(1 * MiB));  // its header was taken: the place is held
  auto refused = f.put("acme", "other", "abc");
  CHECK(refused.code() == errc::resource_exhausted);
  CHECK(refused.message().find("--max-puts-per-tenant 1") != std::string::npos);
  CHECK(f.put("globex", "other", "abc").ok());
}
