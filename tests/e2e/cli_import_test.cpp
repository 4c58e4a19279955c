// weightctl import and export of real model directories (SPEC §7): symlinks,
// unreadable entries, path segments, names, parallel uploads, resume, progress.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "api/client/client.hpp"
#include "daemon_fixture.hpp"
#include "events/identity.hpp"

using namespace weightd;
using namespace weightd::test;
namespace fs = std::filesystem;

namespace {

api::client_options client_at(const std::string& address) {
  api::client_options o;
  o.address = address;
  return o;
}

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

/// Imports dir/model as default/m@main, expecting a refusal before any upload:
/// a non-zero exit, the output naming `named`, and no object stored. Returns
/// the output for the caller's own checks.
std::string refused_before_upload(running_daemon& d, const fs::path& dir, const std::string& named) {
  auto refused = d.ctl("import " + quoted(dir / "model") + " --as default/m@main");
  CHECK(refused.exit_code != 0);
  CHECK(has(refused.output, named));
  CHECK_FALSE(has(d.ctl("obj ls weights/").output, "a.bin"));
  return refused.output;
}

}  // namespace

TEST_CASE("import: a Hugging Face cache snapshot is stored under the links' own paths and exports") {
  temp_dir dir;
  auto repo = dir.path() / "models--org--m";
  write_file(repo / "blobs" / "aa11", pattern(3000, 1));
  write_file(repo / "blobs" / "bb22", pattern(5000, 2));
  auto snap = repo / "snapshots" / "rev1";
  fs::create_directories(snap / "sub");
  fs::create_symlink("../../blobs/aa11", snap / "config.json");
  fs::create_symlink("../../../blobs/bb22", snap / "sub" / "model.bin");
  running_daemon d{dir.path() / "var"};

  auto imported = d.ctl("import " + quoted(snap) + " --as default/hf@main --quiet");
  REQUIRE_MESSAGE(imported.exit_code == 0, imported.output);
  auto listed = d.ctl("obj ls weights/");
  CHECK(has(listed.output, "weights/default/hf/main/1/files/config.json"));
  CHECK(has(listed.output, "weights/default/hf/main/1/files/sub/model.bin"));
  CHECK_FALSE(has(listed.output, "blobs"));

  auto exported = d.ctl("export default/hf@main " + quoted(dir.path() / "out") + " --quiet");
  REQUIRE_MESSAGE(exported.exit_code == 0, exported.output);
  CHECK(read_file(dir.path() / "out" / "config.json") == pattern(3000, 1));
  CHECK(read_file(dir.path() / "out" / "sub" / "model.bin") == pattern(5000, 2));
}

TEST_CASE("import: a symlink to a sibling file is a second manifest entry with the same bytes") {
  temp_dir dir;
  write_file(dir.path() / "model" / "a.bin", pattern(2000, 3));
  fs::create_symlink("a.bin", dir.path() / "model" / "b.bin");
  running_daemon d{dir.path() / "var"};

  auto imported = d.ctl("import " + quoted(dir.path() / "model") + " --as default/m@main");
  REQUIRE_MESSAGE(imported.exit_code == 0, imported.output);
  CHECK(has(imported.output, "2 files"));
  REQUIRE(d.ctl("export default/m@main " + quoted(dir.path() / "out")).exit_code == 0);
  CHECK(read_file(dir.path() / "out" / "a.bin") == pattern(2000, 3));
  CHECK(read_file(dir.path() / "out" / "b.bin") == pattern(2000, 3));
}

TEST_CASE("import: a dangling symlink aborts the import naming the path before anything is uploaded") {
  temp_dir dir;
  write_file(dir.path() / "model" / "a.bin", pattern(2000, 4));
  fs::create_symlink("missing.bin", dir.path() / "model" / "gone.bin");
  running_daemon d{dir.path() / "var"};

  auto refused = refused_before_upload(d, dir.path(), (dir.path() / "model" / "gone.bin").string());
  CHECK(has(refused, "No such file or directory"));
  // Nothing was begun: the repaired directory is generation 1.
  fs::remove(dir.path() / "model" / "gone.bin");
  auto imported = d.ctl("import " + quoted(dir.path() / "model") + " --as default/m@main");
  REQUIRE_MESSAGE(imported.exit_code == 0, imported.output);
  CHECK(has(imported.output, "default/m@main#1"));
}

TEST_CASE("import: an entry that is not a file (a FIFO) or cannot be opened aborts naming it") {
  temp_dir dir;
  write_file(dir.path() / "model" / "a.bin", pattern(2000, 5));
  REQUIRE(mkfifo((dir.path() / "model" / "pipe").c_str(), 0600) == 0);
  running_daemon d{dir.path() / "var"};

  refused_before_upload(d, dir.path(), (dir.path() / "model" / "pipe").string());
  fs::remove(dir.path() / "model" / "pipe");

  if (geteuid() != 0) {  // root reads a mode-000 directory anyway
    write_file(dir.path() / "model" / "locked" / "w.bin", pattern(10, 1));
    fs::permissions(dir.path() / "model" / "locked", fs::perms::none);
    auto locked = d.ctl("import " + quoted(dir.path() / "model") + " --as default/m@main");
    fs::permissions(dir.path() / "model" / "locked", fs::perms::owner_all);
    CHECK(locked.exit_code != 0);
    CHECK(has(locked.output, "Permission denied"));
    CHECK(has(locked.output, (dir.path() / "model" / "locked").string()));
  }
}

