// SPEC §2 (tiers, eviction on an allocation failure, spill), §5, §6: weightd
// on real, small filesystems that run out before its own accounting does.
// Each case mounts its own 8 MiB tmpfs for the HOT tier, the COLD tier or the
// journal (root only; otherwise the case says so and does nothing) and gives
// the tier a capacity far above it, so that the filesystem answers ENOSPC.
#include <doctest/doctest.h>

#include <regex>

#include "fs_fault_support.hpp"

using namespace weightd;
using namespace weightd::test;

namespace {

constexpr uint64_t MiB = 1 << 20;

/// A store whose HOT tier, COLD tier or journal may live on a small tmpfs.
struct fault_store {
  temp_dir dir;
  std::filesystem::path data = dir.path() / "data";
  std::filesystem::path hot = dir.path() / "hot";
  std::filesystem::path cold = dir.path() / "cold";
  std::filesystem::path journal = dir.path() / "journal";
  std::filesystem::path log = dir.path() / "weightd.log";

  std::vector<std::string> flags(std::vector<std::string> extra = {}) const {
    std::vector<std::string> f{"--cold-dir", cold.string(), "--journal-dir", journal.string(),
                               "--hot-capacity", "64MiB", "--cold-capacity", "64MiB",
                               "--auto-cooldown", "1h"};
    f.insert(f.end(), extra.begin(), extra.end());
    return daemon_flags(data, hot, f);
  }
  /// A file of `n` deterministic bytes in the test's directory.
  std::filesystem::path source(const std::string& name, uint64_t n, unsigned seed) const {
    auto path = dir.path() / "src" / name;
    write_file(path, pattern(n, seed));
    return path;
  }
};

/// `weightctl obj get KEY` into a file; the bytes ("" and the exit code when it fails).
std::pair<int, std::string> get_object(const fault_daemon& d, const fault_store& s,
                                       const std::string& key) {
  auto out = s.dir.path() / "got";
  std::filesystem::remove(out);
  auto r = d.ctl("obj get " + key + " " + out.string());
  return {r.exit_code, r.exit_code == 0 ? read_file(out) : r.output};
}

/// Polls `op show N` until its text contains `what` (at most `seconds`).
std::string wait_for_operation(const fault_daemon& d, const std::string& id,
                               const std::string& what, int seconds = 8) {
  std::string last;
  for (int i = 0; i < seconds * 20; ++i) {
    last = d.ctl("op show " + id).output;
    if (contains(last, what)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return last;
}

}  // namespace

// ------------------------------------------------------------------ HOT

TEST_CASE("tier fault: a put the HOT filesystem cannot hold (ENOSPC) fails with NO_AVAILABLE_SPACE saying what to do, publishes nothing and gives its reservation back") {
  fault_store s;
  small_fs fs(s.hot);
  REQUIRE_SMALL_FS_OR_SKIP(fs);
  fault_daemon d(s.flags(), s.log);
  REQUIRE_MESSAGE(d.serving(), d.log());

  auto big = s.source("big", 12 * MiB, 1);
  auto put = d.ctl("obj put k/big " + big.string());
  CHECK(put.exit_code == 15);
  CHECK_MESSAGE(contains(put.output, "NO_AVAILABLE_SPACE"), put.output);
  CHECK_MESSAGE(contains(put.output, "No space left on device"), put.output);
  CHECK_MESSAGE(contains(put.output, "free space"), put.output);  // what to do

  // Nothing published: not listed, not readable, not in the journal, no file left.
  CHECK_FALSE(contains(d.ctl("obj ls").output, "k/big"));
  CHECK(get_object(d, s, "k/big").first == 3);  // NOT_FOUND
  auto dump = offline_ctl(s.journal, "journal dump --type object_put");
  CHECK_FALSE(contains(dump.output, "k/big"));
  CHECK(count_files(s.hot) == 0);
  CHECK(fs.free_bytes() >= 8 * MiB - 64 * 1024);
  // The reservation is given back, and the space is really free again.
  auto status = d.ctl("status");
  CHECK_MESSAGE(contains(status.output, "HOT          0 B used, 0 B reserved"), status.output);
  auto small = s.source("small", 4 * MiB, 2);
  REQUIRE(d.ctl("obj put k/small " + small.string()).exit_code == 0);
  CHECK(get_object(d, s, "k/small").second == read_file(small));
}

TEST_CASE("tier fault: an import whose payload neither the HOT nor the COLD filesystem can hold fails with NO_AVAILABLE_SPACE and nothing of it is published") {
  fault_store s;
  small_fs hot_fs(s.hot);
  REQUIRE_SMALL_FS_OR_SKIP(hot_fs);
  small_fs cold_fs(s.cold);
  REQUIRE_SMALL_FS_OR_SKIP(cold_fs);
  fault_daemon d(s.flags(), s.log);
  REQUIRE_MESSAGE(d.serving(), d.log());
  fill_until_full(s.cold / "filler");

  auto model = s.dir.path() / "model";
  write_file(model / "config.json", "{\"layers\": 2}\n");
  write_file(model / "model.safetensors", pattern(12 * MiB, 3));
  auto import = d.ctl("import " + model.string() + " --as default/big@main");
  CHECK(import.exit_code == 15);
  CHECK_MESSAGE(contains(import.output, "NO_AVAILABLE_SPACE"), import.output);
  CHECK_MESSAGE(contains(import.output, "aborted"), import.output);

  auto ls = d.ctl("ls --all");
  CHECK_FALSE_MESSAGE(contains(ls.output, "READY"), ls.output);
  auto lease = d.ctl("lease acquire default/big@main --holder reader");
  CHECK(lease.exit_code != 0);  // no lease on a revision that was never published
  CHECK_FALSE(contains(d.ctl("obj ls").output, "weights/"));
  CHECK(count_files(s.hot) == 0);
  CHECK(count_files(s.cold) == 1);  // the filler only
  auto status = d.ctl("status");
  CHECK_MESSAGE(contains(status.output, "HOT          0 B used, 0 B reserved"), status.output);
  CHECK(offline_ctl(s.journal, "journal verify").exit_code == 0);
}

TEST_CASE("tier fault: an import whose payload the HOT filesystem cannot hold spills to COLD while the disk has room") {
  fault_store s;
  small_fs fs(s.hot);
  REQUIRE_SMALL_FS_OR_SKIP(fs);
  fault_daemon d(s.flags(), s.log);
  REQUIRE_MESSAGE(d.serving(), d.log());

  auto model = s.dir.path() / "model";
  write_file(model / "config.json", "{\"layers\": 2}\n");
  write_file(model / "model.safetensors", pattern(12 * MiB, 4));
  auto import = d.ctl("import " + model.string() + " --as default/spilled@main");
  REQUIRE_MESSAGE(import.exit_code == 0, import.output);
  CHECK(contains(import.output, "READY"));
  auto restored = s.dir.path() / "restored";
  auto exported = d.ctl("export default/spilled@main " + restored.string());
  REQUIRE_MESSAGE(exported.exit_code == 0, exported.output);
  CHECK(read_file(restored / "model.safetensors") == read_file(model / "model.safetensors"));
  auto objects = d.ctl("obj ls weights/");
  CHECK_MESSAGE(contains(objects.output, "COLD"), objects.output);
  CHECK(offline_ctl(s.journal, "journal verify").exit_code == 0);
}

TEST_CASE("tier fault: an allocation failure on HOT (ENOSPC) evicts unleased unmanaged objects, least recently used first, and the put then succeeds") {
  fault_store s;
  small_fs fs(s.hot);
  REQUIRE_SMALL_FS_OR_SKIP(fs);
  fault_daemon d(s.flags(), s.log);
  REQUIRE_MESSAGE(d.serving(), d.log());
  // 6 of the filesystem's 8 MiB in evictable objects; weightd's accounting
  // (64 MiB, watermark 90 %) sees no pressure at all.
  for (auto key : {"a", "b", "c"})
    REQUIRE(d.ctl(std::string{"obj put k/"} + key + " " +
                  s.source(key, 2 * MiB, key[0]).string())
                .exit_code == 0);
  CHECK(fs.free_bytes() <= 2 * MiB);

  auto four = s.source("four", 4 * MiB, 5);
  auto put = d.ctl("obj put k/four " + four.string());
  REQUIRE_MESSAGE(put.exit_code == 0, put.output);
  CHECK(get_object(d, s, "k/four").second == read_file(four));
  auto ls = d.ctl("obj ls k/").output;
  CHECK_FALSE_MESSAGE(contains(ls, "k/a "), ls);  // the least recently used went first
  for (auto key : {"b", "c"})
    if (contains(ls, std::string{"k/"} + key + " "))
      CHECK(get_object(d, s, std::string{"k/"} + key).second ==
            read_file(s.dir.path() / "src" / key));
}

TEST_CASE("tier fault: an allocation failure on HOT (ENOSPC) never evicts hard-pinned objects: the put fails with NO_AVAILABLE_SPACE and they stay readable") {
  fault_store s;
  small_fs fs(s.hot);
  REQUIRE_SMALL_FS_OR_SKIP(fs);
  fault_daemon d(s.flags(), s.log);
  REQUIRE_MESSAGE(d.serving(), d.log());
  for (auto key : {"a", "b", "c"})
    REQUIRE(d.ctl(std::string{"obj put p/"} + key + " " +
                  s.source(key, 2 * MiB, key[0]).string() + " --pin")
                .exit_code == 0);

  auto put = d.ctl("obj put k/four " + s.source("four", 4 * MiB, 6).string());
  CHECK(put.exit_code == 15);
  CHECK_MESSAGE(contains(put.output, "NO_AVAILABLE_SPACE"), put.output);
  for (auto key : {"a", "b", "c"})
    CHECK(get_object(d, s, std::string{"p/"} + key).second ==
          read_file(s.dir.path() / "src" / key));
  CHECK_FALSE(contains(d.ctl("obj ls").output, "k/four"));
  CHECK(contains(d.ctl("status").output, "0 B reserved"));
}

// ----------------------------------------------------------------- COLD

TEST_CASE("tier fault: a put to COLD the COLD filesystem cannot hold fails with NO_AVAILABLE_SPACE and publishes nothing") {
  fault_store s;
  small_fs fs(s.cold);
  REQUIRE_SMALL_FS_OR_SKIP(fs);
  fault_daemon d(s.flags(), s.log);
  REQUIRE_MESSAGE(d.serving(), d.log());

  auto put = d.ctl("obj put k/big " + s.source("big", 12 * MiB, 7).string() + " --tier COLD");
  CHECK(put.exit_code == 15);
  CHECK_MESSAGE(contains(put.output, "NO_AVAILABLE_SPACE"), put.output);
  CHECK_MESSAGE(contains(put.output, "No space left on device"), put.output);
  CHECK_FALSE(contains(d.ctl("obj ls").output, "k/big"));
  CHECK(count_files(s.cold) == 0);
  auto status = d.ctl("status");
  CHECK_MESSAGE(contains(status.output, "COLD         0 B used"), status.output);
}

TEST_CASE("tier fault: a migration to COLD the COLD filesystem cannot hold keeps the revision READY and readable in HOT, the operation RUNNING with the error in its message, and completes once space returns") {
  fault_store s;
  small_fs fs(s.cold);
  REQUIRE_SMALL_FS_OR_SKIP(fs);
  // The export's short object read leases would hold the drop of the HOT
  // replicas back for 10 s after the copy.
  fault_daemon d(s.flags({"--object-read-lease", "100ms"}), s.log);
  REQUIRE_MESSAGE(d.serving(), d.log());

  auto model = s.dir.path() / "model";
  write_file(model / "config.json", "{\"layers\": 2}\n");
  write_file(model / "model-00001.safetensors", pattern(3 * MiB, 8));
  write_file(model / "model-00002.safetensors", pattern(3 * MiB, 9));
  REQUIRE(d.ctl("import " + model.string() + " --as default/m@main").exit_code == 0);
  auto filler = s.cold / "filler";
  leave_free(fs, filler, 2 * MiB);  // neither 3 MiB file fits

  auto migrate = d.ctl("migrate default/m@main --to COLD");
  REQUIRE_MESSAGE(migrate.exit_code == 0, migrate.output);
  std::smatch m;
  REQUIRE(std::regex_search(migrate.output, m, std::regex("operation ([0-9]+)")));
  std::string op = m[1];
  auto failing = wait_for_operation(d, op, "No space left on device");
  CHECK_MESSAGE(contains(failing, "No space left on device"), failing);
  CHECK_MESSAGE(contains(failing, "free space"), failing);  // what to do
  CHECK_MESSAGE(contains(failing, "RUNNING"), failing);

  auto ls = d.ctl("ls").output;
  CHECK_MESSAGE(contains(ls, "READY"), ls);
  CHECK_MESSAGE(std::regex_search(ls, std::regex("READY +HOT")), ls);
  auto restored = s.dir.path() / "restored";
  auto exported = d.ctl("export default/m@main " + restored.string());
  REQUIRE_MESSAGE(exported.exit_code == 0, exported.output);
  for (auto f : {"config.json", "model-00001.safetensors", "model-00002.safetensors"})
    CHECK(read_file(restored / f) == read_file(model / f));

  std::filesystem::remove(filler);  // the space returns: the retry goes through
  auto done = wait_for_operation(d, op, "COMPLETED");
  CHECK_MESSAGE(contains(done, "COMPLETED"), done);
  CHECK_MESSAGE(std::regex_search(d.ctl("ls").output, std::regex("READY +COLD")),
                d.ctl("ls").output);
  std::filesystem::remove_all(restored);
  REQUIRE(d.ctl("export default/m@main " + restored.string()).exit_code == 0);
  for (auto f : {"config.json", "model-00001.safetensors", "model-00002.safetensors"})
    CHECK(read_file(restored / f) == read_file(model / f));
  CHECK(offline_ctl(s.journal, "journal verify").exit_code == 0);
}

// -------------------------------------------------------------- journal

TEST_CASE("tier fault: a full journal filesystem fails the change with DURABILITY_FAILED, /healthz is 503, nothing unacknowledged is visible, and after space returns and a restart weightd works and journal verify is clean") {
  fault_store s;
  small_fs fs(s.journal);
  REQUIRE_SMALL_FS_OR_SKIP(fs);
  auto file = s.source("f", 1000, 10);
  std::vector<std::string> acknowledged;
  std::string refused_key;
  auto filler = s.journal / "filler";
  {
    fault_daemon d(s.flags(), s.log);
    REQUIRE_MESSAGE(d.serving(), d.log());
    for (int i = 0; i < 3; ++i) {
      auto key = "k/" + std::to_string(i);
      REQUIRE(d.ctl("obj put " + key + " " + file.string()).exit_code == 0);
      acknowledged.push_back(key);
    }
    CHECK(d.healthz().first == 200);
    fill_until_full(filler);

    // LMDB may still reuse freed pages for a commit or two; the first one
    // that needs a new page fails.
    run_result failed;
    for (int i = 3; i < 200; ++i) {
      auto key = "k/" + std::to_string(i);
      auto put = d.ctl("obj put " + key + " " + file.string());
      if (put.exit_code != 0) {
        failed = put;
        refused_key = key;
        break;
      }
      acknowledged.push_back(key);
    }
    REQUIRE_MESSAGE(!refused_key.empty(), "no put failed on a full journal filesystem");
    CHECK(failed.exit_code == 11);
    CHECK_MESSAGE(contains(failed.output, "DURABILITY_FAILED"), failed.output);
    CHECK_MESSAGE(contains(failed.output, "No space left on device"), failed.output);
    CHECK_MESSAGE(contains(failed.output, "restart weightd"), failed.output);

    auto health = d.healthz();
    CHECK(health.first == 503);
    CHECK_MESSAGE(contains(health.second, "the journal refuses writes"), health.second);
    auto again = d.ctl("obj put k/again " + file.string());
    CHECK(again.exit_code == 11);
    CHECK_MESSAGE(contains(again.output, "refuses writes"), again.output);
    auto ls = d.ctl("obj ls k/").output;
    CHECK_FALSE(contains(ls, refused_key + " "));
    CHECK_FALSE(contains(ls, "k/again"));
    for (const auto& key : acknowledged) CHECK_MESSAGE(contains(ls, key + " "), key);
    auto stopped = d.stop();
    CHECK(stopped.exited);  // a clean stop, no signal
    CHECK_FALSE(stopped.timed_out);
  }

  std::filesystem::remove(filler);
  fault_daemon d(s.flags(), s.log);
  REQUIRE_MESSAGE(d.serving(), d.log());
  CHECK(d.healthz().first == 200);
  for (const auto& key : acknowledged)
    CHECK_MESSAGE(get_object(d, s, key).second == read_file(file), key);  // every ack is durable
  auto refused = get_object(d, s, refused_key);
  if (refused.first == 0) CHECK(refused.second == read_file(file));  // whole or not at all
  else CHECK(refused.first == 3);
  CHECK(get_object(d, s, "k/again").first == 3);
  REQUIRE(d.ctl("obj put k/after " + file.string()).exit_code == 0);
  CHECK(get_object(d, s, "k/after").second == read_file(file));
  auto verify = offline_ctl(s.journal, "journal verify");
  CHECK_MESSAGE(verify.exit_code == 0, verify.output);
  CHECK(contains(verify.output, "every invariant holds"));
}
