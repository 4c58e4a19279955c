// migration_bench: what moving a revision between the tiers costs over
// copying its files by hand, and what one reconciler round costs.
//
// 1. Migration. A READY revision of --bytes in --units equal payloads (one
//    affinity unit each; MANUAL mode, so the reconciler leaves it alone) on
//    an in-process node (fsynced LMDB journal, HOT on tmpfs, COLD on disk) is
//    migrated HOT -> COLD, then COLD -> HOT: Migrate to the registry, then
//    GetOperation polled every 2 ms until the operation is COMPLETED.
//    Baselines on the same bytes in the same run, in-process (read/write/
//    fsync, no shelling out), one file after another:
//      HOT -> COLD  `cp` + `sync`: read each HOT replica and write it into a
//                   COLD directory, then fsync every file and the directory;
//      COLD -> HOT  `cat`: read each COLD file into a file of a tmpfs
//                   directory; for reference also `cat > /dev/null` (the read
//                   alone).
//    weightd copies a round's units in parallel on its I/O workers, hashing
//    (xxh3) as it copies, fsyncs COLD files and their directory before their
//    replica event, and journals each round. Before COLD -> HOT every COLD
//    file's pages are dropped (fdatasync + POSIX_FADV_DONTNEED), so both
//    sides read from the disk.
// 2. Reconciler round. plan_reconcile (the pure planner) over --revisions
//    synthetic READY, HOT, AUTO revisions with varied access times, sizes and
//    unit counts (inserted in a shuffled order, so the map's nodes lie
//    scattered over the heap as the registry's do), in three cases: steady
//    (HOT usage between the relief line and the high watermark), pressure
//    (above the high watermark: it orders every candidate and plans
//    demotions) and relief (below the relief line, every tenth revision COLD
//    preferring HOT: it plans promotions). Then,
//    unless --registry-revisions is 0, a dry-run Reconcile through a real
//    registry holding that many tiny imported revisions (no-sync journal for
//    the setup; reconciler rounds of its own 1 h apart), first without
//    pressure, then above the high watermark (a hard-pinned object fills HOT);
//    and the object store's stats request alone (the round's other part).
// Prints figures and ratios (targets: migration >= 0.7x of the baseline, a
// round < 5 ms); asserts nothing.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "actors/embedded.hpp"
#include "actors/errors.hpp"
#include "core/reconcile_plan.hpp"
#include "events/digest.hpp"
#include "events/identity.hpp"
#include "persistence/tier_store.hpp"

using namespace weightd;
using clock_type = std::chrono::steady_clock;
namespace v1 = events::v1;
namespace fs = std::filesystem;