TEST_CASE("import: '..' inside a segment (weights..v2.bin) imports and exports") {
  temp_dir dir;
  write_file(dir.path() / "model" / "weights..v2.bin", pattern(1500, 6));
  write_file(dir.path() / "model" / "..hidden" / "x", pattern(10, 7));
  running_daemon d{dir.path() / "var"};

  REQUIRE(d.ctl("import " + quoted(dir.path() / "model") + " --as default/m@main").exit_code == 0);
  auto exported = d.ctl("export default/m@main " + quoted(dir.path() / "out"));
  REQUIRE_MESSAGE(exported.exit_code == 0, exported.output);
  CHECK(read_file(dir.path() / "out" / "weights..v2.bin") == pattern(1500, 6));
  CHECK(read_file(dir.path() / "out" / "..hidden" / "x") == pattern(10, 7));
}

TEST_CASE("import: a file name that is not UTF-8 is refused naming it with the bytes escaped") {
  temp_dir dir;
  write_file(dir.path() / "model" / "a.bin", pattern(100, 8));
  write_file(dir.path() / "model" / "bad\xff.bin", pattern(100, 9));
  running_daemon d{dir.path() / "var"};

  auto refused = refused_before_upload(d, dir.path(), "bad\\xFF.bin");
  CHECK(has(refused, "UTF-8"));
}

TEST_CASE("import: --jobs outside 1..64 is refused naming the flag, 2 000 small files import in parallel") {
  temp_dir dir;
  for (int i = 0; i < 2000; ++i)
    write_file(dir.path() / "model" / ("f" + std::to_string(i) + ".bin"), pattern(1024, static_cast<unsigned>(i)));
  running_daemon d{dir.path() / "var"};

  auto zero = d.ctl("import " + quoted(dir.path() / "model") + " --as default/m@main --jobs 0");
  CHECK(zero.exit_code != 0);
  CHECK(has(zero.output, "--jobs"));
  CHECK(d.ctl("import " + quoted(dir.path() / "model") + " --as default/m@main --jobs 65").exit_code != 0);

  auto started = std::chrono::steady_clock::now();
  auto imported = d.ctl("import " + quoted(dir.path() / "model") + " --as default/m@main --jobs 8");
  auto took = std::chrono::steady_clock::now() - started;
  REQUIRE_MESSAGE(imported.exit_code == 0, imported.output);
  CHECK(has(imported.output, "2000 files"));
  CHECK(has(imported.output, "default/m@main#1"));  // the refused runs began nothing
  MESSAGE("2000 x 1 KiB imported in ", std::chrono::duration<double>(took).count(), " s");
  // Not a terminal: one progress line per file.
  CHECK(has(imported.output, "[2000/2000]"));
  auto quiet = d.ctl("import " + quoted(dir.path() / "model") + " --as default/m@main --quiet");
  REQUIRE(quiet.exit_code == 0);
  CHECK_FALSE(has(quiet.output, "[1/2000]"));
}

TEST_CASE("import --resume: payloads already stored are not sent again, the rest is, then commit") {
  temp_dir dir;
  write_file(dir.path() / "model" / "a.bin", pattern(4000, 10));
  write_file(dir.path() / "model" / "b.bin", pattern(6000, 11));
  running_daemon d{dir.path() / "var"};
  // An interrupted import: begun, a.bin stored, nothing else.
  api::client c{client_at(d.address)};
  events::revision_key id{"default", "default", "m", "main", 1};
  v1::BeginImportRequest begin;
  *begin.mutable_id() = id.to_proto();
  begin.set_expected_payload_count(2);
  begin.set_expected_logical_bytes(10000);
  begin.set_affinity_count(2);
  REQUIRE(c.begin_import(begin));
  v1::PutHeader h;
  h.set_tenant("default");
  h.set_key("weights/default/m/main/1/files/a.bin");
  h.set_group_id(events::payload_group_id(id));
  h.set_data_type(events::v1::DATA_TYPE_WEIGHT);
  h.set_affinity_id("a.bin");
  h.set_tier(events::v1::TIER_HOT);
  REQUIRE(c.put_file(h, dir.path() / "model" / "a.bin"));

  auto resumed = d.ctl("import " + quoted(dir.path() / "model") + " --as default/m@main --resume");
  REQUIRE_MESSAGE(resumed.exit_code == 0, resumed.output);
  CHECK(has(resumed.output, "default/m@main#1"));
  CHECK(has(resumed.output, "resumed"));
  CHECK_FALSE(has(resumed.output, "[1/2] a.bin"));  // a.bin was not sent again
  REQUIRE(d.ctl("export default/m@main " + quoted(dir.path() / "out")).exit_code == 0);
  CHECK(read_file(dir.path() / "out" / "a.bin") == pattern(4000, 10));
  CHECK(read_file(dir.path() / "out" / "b.bin") == pattern(6000, 11));
  // Nothing IMPORTING: --resume is an ordinary import of the next generation.
  auto again = d.ctl("import " + quoted(dir.path() / "model") + " --as default/m@main --resume");
  REQUIRE_MESSAGE(again.exit_code == 0, again.output);
  CHECK(has(again.output, "default/m@main#2"));
}

