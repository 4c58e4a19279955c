// weightd as a process: the gRPC health and reflection services, shutdown
// within a second, systemd's readiness protocol and the packaging (install
// rules, unit, example config). /metrics itself is metrics_test.cpp.
#include <doctest/doctest.h>
#include <google/protobuf/unknown_field_set.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "api/common/loopback.hpp"
#include "api/server/metrics.hpp"
#include "daemon_fixture.hpp"
#include "fs_fault_support.hpp"
#include "support.hpp"
#include "test_node.hpp"

using namespace weightd;
using namespace weightd::test;
using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;


namespace {

const std::filesystem::path kSourceDir = WEIGHTD_SOURCE_DIR;
const std::filesystem::path kBuildDir = std::filesystem::path(WEIGHTD_DAEMON).parent_path().parent_path();

/// A unary call by name with hand-encoded protobuf bytes (Debian ships no
/// generated code for grpc.health.v1 or grpc.reflection.v1alpha).
grpc::Status call_by_name(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                          const std::string& request, std::string* response) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Slice slice(request);
  grpc::ByteBuffer req(&slice, 1), resp;
  auto call = stub.PrepareUnaryCall(&ctx, method, req, &cq);
  call->StartCall();
  grpc::Status st;
  call->Finish(&resp, &st, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  REQUIRE(cq.Next(&tag, &ok));
  std::vector<grpc::Slice> slices;
  if (st.ok()) {
    REQUIRE(resp.Dump(&slices).ok());
    response->clear();
    for (auto& s : slices) response->append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return st;
}

/// grpc.health.v1.Health/Check for the whole server (service ""): the
/// status number, 1 SERVING, 2 NOT_SERVING; -1 when the call failed.
int health_check(const std::shared_ptr<grpc::Channel>& channel) {
  std::string response;
  if (!call_by_name(channel, "/grpc.health.v1.Health/Check", "", &response).ok()) return -1;
  UnknownFieldSet fields;
  REQUIRE(fields.ParseFromString(response));
  for (int i = 0; i < fields.field_count(); ++i)
    if (fields.field(i).number() == 1 && fields.field(i).type() == UnknownField::TYPE_VARINT)
      return static_cast<int>(fields.field(i).varint());
  return 0;  // proto3: an absent enum is its zero, UNKNOWN
}

/// The services ServerReflectionInfo's list_services names.
std::vector<std::string> reflected_services(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  auto call = stub.PrepareCall(&ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  void* tag = nullptr;
  bool ok = false;
  auto step = [&](intptr_t want) {
    REQUIRE(cq.Next(&tag, &ok));
    CHECK(reinterpret_cast<intptr_t>(tag) == want);
    return ok;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  REQUIRE(step(1));
  UnknownFieldSet request;
  request.AddLengthDelimited(7, "*");  // list_services
  std::string bytes;
  REQUIRE(request.SerializeToString(&bytes));
  grpc::Slice slice(bytes);
  grpc::ByteBuffer req(&slice, 1), resp;
  call->Write(req, reinterpret_cast<void*>(2));
  REQUIRE(step(2));
  call->Read(&resp, reinterpret_cast<void*>(3));
  REQUIRE(step(3));
  call->WritesDone(reinterpret_cast<void*>(4));
  step(4);
  grpc::Status st;
  call->Finish(&st, reinterpret_cast<void*>(5));
  step(5);
  CHECK(st.ok());
  std::vector<grpc::Slice> slices;
  REQUIRE(resp.Dump(&slices).ok());
  std::string response;
  for (auto& s : slices) response.append(reinterpret_cast<const char*>(s.begin()), s.size());
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  // ServerReflectionResponse.list_services_response (6) -> service (1) -> name (1)
  std::vector<std::string> names;
  UnknownFieldSet top;
  REQUIRE(top.ParseFromString(response));
  for (int i = 0; i < top.field_count(); ++i) {
    if (top.field(i).number() != 6) continue;
    UnknownFieldSet list;
    REQUIRE(list.ParseFromString(top.field(i).length_delimited()));
    for (int j = 0; j < list.field_count(); ++j) {
      UnknownFieldSet service;
      REQUIRE(service.ParseFromString(list.field(j).length_delimited()));
      for (int k = 0; k < service.field_count(); ++k)
        if (service.field(k).number() == 1) names.push_back(service.field(k).length_delimited());
    }
  }
  return names;
}

/// The keys of a weightd config file, its `# key = value` lines uncommented.
std::map<std::string, std::string> commented_keys(const std::string& text) {
  std::map<std::string, std::string> keys;
  static const std::regex entry(R"(^# ?([a-z][a-z0-9-]*) = (.*)$)");
  std::istringstream in(text);
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_match(line, m, entry)) keys[m[1]] = m[2];
  return keys;
}

}  // namespace

TEST_CASE("health: grpc.health.v1.Health/Check answers SERVING while the node is healthy, NOT_SERVING once a core actor stopped") {
  temp_dir dir;
  served_node node{node_in(dir.path(), 1 << 20), {}};
  auto channel = grpc::CreateChannel(node.address(), grpc::InsecureChannelCredentials());
  CHECK(health_check(channel) == 1);
  caf::anon_send_exit(node.store->handles().registry(), caf::exit_reason::kill);
  int answer = 1;
  for (int i = 0; i < 100 && answer == 1; ++i) {  // the health thread looks every 250 ms
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    answer = health_check(channel);
  }
  CHECK(answer == 2);
}

TEST_CASE("health: grpc.health.v1.Health/Check answers NOT_SERVING once the journal refuses writes (a full journal filesystem)") {
  temp_dir dir;
  small_fs fs(dir.path() / "journal");
  REQUIRE_SMALL_FS_OR_SKIP(fs);
  write_file(dir.path() / "file", pattern(1000, 3));
  fault_daemon d(daemon_flags(dir.path() / "data", dir.path() / "hot",
                              {"--journal-dir", fs.path().string()}),
                 dir.path() / "weightd.log");
  REQUIRE_MESSAGE(d.serving(), d.log());
  auto channel = grpc::CreateChannel(d.address(), grpc::InsecureChannelCredentials());
  CHECK(health_check(channel) == 1);
  fill_until_full(fs.path() / "filler");
  bool refused = false;  // LMDB may reuse freed pages for a commit or two
  for (int i = 0; i < 200 && !refused; ++i)
    refused = d.ctl("obj put k/" + std::to_string(i) + " " + (dir.path() / "file").string()).exit_code != 0;
  REQUIRE_MESSAGE(refused, "no put failed on a full journal filesystem");
  int answer = 1;
  for (int i = 0; i < 100 && answer == 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    answer = health_check(channel);
  }
  CHECK(answer == 2);
  CHECK(d.healthz().first == 503);  // the same verdict as /healthz
}

TEST_CASE("reflection: ServerReflectionInfo list_services names weightd.v1.WeightService, ObjectService and AdminService") {
  temp_dir dir;
  served_node node{node_in(dir.path(), 1 << 20), {}};
  auto names = reflected_services(grpc::CreateChannel(node.address(), grpc::InsecureChannelCredentials()));
  std::set<std::string> services(names.begin(), names.end());
  CHECK(services.count("weightd.v1.WeightService") == 1);
  CHECK(services.count("weightd.v1.ObjectService") == 1);
  CHECK(services.count("weightd.v1.AdminService") == 1);
  CHECK(services.count("grpc.health.v1.Health") == 1);
}

TEST_CASE("shutdown: weightd exits 0 within 1.5 s of SIGTERM with idle client connections open, and its journal verifies clean") {
  temp_dir dir;
  running_daemon d{dir.path(), daemon_options{}};
  REQUIRE(d.serving());
  write_file(dir.path() / "file", "some bytes");
  REQUIRE(d.ctl("obj put k " + (dir.path() / "file").string()).exit_code == 0);
  std::vector<std::shared_ptr<grpc::Channel>> idle;
  for (int i = 0; i < 4; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("weightd-test-channel", i);  // one connection each, not one shared subchannel
    idle.push_back(grpc::CreateCustomChannel(d.address, grpc::InsecureChannelCredentials(), args));
    REQUIRE(idle.back()->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5)));
  }
  int code = d.stop();
  double seconds = d.stop_seconds;
  MESSAGE("weightd stopped in " << seconds << " s with " << idle.size() << " idle connections");
  CHECK(code == 0);
  CHECK(seconds < 1.5);
  auto verify = run_command(std::string{WEIGHTD_WEIGHTCTL} + " journal verify --data-dir " + dir.path().string());
  CHECK_MESSAGE(verify.exit_code == 0, verify.output);
  CHECK(verify.output.rfind("ok: ", 0) == 0);
}

