// /metrics as Prometheus expects it (exposition, histograms, promtool, the
// dashboard's queries). Health, reflection, shutdown, systemd and packaging:
// daemon_services_test.cpp.
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

/// A served node with /metrics, after a few calls: one OK, one NOT_FOUND, a Put.
struct scraped_node {
  temp_dir dir;
  std::shared_ptr<api::rpc_metrics> rpcs = std::make_shared<api::rpc_metrics>();
  served_node node{node_in(dir.path(), 64 << 20), [this] {
                     api::server_options o;
                     o.metrics = rpcs;
                     return o;
                   }()};
  std::unique_ptr<api::metrics_server> metrics;

  scraped_node() {
    auto channel = grpc::CreateChannel(node.address(), grpc::InsecureChannelCredentials());
    auto weights = v1::WeightService::NewStub(channel);
    auto objects = v1::ObjectService::NewStub(channel);
    v1::GetRevisionRequest missing;
    missing.mutable_id()->set_tenant("default");
    missing.mutable_id()->set_ns("ns");
    missing.mutable_id()->set_resource("r");
    missing.mutable_id()->set_revision("main");
    missing.mutable_id()->set_weight_generation(1);
    v1::RevisionView view;
    grpc::ClientContext ctx;
    CHECK_FALSE(weights->GetRevision(&ctx, missing, &view).ok());
    v1::PutHeader h;
    h.set_key("plain");
    REQUIRE(put_stream(*objects, h, "bytes").ok());
    auto m = api::metrics_server::start(node.store->system(), node.store->handles(), rpcs,
                                        "127.0.0.1:0", "9.9.9-test");
    REQUIRE_MESSAGE(m.ok(), m.error().to_string());
    metrics = std::move(*m);
  }
  std::string scrape() {
    httplib::Client http("127.0.0.1", metrics->port());
    auto res = http.Get("/metrics");
    REQUIRE(res);
    REQUIRE(res->status == 200);
    return res->body;
  }
};

/// The exposition rules a scraper relies on, checked line by line: "" when
/// they hold, else the first broken one and why.
std::string exposition_problem(const std::string& text, std::map<std::string, std::string>* types) {
  std::set<std::string> helps;
  std::istringstream in(text);
  std::string line;
  static const std::regex sample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$)");
  for (int n = 1; std::getline(in, line); ++n) {
    auto where = "line " + std::to_string(n) + " '" + line + "': ";
    if (line.empty()) continue;
    if (line.rfind("# HELP ", 0) == 0) {
      auto name = line.substr(7, line.find(' ', 7) - 7);
      if (!helps.insert(name).second) return where + "a second HELP for " + name;
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream words(line.substr(7));
      std::string name, type;
      words >> name >> type;
      if (types->count(name)) return where + "a second TYPE for " + name;
      if (type != "counter" && type != "gauge" && type != "histogram")
        return where + "an unexpected type " + type;
      bool total = name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0;
      if (type == "counter" && !total) return where + "a counter whose name does not end in _total";
      if (type != "counter" && total) return where + "a " + type + " whose name ends in _total";
      if (name.find("microseconds") != std::string::npos || name.find("_ms") != std::string::npos)
        return where + "a time not in seconds";
      (*types)[name] = type;
      continue;
    }
    if (line[0] == '#') continue;
    std::smatch m;
    if (!std::regex_match(line, m, sample)) return where + "not a sample";
    std::string name = m[1], family = name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      std::string s = suffix;
      if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0 &&
          types->count(name.substr(0, name.size() - s.size())) &&
          (*types)[name.substr(0, name.size() - s.size())] == "histogram")
        family = name.substr(0, name.size() - s.size());
    }
    if (!types->count(family)) return where + "a sample of an undeclared family";
    if (!helps.count(family)) return where + "a family without HELP";
    try {
      std::stod(m[3]);
    } catch (const std::exception&) {
      return where + "a value that is not a number";
    }
  }
  return "";
}

}  // namespace

TEST_CASE("metrics: /metrics declares each family once with HELP and TYPE, counters end in _total, gauges do not, times are seconds") {
  scraped_node s;
  auto text = s.scrape();
  std::map<std::string, std::string> types;
  CHECK_MESSAGE(exposition_problem(text, &types) == "", text);
  CHECK(types["weightd_requests_total"] == "counter");
  CHECK(types["weightd_request_duration_seconds"] == "histogram");
  CHECK(types["weightd_tier_used_bytes"] == "gauge");
  CHECK(types["weightd_journal_commits_total"] == "counter");
  CHECK(types["weightd_journal_commit_seconds_total"] == "counter");
  CHECK(types["weightd_journal_last_commit_seconds"] == "gauge");
  CHECK(types["weightd_startup_seconds"] == "gauge");
  CHECK(text.find("weightd_requests_total{rpc=\"Put\",code=\"OK\"} 1\n") != std::string::npos);
  CHECK(text.find("weightd_requests_total{rpc=\"GetRevision\",code=\"NOT_FOUND\"} 1\n") != std::string::npos);
  CHECK(text.find("weightd_build_info{version=\"9.9.9-test\",grpc_version=\"" + grpc::Version() + "\"} 1\n") !=
        std::string::npos);
  CHECK(text.find("weightd_healthy 1\n") != std::string::npos);
  CHECK(text.find("weightd_tier_used_bytes{tier=\"HOT\"} 5\n") != std::string::npos);
}