namespace {

constexpr size_t kChunk = 4u << 20;  // the tier store's copy chunk

// The scratch directories, removed at exit (also after a failure).
fs::path g_dir, g_hot_dir;
void remove_scratch() {
  std::error_code ec;
  if (!g_dir.empty()) fs::remove_all(g_dir, ec);
  if (!g_hot_dir.empty()) fs::remove_all(g_hot_dir, ec);
}

[[noreturn]] void fail(const std::string& what) {
  std::fflush(stdout);
  std::fprintf(stderr, "migration_bench: %s\n", what.c_str());
  remove_scratch();
  std::_Exit(1);  // actors may still run: do not wait for them
}

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

void drop_cache(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail("cannot open " + path.string());
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

void fsync_path(const fs::path& path, bool directory) {
  int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0 || ::fsync(fd) != 0) fail("cannot fsync " + path.string());
  ::close(fd);
}

/// Copies `from` to `to` (to = "" reads only), in the tier store's chunks.
uint64_t copy_file(const fs::path& from, const fs::path& to, std::vector<char>& buf) {
  int in = ::open(from.c_str(), O_RDONLY);
  if (in < 0) fail("cannot open " + from.string());
  int out = to.empty() ? -1 : ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (!to.empty() && out < 0) fail("cannot create " + to.string());
  uint64_t total = 0;
  for (ssize_t n; (n = ::read(in, buf.data(), buf.size())) > 0;) {
    if (out >= 0 && ::write(out, buf.data(), static_cast<size_t>(n)) != n) fail("write " + to.string());
    total += static_cast<uint64_t>(n);
  }
  ::close(in);
  if (out >= 0) ::close(out);
  return total;
}

// ------------------------------------------------------------ the node

template <class T, class Handle, class Msg>
T ask(caf::scoped_actor& self, const Handle& to, Msg msg) {
  T out{};
  self->request(to, std::chrono::minutes(10), std::move(msg))
      .receive([&](T& reply) { out = std::move(reply); },
               [](caf::error& e) { fail(caf::to_string(e)); });
  return out;
}

struct imported {
  events::revision_key id;
  std::vector<std::string> keys;
  uint64_t generation = 0;
};

/// Imports a READY revision of `units` payloads of `unit_bytes` (one affinity
/// unit each) with `policy`; `data` holds unit_bytes of content.
imported import_revision(actors::embedded& store, const std::string& resource, int units,
                         uint64_t unit_bytes, const events::policy& policy, std::string& data) {
  imported out;
  out.id = {"default", "default", resource, "main", 1};
  auto total = unit_bytes * static_cast<uint64_t>(units);
  actors::begin_import begin{out.id, "", static_cast<uint64_t>(units), total, true, policy,
                             static_cast<uint64_t>(units), "bench", ""};
  auto begun = store.begin_import(begin).get();
  if (!begun) fail(begun.error().to_string());
  auto group = events::payload_group_id(out.id);
  std::string manifest = "{\"files\":[";
  for (int i = 0; i < units; ++i) {
    actors::put_request put;
    put.key = "weights/" + resource + "/part-" + std::to_string(i);
    put.group_id = group;
    put.data_type = v1::DATA_TYPE_WEIGHT;
    put.affinity_id = "file-" + std::to_string(i);
    if (data.size() >= 8) std::memcpy(data.data(), &i, sizeof i);  // distinct contents
    if (auto r = store.put_object(put, std::string_view(data.data(), unit_bytes)); !r)
      fail(r.error().to_string());
    manifest += std::string(i ? "," : "") + "\"" + put.key + "\"";
    out.keys.push_back(put.key);
  }
  manifest += "]}";
  actors::put_request meta;
  meta.key = events::manifest_key(out.id);
  meta.group_id = group;
  meta.data_type = v1::DATA_TYPE_METADATA;
  if (auto r = store.put_object(meta, manifest); !r) fail(r.error().to_string());
  actors::commit_import commit;
  commit.id = out.id;
  commit.expected_generation = begun->record.metadata_generation;
  commit.manifest = {meta.key,         events::sha256_hex(manifest),
                     group,            events::payload_keys_sha256(out.keys),
                     out.keys.size(),  total};
  commit.payload_keys = out.keys;
  auto committed = store.commit_import(commit).get();
  if (!committed) fail(committed.error().to_string());
  out.generation = committed->record.metadata_generation;
  return out;
}

/// Migrate, then GetOperation every 2 ms until it ends. Returns seconds.
double migrate(actors::embedded& store, imported& rev, v1::Residency target) {
  caf::scoped_actor self{store.system()};
  auto registry = store.handles().registry();
  auto start = clock_type::now();
  auto op = ask<events::operation_record>(
      self, registry, actors::migrate_revision{rev.id, rev.generation, target, 0, "bench", ""});
  while (op.state == events::operation_state::running) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    op = ask<events::operation_record>(self, registry, actors::get_operation{op.id});
  }
  double elapsed = seconds_since(start);
  if (op.state != events::operation_state::completed)
    fail("operation " + std::to_string(op.id) + " did not complete: " + op.message);
  auto view = ask<actors::revision_view>(self, registry, actors::get_revision{rev.id, false});
  if (view.record.residency != target)
    fail("the revision is " + v1::Residency_Name(view.record.residency) + " after migrating to " +
         v1::Residency_Name(target));
  rev.generation = view.record.metadata_generation;
  return elapsed;
}