TEST_CASE("shutdown: a Put in flight at SIGTERM gets its status (not a hang), nothing of it is published, and weightd still stops within 1.5 s") {
  temp_dir dir;
  running_daemon d{dir.path(), daemon_options{}};
  REQUIRE(d.serving());
  auto channel = grpc::CreateChannel(d.address, grpc::InsecureChannelCredentials());
  auto objects = v1::ObjectService::NewStub(channel);
  grpc::ClientContext ctx;
  v1::PutResponse resp;
  auto writer = half_sent_put(*objects, ctx, resp, "half-sent", 1 << 20, 4096);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // reserved, streaming
  int stopped = d.stop();
  auto st = writer->Finish();
  CHECK_FALSE(st.ok());
  MESSAGE("the put ended with gRPC code " << st.error_code() << ": " << st.error_message());
  CHECK(stopped == 0);
  CHECK(d.stop_seconds < 1.5);
  auto verify = run_command(std::string{WEIGHTD_WEIGHTCTL} + " journal verify --data-dir " + dir.path().string());
  CHECK_MESSAGE(verify.exit_code == 0, verify.output);
  running_daemon again{dir.path(), daemon_options{}};
  REQUIRE(again.serving());
  auto listed = again.ctl("obj ls");
  CHECK(listed.exit_code == 0);
  CHECK_MESSAGE(listed.output.find("half-sent") == std::string::npos, listed.output);
}

