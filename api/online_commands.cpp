#include "api/online_commands.hpp"
#include "events/time_text.hpp"

#include <google/protobuf/util/json_util.h>
#include <spdlog/fmt/fmt.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>
#include <optional>
#include <set>

#include "actors/mixed_planner.hpp"
#include "api/format.hpp"
#include "api/lease_commands.hpp"
#include "api/online_support.hpp"
#include "events/identity.hpp"
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

int list_revisions(const online_options& o, const std::string& ns, const std::string& resource,
                   bool all_states, std::ostream& out, std::ostream& err) {
  client c{o.connection};
  v1::ListRevisionsRequest q;
  q.set_tenant(o.tenant);
  q.set_ns(ns);
  q.set_resource(resource);
  if (all_states)
    for (auto s : {ev1::IMPORTING, ev1::READY, ev1::DEGRADED, ev1::DELETING, ev1::DELETED})
      q.add_states(s);
  do {
    auto page = c.list_revisions(q);
    if (!page) return fail(err, page.error());
    for (const auto& v : page->revisions()) {
      if (o.json) {
        out << to_json(v) << "\n";
        continue;
      }
      // The active operation, if any, at the end: "op 4 -> COLD 3/8 units".
      std::string op;
      if (v.operation_id() && v.has_operation())
        op = fmt::format("  op {} -> {} {}/{} units", v.operation_id(),
                         short_enum_name(v.operation().target(), ev1::Residency_descriptor()),
                         v.operation().processed_units(), v.operation().total_units());
      out << fmt::format("{:<44} {:<9} {:<16} gen {:<4} {:>10}{}\n",
                         events::canonical_text(events::revision_key::from_proto(v.id())),
                         ev1::Availability_Name(v.availability()),
                         short_enum_name(v.residency(), ev1::Residency_descriptor()),
                         v.metadata_generation(),
                         format_bytes(v.manifest().logical_bytes()), op);
    }
    q.set_page_token(page->next_page_token());
  } while (!q.page_token().empty());
  return 0;
}

int show_revision(const online_options& o, const std::string& text, std::ostream& out,
                  std::ostream& err) {
  client c{o.connection};
  auto rev = read_revision(c, text, false);
  if (!rev) return fail(err, rev.error());
  out << to_json(rev->view, !o.json) << "\n";
  return 0;
}

int remove_revision(const online_options& o, const std::string& text, uint64_t drain_timeout_ms,
                    std::ostream& out, std::ostream& err) {
  client c{o.connection};
  auto rev = read_revision(c, text, true);
  if (!rev) return fail(err, rev.error());
  const auto& id = rev->id;
  v1::RemoveRevisionRequest rm;
  *rm.mutable_id() = id.to_proto();
  rm.set_expected_metadata_generation(rev->view.metadata_generation());
  rm.set_drain_timeout_ms(drain_timeout_ms);
  auto removed = c.remove_revision(rm);
  if (!removed) return fail(err, removed.error());
  if (o.json) out << to_json(*removed) << "\n";
  else if (removed->revision().drain_deadline_ms())
    out << fmt::format("removing {}: {} live leases drain first (revoked at {})\n",
                       events::canonical_text(id), removed->revision().active_lease_count(),
                       events::utc_text(removed->revision().drain_deadline_ms()));
  else
    out << fmt::format("removed {}: {} objects, manifest last\n", events::canonical_text(id),
                       removed->removed_keys_size());
  return 0;
}

int update_policy(const online_options& o, const std::string& text, const policy_args& a,
                  std::ostream& out, std::ostream& err) {
  client c{o.connection};
  auto rev = read_revision(c, text, true);
  if (!rev) return fail(err, rev.error());
  auto policy = rev->view.policy();
  if (!a.preferred.empty()) {
    auto r = parse_residency(a.preferred, "--preferred");
    if (!r) return fail(err, r.error());
    policy.set_preferred_residency(*r);
  }
  if (!a.mode.empty()) {
    int m = parse_enum_name(a.mode, "MIGRATION_", ev1::MigrationMode_descriptor());
    if (m < 0) return fail(err, {errc::invalid_argument, "--mode must be AUTO, MANUAL or PINNED"});
    policy.set_migration_mode(static_cast<ev1::MigrationMode>(m));
  }
  if (a.mixed_hot_ratio != 0) policy.set_mixed_hot_ratio(a.mixed_hot_ratio);
  v1::UpdatePolicyRequest req;
  *req.mutable_id() = rev->id.to_proto();
  req.set_expected_metadata_generation(rev->view.metadata_generation());
  *req.mutable_policy() = policy;
  auto updated = c.update_policy(req);
  if (!updated) return fail(err, updated.error(), "re-read it with `weightctl show` and retry");
  if (o.json) out << to_json(*updated) << "\n";
  else
    out << fmt::format("{}: policy {} {} (mixed ratio {}), generation {}\n",
                       events::canonical_text(rev->id),
                       short_enum_name(updated->policy().preferred_residency(), ev1::Residency_descriptor()),
                       short_enum_name(updated->policy().migration_mode(), ev1::MigrationMode_descriptor()),
                       updated->policy().mixed_hot_ratio(), updated->metadata_generation());
  return 0;
}

int abort_import(const online_options& o, const std::string& text,
                 const std::vector<std::string>& keys, std::ostream& out, std::ostream& err) {
  client c{o.connection};
  auto rev = read_revision(c, text, false);
  if (!rev) return fail(err, rev.error());
  v1::AbortImportRequest req;
  *req.mutable_id() = rev->id.to_proto();
  req.set_expected_metadata_generation(rev->view.metadata_generation());
  for (const auto& k : keys) req.add_keys_to_remove(k);
  auto aborted = c.abort_import(req);
  if (!aborted) return fail(err, aborted.error());
  if (o.json) {
    out << to_json(*aborted) << "\n";
    return 0;
  }
  out << fmt::format("aborted {}: {} objects removed ({})\n", events::canonical_text(rev->id),
                     aborted->removed_keys_size(),
                     ev1::Availability_Name(aborted->revision().availability()));
  for (const auto& r : aborted->refused_keys())
    out << fmt::format("  not touched: {} ({})\n", r.key(), r.reason());
  return 0;
}

int show_status(const online_options& o, std::ostream& out, std::ostream& err) {
  client c{o.connection};
  auto s = c.server_status();
  if (!s) return fail(err, s.error());
  if (o.json) {
    out << to_json(*s) << "\n";
    return 0;
  }
  out << fmt::format("weightd {} at {} (writer {})\n", s->version(), o.connection.address,
                     s->writer_id());
  out << fmt::format("journal seq  {}\n", s->journal_seq());
  out << fmt::format("objects      {}\n", s->objects());
  out << fmt::format("HOT          {} used, {} reserved of {}\n", format_bytes(s->hot().used_bytes()),
                     format_bytes(s->hot().reserved_bytes()), format_bytes(s->hot().capacity_bytes()));
  out << fmt::format("COLD         {} used\n", format_bytes(s->cold().used_bytes()));
  for (const auto& [op, n] : s->guard_skips()) out << fmt::format("guard skips  {} {}\n", op, n);
  return 0;
}

}  // namespace weightd::api