void migration_figures(const fs::path& dir, const fs::path& hot_dir, uint64_t bytes, int units) {
  uint64_t unit_bytes = bytes / static_cast<uint64_t>(units);
  uint64_t total = unit_bytes * static_cast<uint64_t>(units);
  actors::node_config c;
  c.journal.dir = dir / "journal";
  c.hot = {v1::TIER_HOT, hot_dir / "hot", 2 * total + (1ull << 30), false};
  c.cold = {v1::TIER_COLD, dir / "cold", 0, true};
  auto started = actors::embedded::start(c);
  if (!started) fail(started.error().to_string());
  auto& store = **started;
  persistence::tier_store hot_tier{c.hot}, cold_tier{c.cold};
  auto raw_cold = dir / "raw", raw_hot = hot_dir / "raw";
  fs::create_directories(raw_cold);
  fs::create_directories(raw_hot);

  std::string data(unit_bytes, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 2654435761u) >> 13);
  auto start = clock_type::now();
  auto rev = import_revision(store, "migration-bench", units, unit_bytes,
                             {v1::RESIDENCY_HOT, 0.5, v1::MIGRATION_MANUAL}, data);
  double import_s = seconds_since(start);
  std::string().swap(data);

  std::printf("migration_bench: a revision of %d x %.0f MiB = %.0f MiB (HOT %s, COLD %s, sync journal)\n\n",
              units, mib(unit_bytes), mib(total), c.hot.dir.c_str(), c.cold.dir.c_str());
  std::printf("import (puts into HOT + commit): %.0f MiB/s\n\n", mib(total) / import_s);

  auto replica = [&](const persistence::tier_store& t, size_t i) {
    return t.object_path({"default", rev.keys[i]});
  };
  auto raw = [&](const fs::path& d, size_t i) { return d / ("part-" + std::to_string(i)); };
  std::vector<char> buf(kChunk);

  // HOT -> COLD: `cp` + `sync`, then weightd.
  start = clock_type::now();
  for (size_t i = 0; i < rev.keys.size(); ++i)
    if (copy_file(replica(hot_tier, i), raw(raw_cold, i), buf) != unit_bytes) fail("short copy");
  for (size_t i = 0; i < rev.keys.size(); ++i) fsync_path(raw(raw_cold, i), false);
  fsync_path(raw_cold, true);
  double cp_s = seconds_since(start);
  double demote_s = migrate(store, rev, v1::RESIDENCY_COLD);

  // COLD -> HOT: every COLD file read from the disk.
  auto drop_all = [&] {
    for (size_t i = 0; i < rev.keys.size(); ++i) {
      drop_cache(raw(raw_cold, i));
      drop_cache(replica(cold_tier, i));
    }
  };
  drop_all();
  start = clock_type::now();
  for (size_t i = 0; i < rev.keys.size(); ++i)
    if (copy_file(raw(raw_cold, i), raw(raw_hot, i), buf) != unit_bytes) fail("short cat");
  double cat_s = seconds_since(start);
  fs::remove_all(raw_hot);
  drop_all();
  start = clock_type::now();
  for (size_t i = 0; i < rev.keys.size(); ++i)
    if (copy_file(raw(raw_cold, i), {}, buf) != unit_bytes) fail("short read");
  double read_s = seconds_since(start);
  drop_all();
  double promote_s = migrate(store, rev, v1::RESIDENCY_HOT);

  double demote = mib(total) / demote_s, cp = mib(total) / cp_s;
  double promote = mib(total) / promote_s, cat = mib(total) / cat_s, read = mib(total) / read_s;
  std::printf("%-11s %14s %10s %-22s %10s %6s\n", "direction", "weightd MiB/s", "seconds",
              "baseline", "MiB/s", "ratio");
  std::printf("%-11s %14.0f %10.2f %-22s %10.0f %6.2f\n", "HOT->COLD", demote, demote_s,
              "cp + sync", cp, demote / cp);
  std::printf("%-11s %14.0f %10.2f %-22s %10.0f %6.2f\n", "COLD->HOT", promote, promote_s,
              "cat > tmpfs", cat, promote / cat);
  std::printf("%-11s %14s %10s %-22s %10.0f %6.2f\n", "", "", "", "cat > /dev/null (read)", read,
              promote / read);
  std::printf("(baselines: in-process read/write/fsync, one file after another; target >= 0.7x)\n");
}