TEST_CASE("systemd: weightd sends READY=1 to NOTIFY_SOCKET once it serves, and STOPPING=1 on SIGTERM") {
  temp_dir dir;
  auto socket_path = dir.path() / "notify.sock";
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  REQUIRE(socket_path.string().size() < sizeof(addr.sun_path));
  std::strcpy(addr.sun_path, socket_path.c_str());
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  auto receive = [fd](int timeout_ms) -> std::string {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) != 1) return "";
    char buf[4096];
    auto n = recv(fd, buf, sizeof(buf), 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  };
  daemon_options notify;
  notify.env = {"NOTIFY_SOCKET=" + socket_path.string()};
  running_daemon d{dir.path(), notify};
  auto ready = receive(10'000);
  CHECK(ready.find("READY=1") != std::string::npos);
  CHECK(ready.find("STATUS=serving " + d.address) != std::string::npos);
  CHECK(d.ctl("status").exit_code == 0);  // READY means it answers now, not soon
  kill(d.pid, SIGTERM);
  CHECK(receive(5'000).find("STOPPING=1") != std::string::npos);
  CHECK(d.stop() == 0);
  close(fd);
}

TEST_CASE("packaging: weightd starts with packaging/weightd.conf.example, and every key it comments out is a flag whose default it shows") {
  auto example = read_file(kSourceDir / "packaging" / "weightd.conf.example");
  REQUIRE(!example.empty());
  auto keys = commented_keys(example);
  // Every long flag of --help (but --help, --config, --version and the
  // plain-unit aliases) is in the example, so an operator sees them all.
  auto help = run_command(std::string{WEIGHTD_DAEMON} + " --help");
  REQUIRE(help.exit_code == 0);
  static const std::regex flag(R"(^  --([a-z][a-z0-9-]*))");
  std::istringstream lines(help.output);
  std::vector<std::string> all;
  std::string line;
  while (std::getline(lines, line)) all.push_back(line);
  for (size_t i = 0; i < all.size(); ++i) {
    std::smatch m;
    if (!std::regex_search(all[i], m, flag)) continue;
    std::string name = m[1];
    bool alias = (i + 1 < all.size() && all[i + 1].find("Same as --") != std::string::npos) ||
                 all[i].find("Same as --") != std::string::npos;
    if (name == "help" || name == "config" || name == "version" || alias) continue;
    CHECK_MESSAGE(keys.count(name) == 1, "--" << name << " is missing in weightd.conf.example");
  }
  temp_dir dir;
  {  // as shipped: every key commented out (the command line places data and ports)
    daemon_options config;
    config.flags = {"--config", (kSourceDir / "packaging" / "weightd.conf.example").string()};
    running_daemon d{dir.path() / "as-shipped", config};
    CHECK(d.serving());
    CHECK(d.stop() == 0);
  }
  // Uncommented, each key with the default it shows: weightd takes the file
  // (an unknown key or a bad value would be an error naming it). The places
  // of data and ports come from the command line, which wins.
  std::string uncommented;
  for (const auto& [key, value] : keys) uncommented += key + " = " + value + "\n";
  write_file(dir.path() / "uncommented.conf", uncommented);
  daemon_options config;
  config.flags = {"--config", (dir.path() / "uncommented.conf").string()};
  running_daemon d{dir.path() / "uncommented", config};
  CHECK_MESSAGE(d.serving(), uncommented);
  CHECK(d.stop() == 0);
}

TEST_CASE("packaging: cmake --install puts weightd, weightctl, the systemd unit, the example config and the dashboard under the prefix") {
  temp_dir prefix;
  auto install = run_command("cmake --install " + kBuildDir.string() + " --prefix " + prefix.path().string());
  REQUIRE_MESSAGE(install.exit_code == 0, install.output);
  for (const char* file : {"bin/weightd", "bin/weightctl", "lib/systemd/system/weightd.service",
                           "share/weightd/weightd.conf.example", "share/weightd/grafana-dashboard.json",
                           "share/doc/weightd/README.md"})
    CHECK_MESSAGE(std::filesystem::exists(prefix.path() / file), file << " is not installed");
  CHECK(std::filesystem::exists(prefix.path() / "lib/sysusers.d/weightd.conf"));
  CHECK(run_command((prefix.path() / "bin/weightd").string() + " --help").exit_code == 0);  // it runs
  auto unit = read_file(prefix.path() / "lib/systemd/system/weightd.service");
  CHECK(unit.find("Type=notify") != std::string::npos);
  // The unit names the binary where the configured prefix puts it.
  CHECK(std::regex_search(unit, std::regex("\nExecStart=/\\S*bin/weightd --config /etc/weightd/weightd.conf\n")));
}