namespace {

// Begins generation 1 of default/m@main with `payloads` payloads of `bytes`
// in all; returns its metadata generation.
uint64_t begin_import(api::client& c, uint64_t payloads, uint64_t bytes) {
  v1::BeginImportRequest begin;
  *begin.mutable_id() = events::revision_key{"default", "default", "m", "main", 1}.to_proto();
  begin.set_expected_payload_count(payloads);
  begin.set_expected_logical_bytes(bytes);
  begin.set_affinity_count(payloads);
  auto begun = c.begin_import(begin);
  REQUIRE(begun);
  return begun->metadata_generation();
}

v1::PutHeader payload_header(const std::string& key, const std::string& file) {
  v1::PutHeader h;
  h.set_tenant("default");
  h.set_key(key);
  h.set_group_id(events::payload_group_id({"default", "default", "m", "main", 1}));
  h.set_data_type(events::v1::DATA_TYPE_WEIGHT);
  h.set_affinity_id(file);
  h.set_tier(events::v1::TIER_HOT);
  return h;
}

}  // namespace

TEST_CASE("import --resume: a stored object with other bytes stops the import, left IMPORTING for abort") {
  temp_dir dir;
  write_file(dir.path() / "model" / "a.bin", pattern(4000, 12));
  running_daemon d{dir.path() / "var"};
  api::client c{client_at(d.address)};
  begin_import(c, 1, 4000);
  REQUIRE(c.put_bytes(payload_header("weights/default/m/main/1/files/a.bin", "a.bin"),
                      std::string(4000, 'x')));  // the same size, other bytes

  auto refused = d.ctl("import " + quoted(dir.path() / "model") + " --as default/m@main --resume");
  CHECK(refused.exit_code != 0);
  CHECK(has(refused.output, "weights/default/m/main/1/files/a.bin"));
  CHECK(has(refused.output, "weightctl abort default/m@main#1"));
  auto shown = d.ctl("show default/m@main#1 --json");
  CHECK_MESSAGE(has(shown.output, "\"IMPORTING\""), shown.output);
  // The way out the message names works, and then the import does.
  REQUIRE(d.ctl("abort default/m@main#1").exit_code == 0);
  auto imported = d.ctl("import " + quoted(dir.path() / "model") + " --as default/m@main");
  REQUIRE_MESSAGE(imported.exit_code == 0, imported.output);
}

TEST_CASE("export: a manifest naming an unsafe path is refused naming it, and nothing is written") {
  temp_dir dir;
  running_daemon d{dir.path() / "var"};
  api::client c{client_at(d.address)};
  auto metadata_generation = begin_import(c, 1, 100);
  auto key = std::string("weights/default/m/main/1/files/x");
  REQUIRE(c.put_bytes(payload_header(key, "x"), pattern(100, 14)));
  auto manifest = std::string(R"({"format":"weightd.model/1","files":[{"path":"../escaped.bin","size":"100",)") +
                  R"("chunks":[{"key":")" + key + R"(","offset":"0","size":"100"}]}]})";
  v1::PutHeader mh;
  mh.set_tenant("default");
  mh.set_key(events::manifest_key({"default", "default", "m", "main", 1}));
  mh.set_group_id(events::payload_group_id({"default", "default", "m", "main", 1}));
  mh.set_data_type(events::v1::DATA_TYPE_METADATA);
  auto stored = c.put_bytes(mh, manifest);
  REQUIRE(stored);
  v1::CommitImportRequest commit;
  *commit.mutable_id() = events::revision_key{"default", "default", "m", "main", 1}.to_proto();
  commit.set_expected_metadata_generation(metadata_generation);
  auto* m = commit.mutable_manifest();
  m->set_manifest_key(mh.key());
  m->set_manifest_sha256(stored->sha256());
  m->set_payload_keys_sha256(events::payload_keys_sha256({key}));
  m->set_payload_count(1);
  m->set_logical_bytes(100);
  commit.add_payload_keys(key);
  auto committed = c.commit_import(commit);
  REQUIRE_MESSAGE(committed, committed.error().to_string());

  auto refused = d.ctl("export default/m@main " + quoted(dir.path() / "out"));
  CHECK(refused.exit_code != 0);
  CHECK(has(refused.output, "'../escaped.bin'"));
  CHECK_FALSE(fs::exists(dir.path() / "escaped.bin"));
  CHECK_FALSE(fs::exists(dir.path() / "out"));
}
