// What the benchmarks share: a scratch directory, an embedded weightd with a
// durable LMDB journal and a gRPC server in the same process (or, for a
// bench compiled with WEIGHTD_DAEMON, the real daemon binary as a child
// process), a tiny READY revision (embedded or over the client), and timed
// loops on N client threads. Benchmarks print figures; they assert nothing.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "actors/embedded.hpp"
#include "api/client/client.hpp"
#include "api/common/loopback.hpp"
#include "api/server/server.hpp"
#include "events/identity.hpp"
#include "events/digest.hpp"

namespace weightd::bench {

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "bench: %s\n", what.c_str());
  std::exit(1);
}

/// A directory removed at exit: data under /tmp (disk), HOT tier under /dev/shm.
struct scratch {
  std::filesystem::path data, hot;
  explicit scratch(const std::string& name) {
    auto suffix = name + "-" + std::to_string(getpid());
    data = std::filesystem::temp_directory_path() / suffix;
    hot = std::filesystem::path("/dev/shm") / suffix;
    std::filesystem::create_directories(data);
  }
  ~scratch() {
    std::error_code ec;
    std::filesystem::remove_all(data, ec);
    std::filesystem::remove_all(hot, ec);
  }
};

/// weightd in this process (fsynced journal, `hot_bytes` of HOT tier) and its
/// gRPC API on a free loopback port.
struct served_weightd {
  std::unique_ptr<actors::embedded> store;
  std::unique_ptr<api::grpc_server> server;
  std::string address;

  served_weightd(const scratch& dir, uint64_t hot_bytes) {
    actors::node_config c;
    c.journal.dir = dir.data / "journal";
    c.hot = {events::v1::TIER_HOT, dir.hot, hot_bytes, false};
    c.cold = {events::v1::TIER_COLD, dir.data / "cold", 0, true};
    auto started = actors::embedded::start(c);
    if (!started) fail(started.error().to_string());
    store = std::move(*started);
    api::server_options o;
    o.listen = "127.0.0.1:0";
    auto s = api::grpc_server::start(store->system(), store->handles(), o);
    if (!s) fail(s.error().to_string());
    server = std::move(*s);
    address = "127.0.0.1:" + std::to_string(server->port());
  }
  ~served_weightd() {
    server.reset();
    store.reset();
  }
};

/// Imports a READY revision of one 16-byte payload through the embedded API.
inline events::revision_key ready_revision(actors::embedded& store, const std::string& resource) {
  events::revision_key id{"default", "default", resource, "main", 1};
  std::string payload(16, 'w'), manifest = "{\"files\":[\"w\"]}";
  auto begun = store.begin_import({id, "", 1, payload.size(), false, {}, 0, "bench", "", {}}).get();
  if (!begun) fail(begun.error().to_string());
  actors::put_request put;
  put.key = "weights/" + resource + "/w";
  put.group_id = events::payload_group_id(id);
  put.data_type = events::v1::DATA_TYPE_WEIGHT;
  put.size = payload.size();
  if (auto r = store.put_object(put, payload); !r) fail(r.error().to_string());
  actors::put_request meta = put;
  meta.key = events::manifest_key(id);
  meta.data_type = events::v1::DATA_TYPE_METADATA;
  meta.size = manifest.size();
  if (auto r = store.put_object(meta, manifest); !r) fail(r.error().to_string());
  actors::commit_import commit;
  commit.id = id;
  commit.expected_generation = begun->record.metadata_generation;
  commit.manifest = {meta.key, events::sha256_hex(manifest), put.group_id,
                     events::payload_keys_sha256({put.key}), 1, payload.size()};
  commit.payload_keys = {put.key};
  if (auto r = store.commit_import(commit).get(); !r) fail(r.error().to_string());
  return id;
}

/// The same tiny READY revision through the client: BeginImport, two object
/// Puts (payload and manifest), CommitImport (3 fsynced events).
inline void ready_revision(api::client& c, const events::revision_key& id) {
  std::string payload(16, 'w'), manifest = "{\"files\":[\"w\"]}";
  auto group = events::payload_group_id(id);
  v1::BeginImportRequest begin;
  *begin.mutable_id() = id.to_proto();
  begin.set_expected_payload_count(1);
  begin.set_expected_logical_bytes(payload.size());
  auto begun = c.begin_import(begin);
  if (!begun) fail(begun.error().to_string());
  v1::PutHeader h;
  h.set_key("weights/" + id.resource + "/w");
  h.set_group_id(group);
  h.set_data_type(events::v1::DATA_TYPE_WEIGHT);
  auto put = c.put_bytes(h, payload);
  if (!put) fail(put.error().to_string());
  v1::PutHeader mh = h;
  mh.set_key(events::manifest_key(id));
  mh.set_data_type(events::v1::DATA_TYPE_METADATA);
  auto meta = c.put_bytes(mh, manifest);
  if (!meta) fail(meta.error().to_string());
  v1::CommitImportRequest commit;
  *commit.mutable_id() = id.to_proto();
  commit.set_expected_metadata_generation(begun->metadata_generation());
  auto* m = commit.mutable_manifest();
  m->set_manifest_key(mh.key());
  m->set_manifest_sha256(meta->sha256());
  m->set_payload_keys_sha256(events::payload_keys_sha256({h.key()}));
  m->set_payload_count(1);
  m->set_logical_bytes(payload.size());
  commit.add_payload_keys(h.key());
  if (auto r = c.commit_import(commit); !r) fail(r.error().to_string());
}

#ifdef WEIGHTD_DAEMON
/// The weightd binary (WEIGHTD_DAEMON) in a child process on free loopback
/// ports, its data under `dir`, with `flags` added; SIGTERM on destruction.
/// The figures are then the daemon's own (its memory, its threads), not
/// shared with the bench's client side.
struct daemon_process {
  pid_t pid = -1;
  std::string address;

  explicit daemon_process(const scratch& dir, const std::vector<std::string>& flags = {}) {
    address = "127.0.0.1:" + std::to_string(api::free_loopback_port());
    std::vector<std::string> args{
        "weightd",
        "--listen=" + address,
        "--http-listen=127.0.0.1:" + std::to_string(api::free_loopback_port()),
        "--data-dir=" + dir.data.string(),
        "--hot-dir=" + dir.hot.string(),
        "--log-level=warn",
        "--scrub-rate=0"};
    args.insert(args.end(), flags.begin(), flags.end());
    pid = fork();
    if (pid < 0) fail("fork failed");
    if (pid == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(WEIGHTD_DAEMON, argv.data());
      _exit(127);
    }
  }
  ~daemon_process() {
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
  }
  daemon_process(const daemon_process&) = delete;
  daemon_process& operator=(const daemon_process&) = delete;

  /// Waits (up to 10 s) until the daemon answers Status through `c`.
  void wait_until_up(api::client& c) const {
    for (int i = 0; i < 200; ++i) {
      if (c.server_status().ok()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    fail("weightd did not start at " + address);
  }
};
#endif

/// Runs `op(client_index)` on `clients` threads until `seconds` pass; each
/// call counts as one operation. Returns operations per second.
inline double ops_per_second(int clients, double seconds, const std::function<void(int)>& op) {
  std::atomic<uint64_t> done{0};
  std::atomic<bool> go{false};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      while (!go.load()) std::this_thread::yield();
      uint64_t mine = 0;
      while (std::chrono::steady_clock::now() < deadline) {
        op(c);
        ++mine;
      }
      done += mine;
    });
  auto start = std::chrono::steady_clock::now();
  go = true;
  for (auto& t : threads) t.join();
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(done.load()) / elapsed;
}

}  // namespace weightd::bench
