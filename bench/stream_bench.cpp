// stream_bench: what idle object streams cost the daemon. A real weightd
// process (so the figures are its own memory, not the client's) serves one
// 16 MiB object; the bench opens N Get streams on it (over several
// connections, under --max-streams-per-connection) whose client never reads,
// then cancels them. Printed: the daemon's RSS idle (after one full read of
// the object), with the streams open, and after the cancel, as ratios to the
// idle RSS (the target is < 2x), and how long a Status call takes meanwhile.
// Prints figures; asserts nothing.
//
//   stream_bench [--streams 500] [--connections 5] [--object-mib 16]
#include <CLI/CLI.hpp>
#include <grpcpp/grpcpp.h>

#include <fstream>

#include "api/client/client.hpp"
#include "api/weightd.grpc.pb.h"
#include "bench_support.hpp"

using namespace weightd;
using namespace weightd::bench;

namespace {

/// The resident set of `pid` in MiB (VmRSS of /proc/<pid>/status).
double rss_mib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  fail("no VmRSS for pid " + std::to_string(pid));
}

/// A Get whose client never reads.
struct idle_get {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<v1::GetResponse>> reader;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"stream_bench: the daemon's memory with idle Get streams"};
  int streams = 500, connections = 5;
  uint64_t object_mib = 16;
  app.add_option("--streams", streams, "Get streams that never read")->capture_default_str();
  app.add_option("--connections", connections, "Connections they are spread over")
      ->capture_default_str();
  app.add_option("--object-mib", object_mib, "Size of the object they read")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  scratch dir("weightd-stream-bench");
  daemon_process daemon(dir);
  api::client_options options;
  options.address = daemon.address;
  options.deadline = std::chrono::milliseconds{5'000};
  options.attempts = 1;
  api::client client(options);
  daemon.wait_until_up(client);

  v1::PutHeader h;
  h.set_key("model.bin");
  if (auto put = client.put_bytes(h, std::string(object_mib << 20, 'w')); !put)
    fail(put.error().to_string());
  uint64_t read = 0;
  auto full = client.get("default", "model.bin", [&](const std::string& chunk) {
    read += chunk.size();
    return status{};
  });
  if (!full || read != object_mib << 20) fail("the warm-up read failed");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  double idle = rss_mib(daemon.pid);

  std::vector<std::unique_ptr<v1::ObjectService::Stub>> stubs;
  for (int c = 0; c < connections; ++c) {
    grpc::ChannelArguments args;
    args.SetInt("weightd.bench.connection", c);  // distinct args: a connection of its own
    stubs.push_back(v1::ObjectService::NewStub(
        grpc::CreateCustomChannel(daemon.address, grpc::InsecureChannelCredentials(), args)));
  }
  std::vector<std::unique_ptr<idle_get>> open;
  v1::GetRequest req;
  req.set_key("model.bin");
  for (int i = 0; i < streams; ++i) {
    auto g = std::make_unique<idle_get>();
    g->reader = stubs[i % connections]->Get(&g->ctx, req);
    open.push_back(std::move(g));
  }
  std::this_thread::sleep_for(std::chrono::seconds(3));  // every stream sent what it could
  double with_streams = rss_mib(daemon.pid);
  auto before = std::chrono::steady_clock::now();
  bool status_ok = client.server_status().ok();
  double status_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                                before).count();
  for (auto& g : open) g->ctx.TryCancel();
  for (auto& g : open) g->reader->Finish();
  open.clear();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  double after = rss_mib(daemon.pid);

  std::printf("stream_bench: %d idle Get streams of a %llu MiB object over %d connections\n",
              streams, static_cast<unsigned long long>(object_mib), connections);
  std::printf("  daemon RSS idle             %8.1f MiB\n", idle);
  std::printf("  daemon RSS streams open     %8.1f MiB  %.2fx idle (target < 2x)\n", with_streams,
              with_streams / idle);
  std::printf("  daemon RSS after cancel     %8.1f MiB  %.2fx idle\n", after, after / idle);
  std::printf("  Status with streams open    %8.1f ms%s\n", status_ms, status_ok ? "" : " (failed)");
  return 0;
}
