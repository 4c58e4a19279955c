// weightctl import and export: a model directory to a revision and back.
#include "api/cli/transfer_commands.hpp"

#include <google/protobuf/util/json_util.h>
#include <spdlog/fmt/fmt.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <fstream>
#include <future>
#include <optional>
#include <set>

#include "actors/mixed_planner.hpp"
#include "api/cli/format.hpp"
#include "api/cli/lease_commands.hpp"
#include "api/cli/online_support.hpp"
#include "api/cli/progress.hpp"
#include "events/identity.hpp"
#include "events/time_text.hpp"
#include "persistence/tier_store.hpp"

namespace weightd::api {

namespace ev1 = events::v1;
namespace fs = std::filesystem;

namespace {
constexpr uint64_t kPayloadBytes = 64ull << 20;
constexpr std::chrono::milliseconds kExportLeaseTtl{30'000};  // renewed every 10 s
constexpr int kExitInterrupted = 130;                          // 128 + SIGINT, as shells do
}  // namespace

int import_dir(const online_options& o, const std::string& dir, const std::string& text,
               const policy_args& policy, std::ostream& out, std::ostream& err) {
  client c{o.connection};
  std::optional<ev1::Policy> requested;  // none given: the daemon's default
  if (!policy.preferred.empty() || !policy.mode.empty() || policy.mixed_hot_ratio != 0) {
    requested.emplace();
    auto preferred = parse_residency(policy.preferred.empty() ? "HOT" : policy.preferred, "--preferred");
    if (!preferred) return fail(err, preferred.error());
    requested->set_preferred_residency(*preferred);
    requested->set_mixed_hot_ratio(policy.mixed_hot_ratio ? policy.mixed_hot_ratio : 0.5);
    int mode = parse_enum_name(policy.mode.empty() ? "AUTO" : policy.mode, "MIGRATION_",
                               ev1::MigrationMode_descriptor());
    if (mode < 0) return fail(err, {errc::invalid_argument, "--mode must be AUTO, MANUAL or PINNED"});
    requested->set_migration_mode(static_cast<ev1::MigrationMode>(mode));
  }
  auto parsed = events::parse_canonical_text(text);
  if (!parsed) return fail(err, parsed.error());
  auto id = *parsed;
  if (!id.generation) {  // the next generation of the lineage
    auto highest = resolve(c, text, false);
    if (!highest) return fail(err, highest.error());
    id.generation = highest->generation + 1;
  }
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return fail(err, {errc::invalid_argument, "DIR '" + dir + "' is not a directory"});
  // Plan: every regular file, in path order, cut into payloads of <= 64 MiB.
  v1::ModelManifest manifest;
  manifest.set_format("weightd.model/1");
  std::vector<fs::path> paths;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->is_regular_file()) paths.push_back(it->path());
  std::sort(paths.begin(), paths.end());
  if (paths.empty()) return fail(err, {errc::invalid_argument, "DIR '" + dir + "' has no files"});
  auto prefix = events::manifest_key(id);
  prefix = prefix.substr(0, prefix.size() - std::string("manifest").size()) + "files/";
  uint64_t total = 0;
  std::vector<std::string> keys;
  for (const auto& p : paths) {
    auto* f = manifest.add_files();
    f->set_path(fs::relative(p, dir).string());
    f->set_size(fs::file_size(p));  // its sha256 is computed as it is uploaded
    uint64_t parts = std::max<uint64_t>(1, (f->size() + kPayloadBytes - 1) / kPayloadBytes);
    for (uint64_t i = 0; i < parts; ++i) {
      auto* chunk = f->add_chunks();
      chunk->set_key(prefix + f->path() + (parts > 1 ? fmt::format(".part{:04}", i) : ""));
      chunk->set_offset(i * kPayloadBytes);
      chunk->set_size(std::min(kPayloadBytes, f->size() - i * kPayloadBytes));
      keys.push_back(chunk->key());
    }
    total += f->size();
  }
  auto group = events::payload_group_id(id);
  v1::BeginImportRequest begin;
  *begin.mutable_id() = id.to_proto();
  begin.set_expected_payload_count(keys.size());
  begin.set_expected_logical_bytes(std::max<uint64_t>(total, 1));
  begin.set_affinity_count(static_cast<uint64_t>(manifest.files_size()));
  if (requested) *begin.mutable_policy() = *requested;
  auto begun = c.begin_import(begin);
  if (!begun) return fail(err, begun.error());
  // Each file (an affinity unit) goes straight to the tier its policy gives
  // it: all COLD, all HOT, or the MIXED planner's choice (SPEC §2 Spill).
  std::set<std::string> hot_files;
  auto preferred = begun->policy().preferred_residency();
  for (const auto& f : manifest.files())
    if (preferred == ev1::RESIDENCY_HOT) hot_files.insert(f.path());
  if (preferred == ev1::RESIDENCY_MIXED) {
    std::vector<actors::planner_unit> units;
    for (const auto& f : manifest.files()) units.push_back({f.path(), f.size()});
    auto plan = actors::plan_mixed(std::move(units), begun->policy().mixed_hot_ratio());
    if (plan) hot_files.insert(plan->hot.begin(), plan->hot.end());
  }

