// weightctl import and export: a model directory to a revision and back.
#include "api/cli/transfer_commands.hpp"

#include <google/protobuf/util/json_util.h>
#include <spdlog/fmt/fmt.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "core/mixed_plan.hpp"
#include "api/cli/exit_codes.hpp"
#include "api/cli/format.hpp"
#include "api/cli/lease_commands.hpp"
#include "api/cli/model_directory.hpp"
#include "api/cli/online_support.hpp"
#include "api/cli/output_file.hpp"
#include "api/cli/progress.hpp"
#include "api/client/local_mapping.hpp"
#include "api/common/wire.hpp"
#include "events/digest.hpp"
#include "events/identity.hpp"
#include "events/time_text.hpp"
#include "persistence/tier_store.hpp"

namespace weightd::api {

namespace ev1 = events::v1;
namespace fs = std::filesystem;

namespace {
constexpr uint64_t kPayloadBytes = 64ull << 20;
constexpr std::chrono::milliseconds kExportLeaseTtl{30'000};  // renewed every 10 s
}  // namespace

namespace {

/// The policy the user asked for with --preferred/--ratio/--mode (none: the daemon's default).
result<std::optional<ev1::Policy>> requested_policy(const policy_args& policy) {
  if (policy.preferred.empty() && policy.mode.empty() && policy.mixed_hot_ratio == 0)
    return std::optional<ev1::Policy>{};
  ev1::Policy p;
  auto preferred = parse_residency(policy.preferred.empty() ? "HOT" : policy.preferred, "--preferred");
  if (!preferred) return preferred.error();
  p.set_preferred_residency(*preferred);
  p.set_mixed_hot_ratio(policy.mixed_hot_ratio ? policy.mixed_hot_ratio : 0.5);
  int mode = parse_enum_name(policy.mode.empty() ? "AUTO" : policy.mode, "MIGRATION_",
                             ev1::MigrationMode_descriptor());
  if (mode < 0) return status{errc::invalid_argument, "--mode must be AUTO, MANUAL or PINNED"};
  p.set_migration_mode(static_cast<ev1::MigrationMode>(mode));
  return std::optional<ev1::Policy>{p};
}

/// With --resume: the IMPORTING revision `text` names (without #generation:
/// the lineage's highest, if it is IMPORTING); none means an ordinary import.
result<std::optional<std::pair<events::revision_key, v1::RevisionView>>> importing_revision(
    client& c, const std::string& text) {
  using found = std::optional<std::pair<events::revision_key, v1::RevisionView>>;
  auto id = resolve(c, text, false);
  if (!id) return id.error();
  if (!id->generation) return found{};
  v1::GetRevisionRequest get;
  *get.mutable_id() = id->to_proto();
  get.set_include_hidden(true);
  auto view = c.get_revision(get);
  if (!view) {
    if (view.error().code() == errc::not_found) return found{};
    return view.error();
  }
  if (view->availability() != ev1::IMPORTING) return found{};
  return found{std::make_pair(*id, *view)};
}

/// `weightctl upsert`: the base it replaces and the claim's request id.
struct upsert_plan {
  events::revision_key base;
  v1::RevisionView base_view;
  std::string request_id;
};

/// The claim of `plan` on the lineage as the daemon has it now.
result<v1::UpsertClaim> claim_now(client& c, const upsert_plan& plan) {
  v1::GetLineageRequest q;
  q.set_tenant(plan.base.tenant);
  q.set_ns(plan.base.ns);
  q.set_resource(plan.base.resource);
  q.set_revision(plan.base.revision);
  auto lineage = c.get_lineage(q);
  if (!lineage) return lineage.error();
  if (lineage->claim().request_id() != plan.request_id)
    return status{errc::not_found, "the lineage's claim is '" + lineage->claim().request_id() +
                                       "', not '" + plan.request_id + "'"};
  return lineage->claim();
}

/// Polls the claim until it leaves `phases` (DELETE_FIRST's base deletion,
/// PUT_FIRST's retirement with --wait).
result<v1::UpsertClaim> wait_for_claim(client& c, const upsert_plan& plan,
                                       const std::set<std::string>& phases, bool quiet,
                                       std::ostream& err) {
  bool told = false;
  for (;;) {
    auto claim = claim_now(c, plan);
    if (!claim || !phases.count(claim->phase())) return claim;
    if (!told && !quiet)
      err << fmt::format("waiting: claim '{}' is {}\n", plan.request_id, claim->phase());
    told = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace

namespace {

// The payload objects still to send, shared by the upload workers.
struct upload_task {
  int file;  // index into the manifest
  int chunk;
};

// Whether `size` bytes of `file` from `offset` (one payload) are the bytes of
// the stored object `info`, for --resume: by its sha256 when the store
// recorded one, else by the xxh3-64 the store keeps of every object (the
// manifest's sha256 of each file is still checked by every export).
result<bool> stored_matches(const fs::path& file, uint64_t offset, uint64_t size,
                            const v1::ObjectInfo& info) {
  if (info.size() != size) return false;
  std::ifstream in(file, std::ios::binary);
  std::string bytes(size, '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(bytes.data(), static_cast<std::streamsize>(size));
  if (!in) return status{errc::internal, "cannot read '" + file.string() + "'"};
  if (!info.sha256().empty()) return info.sha256() == events::sha256_hex(bytes);
  if (info.checksum_algorithm() == ev1::CHECKSUM_XXH3_64)
    return info.checksum() == persistence::xxh3_hex(bytes);
  return false;  // nothing to compare with: not known to be the same
}

}  // namespace

namespace {

/// The end of `weightctl upsert`: CommitUpsert (the target READY, the base
/// retires), with --wait until the base is deleted, then one line.
int commit_upsert(const online_options& o, client& c, const upsert_plan& up, const import_args& t,
                  const v1::CommitImportRequest& commit,
                  const std::function<int(const status&)>& abort_with, int files, size_t payloads,
                  uint64_t total, std::ostream& out, std::ostream& err) {
  v1::CommitUpsertRequest req;
  *req.mutable_target() = commit.id();
  req.set_request_id(up.request_id);
  *req.mutable_commit() = commit;
  auto committed = c.commit_upsert(req);
  if (!committed) {
    // Missing or unreadable members leave the claim for a retry with --resume;
    // anything the daemon did not abort itself is aborted here.
    auto claim = claim_now(c, up);
    if (claim && claim->phase() == "ABORTED")
      return fail(err, committed.error(), "the upsert was aborted; the base is untouched");
    return abort_with(committed.error());
  }
  auto claim = claim_now(c, up);
  if (claim && t.upsert->wait)
    claim = wait_for_claim(c, up, {"RETIRING_BASE", "DELETING_BASE"}, t.quiet, err);
  if (!claim) return fail(err, claim.error());
  auto target = events::revision_key::from_proto(committed->id());
  if (o.json) {
    out << to_json(*committed) << "\n";
    return 0;
  }
  out << fmt::format("upserted {} over #{}: {} files, {} payloads, {} ({}); claim '{}' is {}{}\n",
                     events::canonical_text(target), up.base.generation, files, payloads,
                     format_bytes(total), ev1::Availability_Name(committed->availability()),
                     up.request_id, claim->phase(),
                     claim->phase() == "RETIRING_BASE"
                         ? " (the base is deleted once its leases end)"
                         : "");
  return 0;
}

}  // namespace

int import_dir(const online_options& o, const import_args& t, std::ostream& out,
               std::ostream& err) {
  const auto& dir = t.dir;
  const auto& text = t.id;
  const auto& policy = t.policy;
  if (t.jobs < 1 || t.jobs > 64)
    return fail(err, {errc::invalid_argument, "--jobs must be 1..64"});
  install_interrupt_flag();  // Ctrl-C stops at the next chunk; see stop_interrupted
  client c{o.connection};
  auto requested = requested_policy(policy);
  if (!requested) return fail(err, requested.error());
  // upsert: the base's lineage at the next generation, unless one is given.
  std::optional<upsert_plan> up;
  if (t.upsert) {
    auto base = read_revision(c, t.upsert->base, true);
    if (!base) return fail(err, base.error(), "nothing was uploaded");
    up = upsert_plan{base->id, base->view,
                     t.upsert->request_id.empty() ? new_request_id("upsert") : t.upsert->request_id};
  }
  auto parsed = up ? result<events::revision_key>{up->base} : parse_id(text);
  if (!parsed) return fail(err, parsed.error());
  auto id = *parsed;
  if (up) {
    id.generation = t.upsert->generation;
    // The same request id again: its claim's target (the next generation may be it).
    if (auto claim = claim_now(c, *up); !id.generation && claim) id.generation = claim->target_generation();
    if (!id.generation) {
      auto lineage = id;
      lineage.generation = 0;
      auto highest = resolve(c, events::canonical_text(lineage), false);
      if (!highest) return fail(err, highest.error());
      id.generation = highest->generation + 1;
    }
  }
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return fail(err, {errc::invalid_argument, "DIR '" + dir + "' is not a directory"});
  // Every entry is checked before anything is sent: a directory that cannot
  // be read completely is refused, not imported in part.
  auto walked = walk_model_directory(dir);
  if (!walked) return fail(err, walked.error(), "nothing was uploaded");
  const auto& files = *walked;
  if (files.empty()) return fail(err, {errc::invalid_argument, "DIR '" + dir + "' has no files"});
  // --resume continues the IMPORTING revision of that id (the highest
  // generation without #generation); when there is none it is an ordinary
  // import.
  std::optional<v1::RevisionView> resumed;
  if (t.resume && !up) {
    auto importing = importing_revision(c, text);
    if (!importing) return fail(err, importing.error());
    if (*importing) {
      id = (*importing)->first;
      resumed = (*importing)->second;
    }
  }
  if (!id.generation) {  // the next generation of the lineage
    auto highest = resolve(c, text, false);  // (an upsert's is known by now)
    if (!highest) return fail(err, highest.error());
    id.generation = highest->generation + 1;
  }
  // Plan: every file, in path order, cut into payloads of <= 64 MiB.
  v1::ModelManifest manifest;
  manifest.set_format("weightd.model/1");
  auto prefix = events::manifest_key(id);
  prefix = prefix.substr(0, prefix.size() - std::string("manifest").size()) + "files/";
  uint64_t total = 0;
  std::vector<std::string> keys;
  std::vector<upload_task> tasks;
  for (const auto& file : files) {
    auto* f = manifest.add_files();
    f->set_path(file.path);
    f->set_size(file.size);  // its sha256 is computed as it is uploaded
    uint64_t parts = std::max<uint64_t>(1, (f->size() + kPayloadBytes - 1) / kPayloadBytes);
    for (uint64_t i = 0; i < parts; ++i) {
      auto* chunk = f->add_chunks();
      chunk->set_key(prefix + f->path() + (parts > 1 ? fmt::format(".part{:04}", i) : ""));
      chunk->set_offset(i * kPayloadBytes);
      chunk->set_size(std::min(kPayloadBytes, f->size() - i * kPayloadBytes));
      keys.push_back(chunk->key());
      tasks.push_back({manifest.files_size() - 1, static_cast<int>(i)});
    }
    total += f->size();
  }
  if (interrupted()) {
    err << "weightctl: interrupted; nothing was uploaded\n";
    return kExitInterrupted;
  }
  if (!up && !resumed) {  // a generation that exists already: say so before uploading
    v1::GetRevisionRequest get;
    *get.mutable_id() = id.to_proto();
    get.set_include_hidden(true);
    auto existing = c.get_revision(get);
    if (existing && existing->availability() != ev1::IMPORTING) {
      auto lineage = id;
      lineage.generation = 0;
      return fail(err,
                  {errc::conflict, events::canonical_text(id) + " exists already (" +
                                       short_enum_name(existing->availability(),
                                                       ev1::Availability_descriptor()) +
                                       "); a generation is imported once"},
                  "import the next generation with `weightctl import " + dir + " --as " +
                      events::canonical_text(lineage) + "`, or replace it with `weightctl upsert " +
                      dir + " --base " + events::canonical_text(id) + "`; nothing was uploaded");
    }
  }
  auto group = events::payload_group_id(id);
  result<v1::RevisionView> begun = status{errc::internal, "not begun"};
  if (resumed) {
    begun = *resumed;
  } else {
    v1::BeginImportRequest begin;
    *begin.mutable_id() = id.to_proto();
    begin.set_expected_payload_count(keys.size());
    begin.set_expected_logical_bytes(std::max<uint64_t>(total, 1));
    begin.set_affinity_count(static_cast<uint64_t>(manifest.files_size()));
    if (*requested) *begin.mutable_policy() = **requested;
    if (!up) {
      begun = c.begin_import(begin);
      if (!begun) return fail(err, begun.error());
    } else {
      // The claim: the same request id again returns it (--resume continues its upload).
      v1::BeginUpsertRequest claim_req;
      *claim_req.mutable_base() = up->base.to_proto();
      claim_req.set_expected_metadata_generation(up->base_view.metadata_generation());
      claim_req.set_target_generation(id.generation);
      claim_req.set_mode(t.upsert->delete_first ? v1::DELETE_FIRST : v1::PUT_FIRST);
      claim_req.set_request_id(up->request_id);
      begin.clear_id();
      *claim_req.mutable_import() = begin;
      auto claim = c.begin_upsert(claim_req);
      if (!claim) return fail(err, claim.error(), "nothing was uploaded");
      if (claim->phase() == "DELETING_BASE") {  // a large base is still being deleted
        claim = wait_for_claim(c, *up, {"DELETING_BASE"}, t.quiet, err);
        if (!claim) return fail(err, claim.error());
      }
      if (claim->phase() != "IMPORTING_TARGET")
        return fail(err, {errc::conflict, "claim '" + up->request_id + "' is " + claim->phase() +
                                              ", not importing its target"});
      v1::GetRevisionRequest get;
      *get.mutable_id() = id.to_proto();
      get.set_include_hidden(true);
      begun = c.get_revision(get);
      if (!begun) return fail(err, begun.error());
      if (t.resume) resumed = *begun;  // payloads stored by an earlier run are not sent again
    }
  }
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

  std::mutex uploaded_mutex;
  std::vector<std::string> uploaded;
  // Aborts what this run began; says what became of it (fail()'s "next").
  auto abort_uploads = [&]() -> std::string {
    if (up) {  // the claim ends; its target's import is aborted with its uploads
      v1::AbortUpsertRequest abort;
      *abort.mutable_base() = up->base.to_proto();
      abort.set_request_id(up->request_id);
      auto aborted = c.abort_upsert(abort);
      return aborted ? "the upsert was aborted and its uploads removed; the base is untouched"
                     : "aborting failed too (" + aborted.error().to_string() +
                           "): run `weightctl lineage " + events::canonical_text(up->base) +
                           " --abort " + up->request_id + "`";
    }
    v1::AbortImportRequest abort;
    *abort.mutable_id() = id.to_proto();
    abort.set_expected_metadata_generation(begun->metadata_generation());
    std::lock_guard lock{uploaded_mutex};
    for (const auto& k : uploaded) abort.add_keys_to_remove(k);  // a resumed run's too
    abort.add_keys_to_remove(events::manifest_key(id));
    auto aborted = c.abort_import(abort);
    return aborted ? fmt::format("the import was aborted and its {} removed",
                                 count_of(static_cast<uint64_t>(aborted->removed_keys_size()),
                                          "uploaded object", "uploaded objects"))
                   : "aborting failed too (" + aborted.error().to_string() +
                         "): run `weightctl abort " + events::canonical_text(id) + "`";
  };
  auto abort_with = [&](const status& why) { return fail(err, why, abort_uploads()); };
  // SPEC §10: an interrupt (SIGINT, SIGTERM) ends the import cleanly with exit
  // 130: aborted and its uploads removed, or, when --resume was given, kept
  // IMPORTING with the command that continues it.
  auto stop_interrupted = [&]() -> int {
    if (!t.resume) {
      err << "weightctl: interrupted; " << abort_uploads() << "\n";
      return kExitInterrupted;
    }
    auto again = up ? fmt::format("weightctl upsert {} --base {} --request-id {} --resume", dir,
                                  events::canonical_text(up->base), up->request_id)
                    : fmt::format("weightctl import {} --as {} --resume", dir,
                                  events::canonical_text(id));
    err << "weightctl: interrupted; " << events::canonical_text(id)
        << " stays IMPORTING with what it uploaded; continue it with `" << again << "`\n";
    return kExitInterrupted;
  };
  if (interrupted()) return stop_interrupted();
  // The files' sha256 (for the manifest) is computed on a thread of its own
  // while the bytes upload: hashing costs as much CPU as the transfer itself.
  auto hashed = std::async(std::launch::async, [&]() -> result<std::vector<std::string>> {
    std::vector<std::string> digests;
    for (const auto& file : files) {
      if (interrupted()) return status{errc::internal, "interrupted"};
      auto digest = persistence::digest_file(file.source, true);
      if (!digest) return digest.error();
      digests.push_back(digest->sha256);
    }
    return digests;
  });
  // --resume: a payload already stored with the same size and bytes is
  // not sent again; one stored with other bytes stops the import untouched.
  std::vector<bool> stored(tasks.size(), false);
  uint64_t skipped_bytes = 0;
  if (resumed) {
    for (size_t i = 0; i < tasks.size(); ++i) {
      const auto& f = manifest.files(tasks[i].file);
      const auto& chunk = f.chunks(tasks[i].chunk);
      auto info = c.stat(id.tenant, chunk.key());
      if (!info) continue;  // not stored yet
      auto same = stored_matches(files[static_cast<size_t>(tasks[i].file)].source, chunk.offset(),
                                 chunk.size(), *info);
      if (!same) {
        hashed.wait();
        return fail(err, same.error());
      }
      if (!*same) {
        hashed.wait();
        return fail(err,
                    {errc::conflict, "cannot resume: the stored object '" + chunk.key() +
                                         "' differs from '" + f.path() + "' in DIR"},
                    "the import was left as it is: `weightctl abort " +
                        events::canonical_text(id) + "`, then import again");
      }
      stored[i] = true;
      skipped_bytes += chunk.size();
      uploaded.push_back(chunk.key());
    }
  }
  // Uploads run in parallel: `jobs` workers, each with its own client, take
  // the next payload; the first failure stops them all. A put refused
  // because the tenant's puts in flight hold its share of the tier
  // (RESOURCE_EXHAUSTED, --tenant-reserve-ratio) is this import's own
  // parallelism on a small tier: it waits for one of the other uploads to
  // finish and tries again; alone in flight, the refusal stands.
  progress_line bar{total, static_cast<uint64_t>(files.size()), t.quiet};
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> done{skipped_bytes};
  std::atomic<bool> failed{false};
  std::mutex failure_mutex;
  status failure;
  std::mutex flight_mutex;
  std::condition_variable flight_ended;
  int in_flight = 0;       // puts of this import under way
  uint64_t released = 0;   // puts of this import that ended holding a reservation
  auto worker = [&] {
    client wc{o.connection};
    for (size_t i; !failed && !interrupted() && (i = next++) < tasks.size();) {
      if (stored[i]) continue;
      const auto& f = manifest.files(tasks[i].file);
      const auto& chunk = f.chunks(tasks[i].chunk);
      v1::PutHeader h;
      h.set_tenant(id.tenant);
      h.set_key(chunk.key());
      h.set_group_id(group);
      h.set_data_type(ev1::DATA_TYPE_WEIGHT);
      h.set_affinity_id(f.path());
      h.set_tier(hot_files.count(f.path()) ? ev1::TIER_HOT : ev1::TIER_COLD);
      for (;;) {
        uint64_t released_before;
        {
          std::lock_guard lock{flight_mutex};
          ++in_flight;
          released_before = released;
        }
        uint64_t sent = 0;
        auto put = wc.put_file(h, files[static_cast<size_t>(tasks[i].file)].source,
                               chunk.offset(), chunk.size(), [&](uint64_t d) {
                                 bar.show(done += d - sent, f.path(),
                                          static_cast<uint64_t>(tasks[i].file) + 1);
                                 sent = d;
                                 return !interrupted();
                               });
        done -= sent;  // counted whole below when it stands
        bool refused = !put && put.error().code() == errc::resource_exhausted;
        bool retry = false;
        {
          std::unique_lock lock{flight_mutex};
          --in_flight;
          if (!refused) ++released;
          flight_ended.notify_all();
          if (refused && (in_flight > 0 || released != released_before)) {
            // Wait until another upload gives its reservation back.
            flight_ended.wait(lock, [&] {
              return failed || in_flight == 0 || released != released_before;
            });
            retry = !failed && released != released_before;
          }
        }
        if (retry) continue;
        if (!put) {
          std::lock_guard lock{failure_mutex};
          if (!failed.exchange(true)) failure = put.error();
          std::lock_guard flight{flight_mutex};  // a waiter sees `failed` on waking
          flight_ended.notify_all();
          return;
        }
        break;
      }
      done += chunk.size();
      bar.show(done, f.path(), static_cast<uint64_t>(tasks[i].file) + 1);
      std::lock_guard lock{uploaded_mutex};
      uploaded.push_back(chunk.key());
    }
  };
  {
    std::vector<std::thread> workers;
    for (size_t j = 0; j < std::min<size_t>(t.jobs, tasks.size()); ++j)
      workers.emplace_back(worker);
    for (auto& w : workers) w.join();
  }
  bar.end();
  if (interrupted()) {
    hashed.wait();
    return stop_interrupted();
  }
  if (failed) {
    hashed.wait();
    return abort_with(failure);
  }
  auto digests = hashed.get();
  if (interrupted()) return stop_interrupted();
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
  if (!put_manifest && resumed && put_manifest.error().code() == errc::object_already_exists) {
    // An earlier run got as far as the manifest: it stands if it is this one.
    auto info = c.stat(id.tenant, events::manifest_key(id));
    if (info && info->sha256() == events::sha256_hex(manifest_json)) put_manifest = *info;
  }
  if (!put_manifest) return abort_with(put_manifest.error());
  if (interrupted()) return stop_interrupted();
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
  if (up) return commit_upsert(o, c, *up, t, commit, abort_with, manifest.files_size(), keys.size(),
                               total, out, err);
  auto committed = c.commit_import(commit);
  if (!committed) return abort_with(committed.error());
  if (o.json) out << to_json(*committed) << "\n";
  else
    out << fmt::format("imported {}: {} files, {} payloads, {} ({}){}\n", events::canonical_text(id),
                       manifest.files_size(), keys.size(), format_bytes(total),
                       ev1::Availability_Name(committed->availability()),
                       resumed ? fmt::format("; resumed, {} already stored", format_bytes(skipped_bytes))
                               : "");
  return 0;
}

int export_dir(const online_options& o, const std::string& text, const std::string& dir,
               const export_args& args, std::ostream& out, std::ostream& err) {
  bool quiet = args.quiet;
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
  // Where the bytes come from: Get streams, or (--local) the replica files
  // mapped read-only under the lease, handed on in pieces of a Get's chunk
  // size so progress and interruption work the same way.
  std::map<std::string, std::string_view> local_bytes;
  std::optional<local_revision> mapped;
  if (args.local) {
    v1::OpenLocalRequest req;
    *req.mutable_id() = id->to_proto();
    req.set_lease_id((*lease)->lease().lease_id());
    auto m = map_local(c, req);
    if (!m) return fail(err, m.error(), "without --local the export streams over gRPC");
    mapped = std::move(*m);
    for (const auto& p : mapped->payloads) local_bytes[p.file().key()] = p.bytes();
    for (const auto& p : mapped->manifest) local_bytes[p.file().key()] = p.bytes();
  }
  auto read_object = [&](const std::string& key,
                         const std::function<status(const std::string&)>& sink) -> status {
    if (!args.local) return c.get(id->tenant, key, sink).error();
    auto it = local_bytes.find(key);
    if (it == local_bytes.end())
      return {errc::data_loss, "OpenLocal listed no file for " + key};
    std::string piece;
    for (size_t at = 0; at < it->second.size(); at += kMaxChunkBytes) {
      piece.assign(it->second.substr(at, kMaxChunkBytes));
      if (auto st = sink(piece); !st.ok()) return st;
    }
    return {};
  };
  std::string manifest_json;
  auto got = read_object(view->manifest().manifest_key(), [&](const std::string& chunk) {
    manifest_json += chunk;
    return status{};
  });
  if (!got.ok()) return fail(err, got);
  v1::ModelManifest manifest;
  if (!google::protobuf::util::JsonStringToMessage(manifest_json, &manifest).ok())
    return fail(err, {errc::data_loss, "the manifest of " + events::canonical_text(*id) +
                                           " is not a weightctl model manifest"});
  uint64_t total = 0;
  for (const auto& f : manifest.files()) {
    total += f.size();
    // Checked before anything is written: a manifest naming a path outside
    // DIR is refused whole, not exported in part.
    if (!is_safe_relative_path(f.path()))
      return fail(err, {errc::data_loss, "the manifest of " + events::canonical_text(*id) +
                                             " names an unsafe path '" + escape_name(f.path()) +
                                             "' (an empty, '.' or '..' segment, or absolute)"});
  }
  // Each file is written as output_file.hpp says (a temporary renamed into
  // place for a regular file). A temporary's sha256 is checked on a thread of
  // its own while the next file downloads, and only a file that matches the
  // manifest is renamed into place; a file written in place (a FIFO or device
  // the user put there) is hashed as it is written.
  struct pending_check {
    std::string path;
    std::unique_ptr<output_file> file;
    std::future<bool> matches;
  };
  std::vector<pending_check> checks;
  status local_error;  // a file of ours could not be written: kExitLocalFile
  auto settle = [&]() -> status {  // waits for every check; renames or removes
    status outcome;
    for (auto& p : checks) {
      bool ok = p.matches.get();
      if (ok && outcome.ok() && local_error.ok() && !p.file->commit())
        local_error = {errc::internal, p.file->error()};
      if (!ok && outcome.ok())
        outcome = {errc::data_loss, "'" + p.path + "' failed its sha256 check"};
    }
    checks.clear();  // what was not committed is removed by output_file
    return outcome;
  };
  auto discard = [&] {  // on failure: no file of this export is left behind
    for (auto& p : checks) p.matches.wait();
    checks.clear();
  };
  progress_line bar{total, static_cast<uint64_t>(manifest.files_size()), quiet};
  uint64_t done = 0;
  for (const auto& f : manifest.files()) {
    auto target = fs::path(dir) / f.path();
    std::error_code ec;
    fs::create_directories(target.parent_path(), ec);
    auto file = std::make_unique<output_file>(target.string());
    if (ec && file->ok())
      local_error = {errc::internal, "cannot create the directory '" +
                                         target.parent_path().string() + "': " + ec.message()};
    else if (!file->ok())
      local_error = {errc::internal, file->error()};
    events::sha256_stream inline_hash;
    for (const auto& chunk : f.chunks()) {
      if (!local_error.ok()) break;
      auto r = read_object(chunk.key(), [&](const std::string& bytes) {
        if (auto st = stopped(); !st.ok()) return st;
        if (!file->write(bytes)) return status{errc::internal, file->error()};
        if (file->in_place()) inline_hash.update(bytes);
        done += bytes.size();
        bar.show(done, f.path());
        return status{};
      });
      if (!file->ok()) local_error = {errc::internal, file->error()};
      if (!r.ok() && local_error.ok()) {
        bar.end();
        file.reset();
        discard();
        if (interrupted()) return fail(err, r), kExitInterrupted;
        return fail(err, r);
      }
    }
    if (local_error.ok() && !file->close()) local_error = {errc::internal, file->error()};
    if (!local_error.ok()) {
      bar.end();
      file.reset();
      discard();
      return fail_local(err, local_error.message());
    }
    std::future<bool> matches;
    if (file->in_place()) {
      std::promise<bool> now;
      now.set_value(inline_hash.hex() == f.sha256());
      matches = now.get_future();
    } else {
      matches = std::async(std::launch::async, [temp = file->written_path(), expected = f.sha256()] {
        auto digest = persistence::digest_file(temp, true);
        return digest && digest->sha256 == expected;
      });
    }
    checks.push_back({f.path(), std::move(file), std::move(matches)});
  }
  bar.end();
  if (auto st = settle(); !st.ok())
    return fail(err, st, "the revision may be damaged; run `weightctl show` and retry");
  if (!local_error.ok()) return fail_local(err, local_error.message());
  bar.end();
  if (o.json)
    out << fmt::format("{{\"id\":{},\"files\":{},\"bytes\":{}}}\n",
                       json_string(events::canonical_text(*id)), manifest.files_size(), total);
  else
    out << fmt::format("exported {} to {}: {} files, {}{}, every sha256 verified\n",
                       events::canonical_text(*id), dir, manifest.files_size(), format_bytes(total),
                       args.local ? " from local replica files" : "");
  return 0;
}

namespace {

/// The policy, parallelism and progress flags `import` and `upsert` share.
void add_upload_options(CLI::App* cmd, import_args& a, const std::string& mode_flag) {
  cmd->add_option("--preferred", a.policy.preferred,
                  "Preferred residency HOT, COLD or MIXED: files are written straight to the "
                  "tier it gives them (default: the daemon's, HOT)");
  cmd->add_option("--ratio", a.policy.mixed_hot_ratio,
                  "MIXED: the share of bytes kept HOT, in (0,1) (default 0.5)");
  cmd->add_option(mode_flag, a.policy.mode, "Migration mode AUTO, MANUAL or PINNED");
  cmd->add_option("--jobs,-j", a.jobs, "Uploads at once, 1..64")->capture_default_str();
  cmd->add_flag("--quiet,-q", a.quiet, "No progress on stderr");
}

}  // namespace

std::function<std::optional<int>()> add_transfer_commands(CLI::App& app,
                                                          const online_options& online) {
  auto in = std::make_shared<import_args>();
  auto ex = std::make_shared<std::pair<std::string, std::string>>();  // id, dir
  auto ex_args = std::make_shared<export_args>();
  auto* import_cmd = app.add_subcommand(
      "import", "Upload a model directory as a revision (payloads, manifest last, commit; "
                "aborted on failure). Symlinks are files under the link's own path");
  import_cmd->add_option("DIR", in->dir, "The model directory")->required();
  import_cmd->add_option("--as", in->id,
                         "The revision: [tenant:]ns/resource@revision[#generation]; without "
                         "#generation the next one")
      ->required();
  add_upload_options(import_cmd, *in, "--mode");
  import_cmd->add_flag("--resume", in->resume,
                       "Continue an interrupted import of this id: payloads already stored with "
                       "the same bytes (sha256, or the store's xxh3) are not sent again (none IMPORTING: an ordinary import)");
  auto* export_cmd = app.add_subcommand(
      "export", "Download a revision into a directory, verifying every file's sha256");
  export_cmd->add_option("ID", ex->first, "The revision (without #generation: the highest READY)")
      ->required();
  export_cmd->add_option("DIR", ex->second, "Where to write the files")->required();
  export_cmd->add_flag("--quiet,-q", ex_args->quiet, "No progress on stderr");
  export_cmd->add_flag("--local", ex_args->local,
                       "Copy from the daemon's replica files (same host, OpenLocal) instead of "
                       "streaming over gRPC");
  auto up = std::make_shared<import_args>();
  up->upsert.emplace();
  auto mode = std::make_shared<std::string>("put-first");
  auto* upsert_cmd = app.add_subcommand(
      "upsert", "Replace a revision by the next generation of its lineage: the directory is "
                "imported under a claim and committed; the base then retires (no new leases) "
                "and is deleted once its leases end");
  upsert_cmd->add_option("DIR", up->dir, "The model directory")->required();
  upsert_cmd->add_option("--base", up->upsert->base,
                         "The revision it replaces (without #generation: the highest READY)")
      ->required();
  upsert_cmd->add_option("--mode", *mode,
                         "put-first (import, commit, then retire the base) or delete-first "
                         "(delete the base first: saves capacity, no rollback)")
      ->check(CLI::IsMember({"put-first", "delete-first"}))
      ->capture_default_str();
  upsert_cmd->add_option("--request-id", up->upsert->request_id,
                         "Names the claim (default: a new one); the same again continues it");
  upsert_cmd->add_option("--generation", up->upsert->generation,
                         "The new weight_generation (default: the lineage's highest + 1)");
  upsert_cmd->add_flag("--wait", up->upsert->wait,
                       "Return once the base is deleted (its leases ended) and the claim COMPLETED");
  add_upload_options(upsert_cmd, *up, "--policy-mode");  // --mode is the upsert's
  upsert_cmd->add_flag("--resume", up->resume,
                       "With the --request-id of an interrupted upsert: payloads already stored "
                       "are not sent again");
  return [in, ex, ex_args, import_cmd, export_cmd, up, mode, upsert_cmd,
          &online]() -> std::optional<int> {
    if (*import_cmd) return import_dir(online, *in, std::cout, std::cerr);
    if (*upsert_cmd) {
      up->upsert->delete_first = *mode == "delete-first";
      return import_dir(online, *up, std::cout, std::cerr);
    }
    if (*export_cmd)
      return export_dir(online, ex->first, ex->second, *ex_args, std::cout, std::cerr);
    return std::nullopt;
  };
}

}  // namespace weightd::api
