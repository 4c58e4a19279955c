// lease_bench: durable lease acquire + release pairs per second — weightd
// in-process (the registry's typed handle) and over gRPC, and etcd 3.4's
// LeaseGrant + LeaseRevoke over its gRPC API with the same number of clients,
// all in the same run. N clients = N acquire->release loops in flight at once
// from one driver (a CAF actor in-process, one completion-queue thread over
// gRPC, the same for weightd and etcd): it measures the servers, not the cost
// of N blocked client threads on a 2-core machine. Every weightd pair is two journal events, each fsynced
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

#include <future>

#include "api/weightd.grpc.pb.h"
#include "api/common/loopback.hpp"
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

// -------------------------------------------------- asynchronous drivers

/// One client's acquire/grant -> release/revoke loop (a state machine driven
/// by the completion queue).
struct pair_client {
  virtual ~pair_client() = default;
  virtual void start_first(grpc::CompletionQueue* cq) = 0;   // acquire / grant
  virtual void start_second(grpc::CompletionQueue* cq) = 0;  // release / revoke
  std::unique_ptr<grpc::ClientContext> fresh_context() {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return ctx;
  }
  std::unique_ptr<grpc::ClientContext> ctx;
  grpc::Status status;
  bool second = false;
};

struct weightd_pair : pair_client {
  v1::WeightService::Stub* stub;
  v1::AcquireLeaseRequest acquire;
  v1::Lease lease;
  v1::ReleaseLeaseResponse released;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::Lease>> first_call;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::ReleaseLeaseResponse>> second_call;
  weightd_pair(v1::WeightService::Stub* s, const events::revision_key& rid, const std::string& holder)
      : stub(s) {
    *acquire.mutable_id() = rid.to_proto();
    acquire.set_holder(holder);
    acquire.set_ttl_ms(60'000);
  }
  void start_first(grpc::CompletionQueue* cq) override {
    ctx = fresh_context();
    first_call = stub->AsyncAcquireLease(ctx.get(), acquire, cq);
    first_call->Finish(&lease, &status, this);
  }
  void start_second(grpc::CompletionQueue* cq) override {
    ctx = fresh_context();
    v1::ReleaseLeaseRequest release;
    release.set_lease_id(lease.lease_id());
    second_call = stub->AsyncReleaseLease(ctx.get(), release, cq);
    second_call->Finish(&released, &status, this);
  }
};

struct etcd_pair_client : pair_client {
  etcdserverpb::Lease::Stub* stub;
  etcdserverpb::LeaseGrantResponse granted;
  etcdserverpb::LeaseRevokeResponse revoked;
  std::unique_ptr<grpc::ClientAsyncResponseReader<etcdserverpb::LeaseGrantResponse>> first_call;
  std::unique_ptr<grpc::ClientAsyncResponseReader<etcdserverpb::LeaseRevokeResponse>> second_call;
  explicit etcd_pair_client(etcdserverpb::Lease::Stub* s) : stub(s) {}
  void start_first(grpc::CompletionQueue* cq) override {
    ctx = fresh_context();
    etcdserverpb::LeaseGrantRequest grant;
    grant.set_ttl(60);
    first_call = stub->AsyncLeaseGrant(ctx.get(), grant, cq);
    first_call->Finish(&granted, &status, this);
  }
  void start_second(grpc::CompletionQueue* cq) override {
    ctx = fresh_context();
    etcdserverpb::LeaseRevokeRequest revoke;
    revoke.set_id(granted.id());
    second_call = stub->AsyncLeaseRevoke(ctx.get(), revoke, cq);
    second_call->Finish(&revoked, &status, this);
  }
};

/// In-process: one CAF actor keeps every client's acquire -> release loop in
/// flight on the registry's typed handle (what a host master embedding
/// weightd does).
double in_process_pairs_per_second(caf::actor_system& sys, actors::registry_actor registry,
                                   const events::revision_key& rid, int clients, double seconds) {
  struct run_state {
    uint64_t pairs = 0;
    int active = 0;
    std::chrono::steady_clock::time_point start, deadline;
    std::promise<double> rate;
  };
  auto st = std::make_shared<run_state>();
  auto rate = st->rate.get_future();
  sys.spawn([=](caf::event_based_actor* self) {
    const auto timeout = std::chrono::seconds(30);
    auto loop = std::make_shared<std::function<void(int)>>();
    *loop = [=](int c) {
      actors::acquire_lease acquire{rid, 0, "bench-client-" + std::to_string(c), 60'000, "", ""};
      self->request(registry, timeout, acquire)
          .then(
              [=](actors::lease_view& lease) {
                self->request(registry, timeout, actors::release_lease{lease.lease.id, "", ""})
                    .then(
                        [=](actors::lease_view&) {
                          ++st->pairs;
                          if (std::chrono::steady_clock::now() < st->deadline) return (*loop)(c);
                          if (--st->active > 0) return;
                          double elapsed = std::chrono::duration<double>(
                                               std::chrono::steady_clock::now() - st->start)
                                               .count();
                          st->rate.set_value(static_cast<double>(st->pairs) / elapsed);
                          *loop = nullptr;  // breaks the self-reference
                          self->quit();
                        },
                        [=](caf::error& err) { fail(actors::to_status(err).to_string()); });
              },
              [=](caf::error& err) { fail(actors::to_status(err).to_string()); });
    };
    st->start = std::chrono::steady_clock::now();
    st->deadline = st->start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                   std::chrono::duration<double>(seconds));
    st->active = clients;
    for (int c = 0; c < clients; ++c) (*loop)(c);
  });
  return rate.get();
}

/// Pairs per second with every client's loop in flight at once.
double async_pairs_per_second(std::vector<std::unique_ptr<pair_client>>& clients, double seconds) {
  grpc::CompletionQueue cq;
  auto start = std::chrono::steady_clock::now();
  auto deadline = start + std::chrono::duration<double>(seconds);
  for (auto& c : clients) c->start_first(&cq);
  size_t active = clients.size();
  uint64_t pairs = 0;
  void* tag = nullptr;
  bool ok = false;
  while (active > 0 && cq.Next(&tag, &ok)) {
    auto* c = static_cast<pair_client*>(tag);
    if (!ok || !c->status.ok()) fail("a lease call failed: " + c->status.error_message());
    if (!c->second) {
      c->second = true;
      c->start_second(&cq);
      continue;
    }
    c->second = false;
    ++pairs;
    if (std::chrono::steady_clock::now() < deadline) c->start_first(&cq);
    else --active;
  }
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return static_cast<double>(pairs) / elapsed;
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
    double in_process = in_process_pairs_per_second(
        weightd.store->system(), weightd.store->handles().registry(), rid, clients, seconds);

    auto weightd_channel = grpc::CreateChannel(weightd.address, grpc::InsecureChannelCredentials());
    auto weightd_stub = v1::WeightService::NewStub(weightd_channel);
    std::vector<std::unique_ptr<pair_client>> ours;
    for (int c = 0; c < clients; ++c)
      ours.push_back(std::make_unique<weightd_pair>(weightd_stub.get(), rid, holder(c)));
    double over_grpc = async_pairs_per_second(ours, seconds);

    double etcd_rate = 0;
    if (etcd_server) {
      auto stub = etcd_stub(etcd_server->address);
      std::vector<std::unique_ptr<pair_client>> theirs;
      for (int c = 0; c < clients; ++c) theirs.push_back(std::make_unique<etcd_pair_client>(stub.get()));
      etcd_rate = async_pairs_per_second(theirs, seconds);
    }
    auto ratio = [&](double x) { return etcd_rate > 0 ? x / etcd_rate : 0.0; };
    std::printf("%8d %14.0f %14.0f %14.0f %11.2fx %11.2fx\n", clients, in_process, over_grpc,
                etcd_rate, ratio(over_grpc), ratio(in_process));
    std::fflush(stdout);
  }
  return 0;
}