// ------------------------------------------------------- the reconciler

struct round_figures {
  double mean_us = 0, median_us = 0, max_us = 0;
  size_t decisions = 0;
  bool pressure = false, relief = false;
};

round_figures summarize(std::vector<double>& us, const actors::reconcile_report& last) {
  std::sort(us.begin(), us.end());
  round_figures f;
  for (double x : us) f.mean_us += x;
  f.mean_us /= static_cast<double>(us.size());
  f.median_us = us[us.size() / 2];
  f.max_us = us.back();
  f.decisions = last.decisions.size();
  f.pressure = last.pressure;
  f.relief = last.relief;
  return f;
}

void print_round(const char* what, const round_figures& f, bool planned = true) {
  std::printf("%-34s %10.0f %10.0f %10.0f ", what, f.mean_us, f.median_us, f.max_us);
  if (!planned) std::printf("%10s %-9s\n", "-", "-");
  else
    std::printf("%10zu %-9s\n", f.decisions, f.pressure ? "pressure" : f.relief ? "relief" : "steady");
}

void print_round_header(const char* first) {
  std::printf("%-34s %10s %10s %10s %10s %-9s\n", first, "mean us", "median us", "max us",
              "decisions", "state");
}

round_figures time_planner(const std::map<events::revision_key, actors::revision_view>& views,
                           int64_t now, const actors::hot_tier_usage& hot,
                           const actors::reconciler_config& config, int rounds) {
  actors::reconcile_report last;
  for (int i = 0; i < 3; ++i) last = actors::plan_reconcile(views, {}, now, hot, config);  // warm-up
  std::vector<double> us;
  for (int i = 0; i < rounds; ++i) {
    auto start = clock_type::now();
    last = actors::plan_reconcile(views, {}, now, hot, config);
    us.push_back(seconds_since(start) * 1e6);
  }
  return summarize(us, last);
}