  std::vector<std::string> uploaded;
  auto abort_with = [&](const status& why) {
    v1::AbortImportRequest abort;
    *abort.mutable_id() = id.to_proto();
    abort.set_expected_metadata_generation(begun->metadata_generation());
    for (const auto& k : uploaded) abort.add_keys_to_remove(k);
    abort.add_keys_to_remove(events::manifest_key(id));
    auto aborted = c.abort_import(abort);
    return fail(err, why,
                aborted ? fmt::format("the import was aborted and its {} uploaded objects removed",
                                      aborted->removed_keys_size())
                        : "aborting failed too (" + aborted.error().to_string() +
                              "): run `weightctl abort " + events::canonical_text(id) + "`");
  };
  // The files' sha256 (for the manifest) is computed on a thread of its own
  // while the bytes upload: hashing costs as much CPU as the transfer itself.
  auto hashed = std::async(std::launch::async, [&]() -> result<std::vector<std::string>> {
    std::vector<std::string> digests;
    for (const auto& f : manifest.files()) {
      auto digest = persistence::digest_file(fs::path(dir) / f.path(), true);
      if (!digest) return digest.error();
      digests.push_back(digest->sha256);
    }
    return digests;
  });
  progress_line bar{total};
  uint64_t done_before = 0;
  for (int i = 0; i < manifest.files_size(); ++i) {
    const auto& f = manifest.files(i);
    for (const auto& chunk : f.chunks()) {
      v1::PutHeader h;
      h.set_tenant(id.tenant);
      h.set_key(chunk.key());
      h.set_group_id(group);
      h.set_data_type(ev1::DATA_TYPE_WEIGHT);
      h.set_affinity_id(f.path());
      h.set_tier(hot_files.count(f.path()) ? ev1::TIER_HOT : ev1::TIER_COLD);
      auto put = c.put_file(h, fs::path(dir) / f.path(), chunk.offset(), chunk.size(),
                            [&](uint64_t d) { bar.show(done_before + d, f.path()); });
      if (!put) {
        bar.end();
        hashed.wait();
        return abort_with(put.error());
      }
      uploaded.push_back(chunk.key());
      done_before += chunk.size();
    }
  }
  bar.end();
  auto digests = hashed.get();
  if (!digests) return abort_with(digests.error());
  for (int i = 0; i < manifest.files_size(); ++i)
    manifest.mutable_files(i)->set_sha256((*digests)[static_cast<size_t>(i)]);
  auto manifest_json = to_json(manifest, true);
  v1::PutHeader mh;
  mh.set_tenant(id.tenant);
  mh.set_key(events::manifest_key(id));
  mh.set_group_id(group);
  mh.set_data_type(ev1::DATA_TYPE_METADATA);
  auto put_manifest = c.put_bytes(mh, manifest_json);
  if (!put_manifest) return abort_with(put_manifest.error());
  v1::CommitImportRequest commit;
  *commit.mutable_id() = id.to_proto();
  commit.set_expected_metadata_generation(begun->metadata_generation());
  auto* m = commit.mutable_manifest();
  m->set_manifest_key(events::manifest_key(id));
  m->set_manifest_sha256(put_manifest->sha256());
  m->set_payload_keys_sha256(events::payload_keys_sha256(keys));
  m->set_payload_count(keys.size());
  m->set_logical_bytes(std::max<uint64_t>(total, 1));
  for (const auto& k : keys) commit.add_payload_keys(k);
  auto committed = c.commit_import(commit);
  if (!committed) return abort_with(committed.error());
  if (o.json) out << to_json(*committed) << "\n";
  else
    out << fmt::format("imported {}: {} files, {} payloads, {} ({})\n", events::canonical_text(id),
                       manifest.files_size(), keys.size(), format_bytes(total),
                       ev1::Availability_Name(committed->availability()));
  return 0;
}

int export_dir(const online_options& o, const std::string& text, const std::string& dir,
               std::ostream& out, std::ostream& err) {
  client c{o.connection};
  auto id = resolve(c, text, true);
  if (!id) return fail(err, id.error());
  if (!id->generation) return fail(err, {errc::not_found, "no READY revision " + text});
  // The lease keeps the revision from being deleted while its bytes are read;
  // it is released on every way out (its destructor), Ctrl-C included.
  install_interrupt_flag();
  auto lease = held_lease::acquire(o.connection, *id, default_holder("export"), kExportLeaseTtl);
  if (!lease) return fail(err, lease.error());
  auto stopped = [&]() -> status {
    if (interrupted()) return {errc::internal, "interrupted; the lease was released"};
    return (*lease)->renewal_error();
  };
  v1::GetRevisionRequest get;
  *get.mutable_id() = id->to_proto();
  auto view = c.get_revision(get);
  if (!view) return fail(err, view.error());
  std::string manifest_json;
  auto got = c.get(id->tenant, view->manifest().manifest_key(), [&](const std::string& chunk) {
    manifest_json += chunk;
    return status{};
  });
  if (!got) return fail(err, got.error());
  v1::ModelManifest manifest;
  if (!google::protobuf::util::JsonStringToMessage(manifest_json, &manifest).ok())
    return fail(err, {errc::data_loss, "the manifest of " + events::canonical_text(*id) +
                                           " is not a weightctl model manifest"});
  uint64_t total = 0;
  for (const auto& f : manifest.files()) total += f.size();
  // Each file is downloaded under a temporary name; its sha256 is checked on
  // a thread of its own while the next file downloads, and only a file that
  // matches the manifest is renamed into place.
  struct pending_check {
    std::string path, temp, target;
    std::future<bool> matches;
  };
  std::vector<pending_check> checks;
  auto settle = [&]() -> status {  // waits for every check; renames or removes
    status outcome;
    for (auto& p : checks) {
      bool ok = p.matches.get();
      if (ok && outcome.ok()) fs::rename(p.temp, p.target);
      else fs::remove(p.temp);
      if (!ok && outcome.ok())
        outcome = {errc::data_loss, "'" + p.path + "' failed its sha256 check"};
    }
    checks.clear();
    return outcome;
  };
  auto discard = [&] {  // on failure: no file of this export is left behind
    for (auto& p : checks) {
      p.matches.wait();
      fs::remove(p.temp);
    }
    checks.clear();
  };
  progress_line bar{total};
  uint64_t done = 0;
  for (const auto& f : manifest.files()) {
    auto target = fs::path(dir) / f.path();
    if (f.path().find("..") != std::string::npos || fs::path(f.path()).is_absolute()) {
      discard();
      return fail(err, {errc::data_loss, "the manifest names an unsafe path '" + f.path() + "'"});
    }
    fs::create_directories(target.parent_path());
    auto temp = target.string() + ".weightd-partial";
    {
      std::ofstream file(temp, std::ios::binary | std::ios::trunc);
      for (const auto& chunk : f.chunks()) {
        auto r = c.get(id->tenant, chunk.key(), [&](const std::string& bytes) {
          if (auto st = stopped(); !st.ok()) return st;
          file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
          done += bytes.size();
          bar.show(done, f.path());
          return file ? status{} : status{errc::internal, "cannot write " + temp};
        });
        if (!r) {
          bar.end();
          file.close();
          fs::remove(temp);
          discard();
          if (interrupted()) return fail(err, r.error()), kExitInterrupted;
          return fail(err, r.error());
        }
      }
    }
    checks.push_back({f.path(), temp, target.string(),
                      std::async(std::launch::async, [temp, expected = f.sha256()] {
                        auto digest = persistence::digest_file(temp, true);
                        return digest && digest->sha256 == expected;
                      })});
  }
  bar.end();
  if (auto st = settle(); !st.ok())
    return fail(err, st, "the revision may be damaged; run `weightctl show` and retry");
  bar.end();
  if (o.json)
    out << fmt::format("{{\"id\":{},\"files\":{},\"bytes\":{}}}\n",
                       json_string(events::canonical_text(*id)), manifest.files_size(), total);
  else
    out << fmt::format("exported {} to {}: {} files, {}, every sha256 verified\n",
                       events::canonical_text(*id), dir, manifest.files_size(), format_bytes(total));
  return 0;
}

std::function<std::optional<int>()> add_transfer_commands(CLI::App& app,
                                                          const online_options& online) {
  struct args {
    std::string dir, id;
    policy_args policy;
  };
  auto a = std::make_shared<args>();
  auto* import_cmd = app.add_subcommand(
      "import", "Upload a model directory as a revision (payloads, manifest last, commit; "
                "aborted on failure)");
  import_cmd->add_option("DIR", a->dir, "The model directory")->required();
  import_cmd->add_option("--as", a->id,
                         "The revision: [tenant:]ns/resource@revision[#generation]; without "
                         "#generation the next one")
      ->required();
  import_cmd->add_option("--preferred", a->policy.preferred,
                         "Preferred residency HOT, COLD or MIXED: files are written straight to "
                         "the tier it gives them (default: the daemon's, HOT)");
  import_cmd->add_option("--ratio", a->policy.mixed_hot_ratio,
                         "MIXED: the share of bytes kept HOT, in (0,1) (default 0.5)");
  import_cmd->add_option("--mode", a->policy.mode, "Migration mode AUTO, MANUAL or PINNED");
  auto* export_cmd = app.add_subcommand(
      "export", "Download a revision into a directory, verifying every file's sha256");
  export_cmd->add_option("ID", a->id, "The revision (without #generation: the highest READY)")
      ->required();
  export_cmd->add_option("DIR", a->dir, "Where to write the files")->required();
  return [a, import_cmd, export_cmd, &online]() -> std::optional<int> {
    if (*import_cmd) return import_dir(online, a->dir, a->id, a->policy, std::cout, std::cerr);
    if (*export_cmd) return export_dir(online, a->id, a->dir, std::cout, std::cerr);
    return std::nullopt;
  };
}

}  // namespace weightd::api
