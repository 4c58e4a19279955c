// lease_bench: durable lease acquire + release pairs per second — weightd
// in-process (embedded API) and over gRPC, and etcd 3.4's LeaseGrant +
// LeaseRevoke over its gRPC API with the same number of client threads, all
// in the same run. Every weightd pair is two journal events, each fsynced
// before it is acknowledged; etcd fsyncs its WAL likewise. All clients lease
// the same revision (many readers of one hot model) — the hard case, since a
// revision serializes its commands. Prints figures and the ratio to etcd
// (goal >= 2x); asserts nothing.
//
//   lease_bench [--seconds 3] [--clients 1,64] [--etcd /usr/bin/etcd]
#include <CLI/CLI.hpp>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>

#include "api/client.hpp"
#include "api/loopback.hpp"
#include "bench/etcd_lease.grpc.pb.h"
#include "bench_support.hpp"

using namespace weightd;
using namespace weightd::bench;

namespace {

/// etcd on loopback ports with a scratch data dir, stopped on destruction.
struct etcd_process {
  pid_t pid = -1;
  std::string address;

  etcd_process(const std::string& binary, const std::filesystem::path& dir) {
    auto client = "http://127.0.0.1:" + std::to_string(api::free_loopback_port());
    auto peer = "http://127.0.0.1:" + std::to_string(api::free_loopback_port());
    address = client.substr(7);
    std::filesystem::create_directories(dir);
    auto log = (dir / "etcd.log").string();
    pid = fork();
    if (pid < 0) fail("fork failed");
    if (pid == 0) {
      auto data = (dir / "data").string();
      auto cluster = "bench=" + peer;
      if (!freopen(log.c_str(), "w", stdout) || !freopen(log.c_str(), "a", stderr)) _exit(126);
      execl(binary.c_str(), binary.c_str(), "--name", "bench", "--data-dir", data.c_str(),
            "--listen-client-urls", client.c_str(), "--advertise-client-urls", client.c_str(),
            "--listen-peer-urls", peer.c_str(), "--initial-advertise-peer-urls", peer.c_str(),
            "--initial-cluster", cluster.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~etcd_process() {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    waitpid(pid, nullptr, 0);
  }
};

std::unique_ptr<etcdserverpb::Lease::Stub> etcd_stub(const std::string& address) {
  return etcdserverpb::Lease::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

/// One LeaseGrant + LeaseRevoke; false when etcd did not answer.
bool etcd_pair(etcdserverpb::Lease::Stub& stub) {
  etcdserverpb::LeaseGrantRequest grant;
  grant.set_ttl(60);
  etcdserverpb::LeaseGrantResponse granted;
  grpc::ClientContext g;
  g.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!stub.LeaseGrant(&g, grant, &granted).ok()) return false;
  etcdserverpb::LeaseRevokeRequest revoke;
  revoke.set_id(granted.id());
  etcdserverpb::LeaseRevokeResponse revoked;
  grpc::ClientContext r;
  r.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return stub.LeaseRevoke(&r, revoke, &revoked).ok();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"lease_bench: durable lease acquire+release pairs/s, weightd vs etcd"};
  double seconds = 3;
  std::vector<int> client_counts{1, 64};
  std::string etcd = "/usr/bin/etcd";
  app.add_option("--seconds", seconds, "Measuring time per figure")->capture_default_str();
  app.add_option("--clients", client_counts, "Client thread counts")->delimiter(',');
  app.add_option("--etcd", etcd, "The etcd 3.4 binary ('' = skip etcd)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  scratch dir{"weightd-lease-bench"};
  served_weightd weightd{dir, 64 << 20};
  auto rid = ready_revision(*weightd.store, "leased-model");
  std::unique_ptr<etcd_process> etcd_server;
  if (!etcd.empty()) {
    if (!std::filesystem::exists(etcd)) fail(etcd + " not found: apt-get install etcd-server");
    etcd_server = std::make_unique<etcd_process>(etcd, dir.data / "etcd");
    auto stub = etcd_stub(etcd_server->address);
    bool up = false;
    for (int i = 0; i < 200 && !up; ++i) {
      up = etcd_pair(*stub);
      if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!up) fail("etcd did not start; see " + (dir.data / "etcd" / "etcd.log").string());
  }

  std::printf("durable lease acquire+release pairs/s, %.0f s per figure, one revision\n", seconds);
  std::printf("%8s %14s %14s %14s %12s %12s\n", "clients", "in-process", "weightd gRPC",
              "etcd gRPC", "gRPC/etcd", "inproc/etcd");
  for (int clients : client_counts) {
    auto holder = [](int c) { return "bench-client-" + std::to_string(c); };
    double in_process = ops_per_second(clients, seconds, [&](int c) {
      auto lease = weightd.store->acquire_lease({rid, 0, holder(c), 60'000, "", ""}).get();
      if (!lease) fail(lease.error().to_string());
      if (auto r = weightd.store->release_lease({lease->lease.id, "", ""}).get(); !r)
        fail(r.error().to_string());
    });

    std::vector<std::unique_ptr<api::client>> clients_grpc;
    for (int c = 0; c < clients; ++c) {
      api::client_options o;
      o.address = weightd.address;
      clients_grpc.push_back(std::make_unique<api::client>(o));
    }
    double over_grpc = ops_per_second(clients, seconds, [&](int c) {
      v1::AcquireLeaseRequest acquire;
      *acquire.mutable_id() = rid.to_proto();
      acquire.set_holder(holder(c));
      acquire.set_ttl_ms(60'000);
      auto lease = clients_grpc[c]->acquire_lease(acquire);
      if (!lease) fail(lease.error().to_string());
      v1::ReleaseLeaseRequest release;
      release.set_lease_id(lease->lease_id());
      if (auto r = clients_grpc[c]->release_lease(release); !r) fail(r.error().to_string());
    });

    double etcd_rate = 0;
    if (etcd_server) {
      std::vector<std::unique_ptr<etcdserverpb::Lease::Stub>> stubs;
      for (int c = 0; c < clients; ++c) stubs.push_back(etcd_stub(etcd_server->address));
      etcd_rate = ops_per_second(clients, seconds, [&](int c) {
        if (!etcd_pair(*stubs[c])) fail("etcd failed a lease pair");
      });
    }
    auto ratio = [&](double x) { return etcd_rate > 0 ? x / etcd_rate : 0.0; };
    std::printf("%8d %14.0f %14.0f %14.0f %11.2fx %11.2fx\n", clients, in_process, over_grpc,
                etcd_rate, ratio(over_grpc), ratio(in_process));
    std::fflush(stdout);
  }
  return 0;
}