void planner_figures(int revisions, int rounds) {
  constexpr int64_t kDay = 86'400'000;
  const int64_t base = 1'796'208'000'000, now = base + 7 * kDay + 3'600'000;
  std::map<events::revision_key, actors::revision_view> views;
  uint64_t hot_bytes = 0;
  // Inserted in a shuffled order, with their payload keys, so that the map's
  // nodes lie scattered over the heap as the registry's do (a map filled in
  // key order is walked in address order, which flatters the planner).
  std::vector<int> order(static_cast<size_t>(revisions));
  for (int i = 0; i < revisions; ++i) order[static_cast<size_t>(i)] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937{42});
  for (int i : order) {
    char name[32];
    std::snprintf(name, sizeof name, "model-%06d", i);
    actors::revision_view v;
    auto& r = v.record;
    r.id = {"default", "default", name, "main", 1};
    r.availability = v1::READY;
    r.residency = v1::RESIDENCY_HOT;
    r.policy = {v1::RESIDENCY_HOT, 0.5, v1::MIGRATION_AUTO};
    r.metadata_generation = 2;
    r.payload_group_id = events::payload_group_id(r.id);
    r.affinity_units = 1 + static_cast<uint64_t>(i % 16);
    r.manifest.payload_count = r.affinity_units;
    r.manifest.manifest_key = events::manifest_key(r.id);
    for (uint64_t u = 0; u < r.affinity_units; ++u)
      r.payload_keys.push_back("weights/" + r.id.resource + "/part-" + std::to_string(u));
    r.manifest.logical_bytes = (1 + (static_cast<uint64_t>(i) * 7919) % 4096) << 20;  // 1 MiB..4 GiB
    r.observed_hot_ratio = 1.0;
    r.created_at_ms = base;
    r.last_accessed_at_ms = base + static_cast<int64_t>((static_cast<uint64_t>(i) * 104729) % (7 * kDay));
    r.updated_at_ms = r.last_accessed_at_ms;
    hot_bytes += r.manifest.logical_bytes;
    views.emplace(r.id, std::move(v));
  }
  actors::reconciler_config config;  // 64 actions, high watermark 0.90, eviction ratio 0.05
  auto at = [&](uint64_t used, double fraction) {
    return actors::hot_tier_usage{used, 0, static_cast<uint64_t>(static_cast<double>(used) / fraction), false};
  };
  std::printf("\nreconciler round: plan_reconcile over %d READY AUTO revisions, %d rounds each\n\n",
              revisions, rounds);
  print_round_header("case (HOT usage)");
  print_round("steady (85%)", time_planner(views, now, at(hot_bytes, 0.85), config, rounds));
  print_round("pressure (95%)", time_planner(views, now, at(hot_bytes, 0.95), config, rounds));
  // Relief: every tenth revision COLD (preferring HOT), usage well below the relief line.
  uint64_t still_hot = hot_bytes;
  for (auto& [id, v] : views)
    if (std::stoi(id.resource.substr(6)) % 10 == 0) {
      v.record.residency = v1::RESIDENCY_COLD;
      v.record.observed_hot_ratio = 0;
      still_hot -= v.record.manifest.logical_bytes;
    }
  print_round("relief (50%, a tenth COLD)", time_planner(views, now, at(still_hot, 0.50), config, rounds));
  std::printf("(target < 5000 us a round)\n");
}