TEST_CASE("metrics: each RPC has a latency histogram in seconds, buckets from 100 us to 60 s") {
  scraped_node s;
  auto text = s.scrape();
  CHECK(text.find("weightd_request_duration_seconds_bucket{rpc=\"Put\",code=\"OK\",le=\"0.0001\"} ") != std::string::npos);
  CHECK(text.find("weightd_request_duration_seconds_bucket{rpc=\"Put\",code=\"OK\",le=\"60\"} 1\n") != std::string::npos);
  CHECK(text.find("weightd_request_duration_seconds_bucket{rpc=\"Put\",code=\"OK\",le=\"+Inf\"} 1\n") != std::string::npos);
  CHECK(text.find("weightd_request_duration_seconds_count{rpc=\"GetRevision\",code=\"NOT_FOUND\"} 1\n") != std::string::npos);
  // A second Put lands in the same series.
  auto objects = v1::ObjectService::NewStub(
      grpc::CreateChannel(s.node.address(), grpc::InsecureChannelCredentials()));
  v1::PutHeader h;
  h.set_key("second");
  REQUIRE(put_stream(*objects, h, "more bytes").ok());
  CHECK(s.scrape().find("weightd_request_duration_seconds_count{rpc=\"Put\",code=\"OK\"} 2\n") !=
        std::string::npos);
}

TEST_CASE("metrics: /metrics passes promtool check metrics") {
  // scripts/dev.sh installs Debian's prometheus package for promtool.
  REQUIRE_MESSAGE(std::filesystem::exists("/usr/bin/promtool"),
                  "/usr/bin/promtool is missing: apt-get install prometheus (scripts/dev.sh deps)");
  scraped_node s;
  temp_dir out;
  write_file(out.path() / "metrics.txt", s.scrape());
  auto check = run_command("/usr/bin/promtool check metrics < " + (out.path() / "metrics.txt").string());
  CHECK_MESSAGE(check.exit_code == 0, check.output);
  CHECK_MESSAGE(check.output == "", check.output);  // lint findings are printed, too
}

TEST_CASE("metrics: a call the client cancelled is code=\"CANCELLED\", no label is a raw number") {
  scraped_node s;
  auto channel = grpc::CreateChannel(s.node.address(), grpc::InsecureChannelCredentials());
  auto objects = v1::ObjectService::NewStub(channel);
  v1::PutHeader h;
  h.set_key("large");
  REQUIRE(put_stream(*objects, h, std::string(24 << 20, 'x')).ok());
  {  // an export interrupted after its first chunk
    grpc::ClientContext ctx;
    v1::GetRequest get;
    get.set_key("large");
    auto reader = objects->Get(&ctx, get);
    v1::GetResponse msg;
    REQUIRE(reader->Read(&msg));
    ctx.TryCancel();
    while (reader->Read(&msg)) {
    }
    CHECK(reader->Finish().error_code() == grpc::StatusCode::CANCELLED);
  }
  {  // an import whose client went away in the middle of a put
    grpc::ClientContext ctx;
    v1::PutResponse resp;
    auto writer = half_sent_put(*objects, ctx, resp, "cut-short", 8 << 20, 1 << 20);
    ctx.TryCancel();
    writer->Finish();
  }
  std::string text;
  for (int i = 0; i < 100; ++i) {  // the server records a call as it ends
    text = s.scrape();
    if (text.find(R"(rpc="Put",code="CANCELLED")") != std::string::npos &&
        text.find(R"(rpc="Get",code="CANCELLED")") != std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(text.find(R"(weightd_requests_total{rpc="Get",code="CANCELLED"} 1)") != std::string::npos);
  CHECK(text.find(R"(weightd_requests_total{rpc="Put",code="CANCELLED"} 1)") != std::string::npos);
  CHECK(text.find(R"(code="GRPC_)") == std::string::npos);
  CHECK(text.find(R"(rpc="Get",code="INTERNAL")") == std::string::npos);
  CHECK(text.find(R"(rpc="Put",code="INVALID_ARGUMENT")") == std::string::npos);
}

TEST_CASE("packaging: the Grafana dashboard is JSON and every weightd metric it queries is one /metrics serves") {
  auto dashboard = nlohmann::json::parse(read_file(kSourceDir / "packaging" / "grafana-dashboard.json"));
  scraped_node s;
  std::map<std::string, std::string> types;
  REQUIRE(exposition_problem(s.scrape(), &types) == "");
  std::set<std::string> queried;
  static const std::regex metric(R"(weightd_[a-z_]+)");
  REQUIRE(dashboard.contains("panels"));
  for (const auto& panel : dashboard["panels"])
    for (const auto& target : panel.value("targets", nlohmann::json::array())) {
      auto expr = target.value("expr", std::string{});
      for (std::sregex_iterator it(expr.begin(), expr.end(), metric), end; it != end; ++it)
        queried.insert(it->str());
    }
  CHECK(queried.size() >= 5);
  for (auto name : queried) {
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      std::string sfx = suffix;
      if (name.size() > sfx.size() && name.compare(name.size() - sfx.size(), sfx.size(), sfx) == 0 &&
          types.count(name.substr(0, name.size() - sfx.size())))
        name = name.substr(0, name.size() - sfx.size());
    }
    CHECK_MESSAGE(types.count(name) == 1, "the dashboard queries " << name << ", which /metrics does not serve");
  }
}
