// What most tests start from: a node configuration with an LMDB journal, a
// HOT and a COLD tier in one scratch directory; and that node served over
// gRPC on a free loopback port.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "actors/embedded.hpp"
#include "actors/node.hpp"
#include "api/common/grpc_status.hpp"
#include "api/server/server.hpp"
#include "api/weightd.grpc.pb.h"

namespace weightd::test {

inline actors::node_config node_in(const std::filesystem::path& dir, uint64_t hot_bytes) {
  actors::node_config c;
  c.journal.dir = dir / "journal";
  c.hot = {events::v1::TIER_HOT, dir / "hot", hot_bytes, false};
  c.cold = {events::v1::TIER_COLD, dir / "cold", 0, true};
  return c;
}

/// An embedded node (2 workers) and its gRPC server; `options.listen` is
/// replaced by a free loopback port.
struct served_node {
  std::unique_ptr<actors::embedded> store;
  std::unique_ptr<api::grpc_server> server;

  served_node(actors::node_config config, api::server_options options) {
    auto started = actors::embedded::start(std::move(config), 2);
    REQUIRE_MESSAGE(started.ok(), started.error().to_string());
    store = std::move(*started);
    options.listen = "127.0.0.1:0";
    auto s = api::grpc_server::start(store->system(), store->handles(), std::move(options));
    REQUIRE_MESSAGE(s.ok(), s.error().to_string());
    server = std::move(*s);
  }
  ~served_node() {
    server.reset();  // no call in flight when the node stops
    store.reset();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(server->port()); }
};

/// A Put of `key` announced as `size` bytes with only `sent` of them written.
inline std::unique_ptr<grpc::ClientWriter<v1::PutRequest>> half_sent_put(v1::ObjectService::Stub& objects,
                                                                  grpc::ClientContext& ctx,
                                                                  v1::PutResponse& resp,
                                                                  const std::string& key,
                                                                  uint64_t size, size_t sent) {
  auto writer = objects.Put(&ctx, &resp);
  v1::PutRequest msg;
  msg.mutable_header()->set_key(key);
  msg.mutable_header()->set_size(size);
  REQUIRE(writer->Write(msg));
  msg.set_chunk(std::string(sent, 'x'));
  REQUIRE(writer->Write(msg));
  return writer;
}

/// Streams `bytes` as one Put in chunks of the largest size the server takes
/// (the header's size defaults to the bytes').
inline status put_stream(v1::ObjectService::Stub& objects, v1::PutHeader header,
                         const std::string& bytes, v1::PutResponse* resp = nullptr) {
  grpc::ClientContext ctx;
  v1::PutResponse local;
  auto writer = objects.Put(&ctx, resp ? resp : &local);
  v1::PutRequest msg;
  if (header.size() == 0) header.set_size(bytes.size());
  *msg.mutable_header() = header;
  writer->Write(msg);
  for (size_t at = 0; at < bytes.size(); at += api::kMaxChunkBytes) {
    msg.set_chunk(bytes.substr(at, api::kMaxChunkBytes));
    if (!writer->Write(msg)) break;
  }
  writer->WritesDone();
  return api::from_grpc(ctx, writer->Finish());
}

}  // namespace weightd::test