/// A dry-run Reconcile through the registry of a node with `revisions` tiny
/// revisions, without and with pressure.
void registry_figures(const fs::path& dir, const fs::path& hot_dir, int revisions, int rounds) {
  constexpr uint64_t kCapacity = 64ull << 20;
  actors::node_config c;
  c.journal.dir = dir / "journal";
  c.journal.mode = persistence::durability::nosync;  // the setup only
  c.hot = {v1::TIER_HOT, hot_dir / "hot", kCapacity, false};
  c.cold = {v1::TIER_COLD, dir / "cold", 0, true};
  c.reconciler.interval = std::chrono::hours(1);  // no round of its own takes decisions meanwhile
  auto started = actors::embedded::start(c);
  if (!started) fail(started.error().to_string());
  auto& store = **started;
  std::string payload(16, 'w');
  auto start = clock_type::now();
  for (int i = 0; i < revisions; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "tiny-%06d", i);
    import_revision(store, name, 1, payload.size(), {v1::RESIDENCY_HOT, 0.5, v1::MIGRATION_AUTO},
                    payload);
  }
  double setup_s = seconds_since(start);
  caf::scoped_actor self{store.system()};
  auto registry = store.handles().registry();
  auto time_rounds = [&] {
    actors::reconcile_report last;
    for (int i = 0; i < 3; ++i) last = ask<actors::reconcile_report>(self, registry, actors::reconcile_request{true});
    std::vector<double> us;
    for (int i = 0; i < rounds; ++i) {
      auto t = clock_type::now();
      last = ask<actors::reconcile_report>(self, registry, actors::reconcile_request{true});
      us.push_back(seconds_since(t) * 1e6);
    }
    return summarize(us, last);
  };
  std::printf("\nreconciler round: dry-run Reconcile through the registry, %d tiny revisions "
              "(imported in %.1f s), %d rounds each\n\n", revisions, setup_s, rounds);
  print_round_header("case (HOT usage)");
  auto quiet = time_rounds();
  auto usage = ask<actors::store_stats>(self, store.handles().objects(), actors::stats_atom::value).hot;
  char what[64];
  std::snprintf(what, sizeof what, "no pressure (%.1f%%)",
                100.0 * static_cast<double>(usage.used_bytes) / kCapacity);
  print_round(what, quiet);
  // Pressure: a hard-pinned object (never evicted, no revision's) fills HOT to 95%.
  uint64_t fill = static_cast<uint64_t>(0.95 * kCapacity) - usage.used_bytes;
  actors::put_request pin;
  pin.key = "bench/hot-filler";
  pin.hard_pin = true;
  pin.tier = v1::TIER_HOT;
  if (auto r = store.put_object(pin, std::string(fill, 'f')); !r) fail(r.error().to_string());
  auto loaded = time_rounds();
  usage = ask<actors::store_stats>(self, store.handles().objects(), actors::stats_atom::value).hot;
  std::snprintf(what, sizeof what, "pressure (%.1f%%)",
                100.0 * static_cast<double>(usage.used_bytes + usage.reserved_bytes) / kCapacity);
  print_round(what, loaded);
  // The part of a round that is not the planner: the object store's stats.
  std::vector<double> us;
  for (int i = 0; i < rounds; ++i) {
    auto t = clock_type::now();
    (void)ask<actors::store_stats>(self, store.handles().objects(), actors::stats_atom::value);
    us.push_back(seconds_since(t) * 1e6);
  }
  print_round("of which: the store's stats request", summarize(us, {}), false);
  std::printf("(a round here is the object store's stats request, the planner over the registry's\n"
              " views and the report's reply)\n");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"migration_bench: HOT<->COLD migration vs cp/cat, and reconciler round cost"};
  std::string dir = "/var/tmp/weightd-migration-bench-" + std::to_string(getpid());
  std::string hot_dir = "/dev/shm/weightd-migration-bench-" + std::to_string(getpid());
  uint64_t bytes = 2ull << 30;
  int units = 8, revisions = 10'000, registry_revisions = 10'000, rounds = 200;
  app.add_option("--dir", dir, "Scratch directory on the disk (COLD tier, journal; removed at the end)")
      ->capture_default_str();
  app.add_option("--hot-dir", hot_dir, "Scratch directory on tmpfs (HOT tier; removed at the end)")
      ->capture_default_str();
  app.add_option("--bytes", bytes, "Payload bytes of the migrated revision (e.g. 256MiB, 2GiB)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  app.add_option("--units", units, "Payload files (affinity units) of the migrated revision")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--revisions", revisions, "Synthetic READY revisions for plan_reconcile")
      ->check(CLI::Range(1, 10'000'000))
      ->capture_default_str();
  app.add_option("--registry-revisions", registry_revisions,
                 "Tiny revisions imported for the registry's dry-run Reconcile (0 = skip)")
      ->check(CLI::Range(0, 1'000'000))
      ->capture_default_str();
  app.add_option("--rounds", rounds, "Timed rounds per reconciler case")
      ->check(CLI::Range(1, 1'000'000))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);  // not one info line per import and operation
  if (bytes / static_cast<uint64_t>(units) == 0) fail("--bytes must be at least --units bytes");
  for (const auto& d : {dir, hot_dir})
    if (fs::exists(d)) fail(d + " exists; name a new scratch directory");
  g_dir = dir;
  g_hot_dir = hot_dir;
  std::atexit(remove_scratch);
  fs::create_directories(g_dir);
  fs::create_directories(g_hot_dir);

  migration_figures(g_dir / "migration", g_hot_dir / "migration", bytes, units);
  planner_figures(revisions, rounds);
  if (registry_revisions > 0)
    registry_figures(g_dir / "registry", g_hot_dir / "registry", registry_revisions, rounds);
  return 0;
}
