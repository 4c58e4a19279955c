// weightctl policy, abort and obj against the real daemon (SPEC §7).
#include <doctest/doctest.h>

#include <fstream>

#include "api/client/client.hpp"
#include "daemon_fixture.hpp"
#include "events/identity.hpp"

using namespace weightd;
using namespace weightd::test;

namespace {

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("cli obj: put, get byte-identical, ls, rm, and a managed member is MANAGED_OBJECT") {
  temp_dir dir;
  write_file(dir.path() / "blob.bin", pattern(5'000'000, 7));
  write_file(dir.path() / "model" / "w.bin", pattern(1000, 1));
  running_daemon d{dir.path() / "var"};

  auto put = d.ctl("obj put cache/blob " + (dir.path() / "blob.bin").string() + " --tier COLD --pin");
  REQUIRE_MESSAGE(put.exit_code == 0, put.output);
  CHECK(has(put.output, "cache/blob"));
  CHECK(has(put.output, "COLD"));
  CHECK(has(put.output, "pinned"));
  CHECK(d.ctl("obj put cache/blob " + (dir.path() / "blob.bin").string()).exit_code == 14);
  CHECK(d.ctl("obj put x " + (dir.path() / "blob.bin").string() + " --tier WARM").exit_code == 2);

  auto got = d.ctl("obj get cache/blob " + (dir.path() / "copy.bin").string());
  REQUIRE_MESSAGE(got.exit_code == 0, got.output);
  CHECK(read_file(dir.path() / "copy.bin") == read_file(dir.path() / "blob.bin"));
  CHECK(d.ctl("obj get missing " + (dir.path() / "nothing.bin").string()).exit_code == 3);
  CHECK_FALSE(std::filesystem::exists(dir.path() / "nothing.bin"));

  REQUIRE(d.ctl("import " + (dir.path() / "model").string() + " --as default/m@main").exit_code == 0);
  auto listed = d.ctl("obj ls");
  CHECK(has(listed.output, "cache/blob"));
  CHECK(has(listed.output, "managed by default/m@main#1"));
  CHECK(d.ctl("obj ls cache/").output.find("weights/") == std::string::npos);

  auto refused = d.ctl("obj rm weights/default/m/main/1/files/w.bin --force");
  CHECK(refused.exit_code == 12);  // MANAGED_OBJECT
  CHECK(has(refused.output, "remove or abort the revision instead"));
  CHECK(d.ctl("obj rm cache/blob").exit_code == 13);  // OBJECT_HAS_LEASE: the get's read lease
  CHECK(d.ctl("obj rm cache/blob --force").exit_code == 0);
  CHECK(d.ctl("obj rm cache/blob").exit_code == 3);
}

TEST_CASE("cli policy: changes the parts given and bumps the generation, bad values name the flag") {
  temp_dir dir;
  write_file(dir.path() / "model" / "a.bin", pattern(1000, 1));
  write_file(dir.path() / "model" / "b.bin", pattern(1000, 2));
  running_daemon d{dir.path() / "var"};
  REQUIRE(d.ctl("import " + (dir.path() / "model").string() + " --as default/m@main").exit_code == 0);

  auto manual = d.ctl("policy default/m@main --mode MANUAL");
  REQUIRE_MESSAGE(manual.exit_code == 0, manual.output);
  CHECK(has(manual.output, "policy HOT MANUAL"));
  CHECK(has(manual.output, "generation 3"));
  auto bad = d.ctl("policy default/m@main --preferred WARM");
  CHECK(bad.exit_code == 2);
  CHECK(has(bad.output, "--preferred"));
  auto shown = d.ctl("show default/m@main --json").output;
  CHECK(has(shown, "\"migration_mode\": \"MANUAL\""));
}

TEST_CASE("cli abort: an IMPORTING revision is aborted with its uploads and the keys given") {
  temp_dir dir;
  write_file(dir.path() / "stray.bin", pattern(100, 3));
  running_daemon d{dir.path() / "var"};
  api::client_options o;
  o.address = d.address;
  api::client c{o};
  events::revision_key id{"default", "default", "m", "main", 1};
  v1::BeginImportRequest begin;
  *begin.mutable_id() = id.to_proto();
  begin.set_expected_payload_count(2);
  begin.set_expected_logical_bytes(200);
  REQUIRE(c.begin_import(begin).ok());
  v1::PutHeader member;
  member.set_key("weights/m/part-0");
  member.set_group_id(events::payload_group_id(id));
  member.set_data_type(events::v1::DATA_TYPE_WEIGHT);
  REQUIRE(c.put_bytes(member, pattern(100, 1)).ok());
  REQUIRE(d.ctl("obj put upload/tmp " + (dir.path() / "stray.bin").string()).exit_code == 0);

  auto aborted = d.ctl("abort default/m@main --remove upload/tmp");
  REQUIRE_MESSAGE(aborted.exit_code == 0, aborted.output);
  CHECK(has(aborted.output, "aborted default/m@main#1: 2 objects removed (DELETED)"));
  CHECK(d.ctl("obj ls").output == "no objects\n");
  CHECK(d.ctl("abort default/m@main").exit_code == 0);  // already gone: a no-op
}
