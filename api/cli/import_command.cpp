// weightctl import and upsert (SPEC §7): a model directory becomes a revision
// in four steps, each one function of `import_run` below:
//   1. plan     the target id, and every file cut into payloads of <= 64 MiB;
//               nothing is sent before the whole directory was read
//   2. begin    BeginImport (upsert: BeginUpsert's claim), or the IMPORTING
//               revision --resume continues
//   3. upload   the payloads, `jobs` at once (payload_upload.hpp), while the
//               files' sha256 is computed on a thread of its own
//   4. finish   the manifest, then CommitImport (CommitUpsert) — or, after any
//               failure or interrupt from step 2 on, abort what this run began
#include <spdlog/fmt/fmt.h>

#include <fstream>
#include <future>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "api/cli/exit_codes.hpp"
#include "api/cli/format.hpp"
#include "api/cli/import_support.hpp"
#include "api/cli/lease_commands.hpp"
#include "api/cli/model_directory.hpp"
#include "api/cli/online_support.hpp"
#include "api/cli/payload_upload.hpp"
#include "api/cli/progress.hpp"
#include "api/cli/transfer_commands.hpp"
#include "api/common/wire.hpp"
#include "core/mixed_plan.hpp"
#include "events/digest.hpp"
#include "events/identity.hpp"
#include "persistence/tier_store.hpp"

namespace weightd::api {

namespace ev1 = events::v1;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kPayloadBytes = 64ull << 20;
/// An exit code when the import ends where it is; nullopt when it goes on.
using ending = std::optional<int>;

class import_run {
 public:
  import_run(const online_options& o, const import_args& t, std::ostream& out, std::ostream& err)
      : o_(o), t_(t), out_(out), err_(err), c_(o.connection) {}

  int run() {
    if (auto end = plan()) return *end;
    if (auto end = begin()) return *end;
    if (auto end = upload()) return *end;
    return finish();
  }

 private:
  ending plan();
  ending target_generation();
  ending refuse_existing();
  ending begin();
  ending begin_claim(v1::BeginImportRequest begin);
  ending upload();
  ending skip_stored();
  int finish();
  int commit_upsert(const v1::CommitImportRequest& commit);
  std::string abort_uploads();
  int abort_with(const status& why) {
    if (hashed_.valid()) hashed_.wait();
    return fail(err_, why, abort_uploads());
  }
  int stop_interrupted();

  const online_options& o_;
  const import_args& t_;
  std::ostream& out_;
  std::ostream& err_;
  client c_;
  // 1. plan
  std::optional<ev1::Policy> requested_;  // none: the daemon's default policy
  std::optional<upsert_plan> up_;
  events::revision_key id_;
  std::vector<model_file> files_;
  v1::ModelManifest manifest_;
  std::vector<std::string> keys_;       // every payload's key, in manifest order
  std::vector<payload_put> payloads_;   // the same payloads, with their bytes' place
  uint64_t total_ = 0;
  // 2. begin
  std::optional<v1::RevisionView> resumed_;  // the IMPORTING revision continued
  v1::RevisionView begun_;
  // 3. upload
  std::future<result<std::vector<std::string>>> hashed_;  // each file's sha256
  std::mutex uploaded_mutex_;
  std::vector<std::string> uploaded_;  // keys stored (by this run or a resumed one)
  uint64_t skipped_bytes_ = 0;
};

// ------------------------------------------------------------------ 1. plan

ending import_run::plan() {
  if (t_.jobs < 1 || t_.jobs > 64) return fail(err_, {errc::invalid_argument, "--jobs must be 1..64"});
  install_interrupt_flag();  // Ctrl-C stops at the next chunk; see stop_interrupted
  auto requested = requested_policy(t_.policy);
  if (!requested) return fail(err_, requested.error());
  requested_ = *requested;
  // upsert: the base's lineage at the next generation, unless one is given.
  if (t_.upsert) {
    auto base = read_revision(c_, t_.upsert->base, true);
    if (!base) return fail(err_, base.error(), "nothing was uploaded");
    up_ = upsert_plan{base->id, base->view,
                      t_.upsert->request_id.empty() ? new_request_id("upsert")
                                                    : t_.upsert->request_id};
  }
  auto parsed = up_ ? result<events::revision_key>{up_->base} : parse_id(t_.id);
  if (!parsed) return fail(err_, parsed.error());
  id_ = *parsed;
  if (up_) {
    id_.generation = t_.upsert->generation;
    // The same request id again: its claim's target (the next generation may be it).
    if (auto claim = claim_now(c_, *up_); !id_.generation && claim)
      id_.generation = claim->target_generation();
    if (auto end = target_generation()) return end;
  }
  std::error_code ec;
  if (!fs::is_directory(t_.dir, ec))
    return fail(err_, {errc::invalid_argument, "DIR '" + t_.dir + "' is not a directory"});
  // Every entry is checked before anything is sent: a directory that cannot
  // be read completely is refused, not imported in part.
  auto walked = walk_model_directory(t_.dir);
  if (!walked) return fail(err_, walked.error(), "nothing was uploaded");
  files_ = std::move(*walked);
  if (files_.empty())
    return fail(err_, {errc::invalid_argument, "DIR '" + t_.dir + "' has no files"});
  // --resume continues the IMPORTING revision of that id (the highest
  // generation without #generation); when there is none it is an ordinary
  // import.
  if (t_.resume && !up_) {
    auto importing = importing_revision(c_, t_.id);
    if (!importing) return fail(err_, importing.error());
    if (*importing) {
      id_ = (*importing)->first;
      resumed_ = (*importing)->second;
    }
  }
  if (auto end = target_generation()) return end;
  // Every file, in path order, cut into payloads of <= 64 MiB; each file is
  // an affinity unit.
  manifest_.set_format("weightd.model/1");
  auto prefix = events::manifest_key(id_);
  prefix = prefix.substr(0, prefix.size() - std::string("manifest").size()) + "files/";
  for (const auto& file : files_) {
    auto* f = manifest_.add_files();
    f->set_path(file.path);
    f->set_size(file.size);  // its sha256 is computed as it is uploaded
    uint64_t parts = std::max<uint64_t>(1, (f->size() + kPayloadBytes - 1) / kPayloadBytes);
    for (uint64_t i = 0; i < parts; ++i) {
      auto* chunk = f->add_chunks();
      chunk->set_key(prefix + f->path() + (parts > 1 ? fmt::format(".part{:04}", i) : ""));
      chunk->set_offset(i * kPayloadBytes);
      chunk->set_size(std::min(kPayloadBytes, f->size() - i * kPayloadBytes));
      keys_.push_back(chunk->key());
      payload_put p;
      p.header.set_tenant(id_.tenant);
      p.header.set_key(chunk->key());
      p.header.set_group_id(events::payload_group_id(id_));
      p.header.set_data_type(ev1::DATA_TYPE_WEIGHT);
      p.header.set_affinity_id(f->path());
      p.source = file.source;
      p.offset = chunk->offset();
      p.size = chunk->size();
      p.file = f->path();
      p.file_number = static_cast<uint64_t>(manifest_.files_size());
      payloads_.push_back(std::move(p));
    }
    total_ += f->size();
  }
  if (interrupted()) {
    err_ << "weightctl: interrupted; nothing was uploaded\n";
    return kExitInterrupted;
  }
  return refuse_existing();
}

/// Without #generation: the next generation of the lineage.
ending import_run::target_generation() {
  if (id_.generation) return {};
  auto lineage = id_;
  lineage.generation = 0;
  auto highest = resolve(c_, up_ ? events::canonical_text(lineage) : t_.id, false);
  if (!highest) return fail(err_, highest.error());
  id_.generation = highest->generation + 1;
  return {};
}

/// A generation that exists already: said before anything is uploaded.
ending import_run::refuse_existing() {
  if (up_ || resumed_) return {};
  v1::GetRevisionRequest get;
  *get.mutable_id() = id_.to_proto();
  get.set_include_hidden(true);
  auto existing = c_.get_revision(get);
  if (!existing || existing->availability() == ev1::IMPORTING) return {};
  auto lineage = id_;
  lineage.generation = 0;
  return fail(err_,
              {errc::conflict, events::canonical_text(id_) + " exists already (" +
                                   short_enum_name(existing->availability(),
                                                   ev1::Availability_descriptor()) +
                                   "); a generation is imported once"},
              "import the next generation with `weightctl import " + t_.dir + " --as " +
                  events::canonical_text(lineage) + "`, or replace it with `weightctl upsert " +
                  t_.dir + " --base " + events::canonical_text(id_) + "`; nothing was uploaded");
}

// ----------------------------------------------------------------- 2. begin

ending import_run::begin() {
  if (resumed_) {
    begun_ = *resumed_;
  } else {
    v1::BeginImportRequest begin;
    *begin.mutable_id() = id_.to_proto();
    begin.set_expected_payload_count(keys_.size());
    begin.set_expected_logical_bytes(std::max<uint64_t>(total_, 1));
    begin.set_affinity_count(static_cast<uint64_t>(manifest_.files_size()));
    if (requested_) *begin.mutable_policy() = *requested_;
    if (up_) {
      if (auto end = begin_claim(std::move(begin))) return end;
    } else {
      auto begun = c_.begin_import(begin);
      if (!begun) return fail(err_, begun.error());
      begun_ = std::move(*begun);
    }
  }
  // Each file (an affinity unit) goes straight to the tier its policy gives
  // it: all COLD, all HOT, or the MIXED planner's choice (SPEC §2 Spill).
  std::set<std::string> hot_files;
  auto preferred = begun_.policy().preferred_residency();
  for (const auto& f : manifest_.files())
    if (preferred == ev1::RESIDENCY_HOT) hot_files.insert(f.path());
  if (preferred == ev1::RESIDENCY_MIXED) {
    std::vector<actors::planner_unit> units;
    for (const auto& f : manifest_.files()) units.push_back({f.path(), f.size()});
    auto plan = actors::plan_mixed(std::move(units), begun_.policy().mixed_hot_ratio());
    if (plan) hot_files.insert(plan->hot.begin(), plan->hot.end());
  }
  for (auto& p : payloads_)
    p.header.set_tier(hot_files.count(p.file) ? ev1::TIER_HOT : ev1::TIER_COLD);
  return {};
}

/// Upsert: the claim (the same request id again returns it; --resume
/// continues its upload), once the base is out of the way for DELETE_FIRST.
ending import_run::begin_claim(v1::BeginImportRequest begin) {
  v1::BeginUpsertRequest claim_req;
  *claim_req.mutable_base() = up_->base.to_proto();
  claim_req.set_expected_metadata_generation(up_->base_view.metadata_generation());
  claim_req.set_target_generation(id_.generation);
  claim_req.set_mode(t_.upsert->delete_first ? v1::DELETE_FIRST : v1::PUT_FIRST);
  claim_req.set_request_id(up_->request_id);
  begin.clear_id();
  *claim_req.mutable_import() = begin;
  auto claim = c_.begin_upsert(claim_req);
  if (!claim) return fail(err_, claim.error(), "nothing was uploaded");
  if (claim->phase() == "DELETING_BASE") {  // a large base is still being deleted
    claim = wait_for_claim(c_, *up_, {"DELETING_BASE"}, t_.quiet, err_);
    if (!claim) return fail(err_, claim.error());
  }
  if (claim->phase() != "IMPORTING_TARGET")
    return fail(err_, {errc::conflict, "claim '" + up_->request_id + "' is " + claim->phase() +
                                           ", not importing its target"});
  v1::GetRevisionRequest get;
  *get.mutable_id() = id_.to_proto();
  get.set_include_hidden(true);
  auto begun = c_.get_revision(get);
  if (!begun) return fail(err_, begun.error());
  begun_ = std::move(*begun);
  if (t_.resume) resumed_ = begun_;  // payloads stored by an earlier run are not sent again
  return {};
}

// -------------------------------------------------------- aborts, interrupts

/// Aborts what this run began; says what became of it (fail()'s "next").
std::string import_run::abort_uploads() {
  if (up_) {  // the claim ends; its target's import is aborted with its uploads
    v1::AbortUpsertRequest abort;
    *abort.mutable_base() = up_->base.to_proto();
    abort.set_request_id(up_->request_id);
    auto aborted = c_.abort_upsert(abort);
    return aborted ? "the upsert was aborted and its uploads removed; the base is untouched"
                   : "aborting failed too (" + aborted.error().to_string() +
                         "): run `weightctl lineage " + events::canonical_text(up_->base) +
                         " --abort " + up_->request_id + "`";
  }
  v1::AbortImportRequest abort;
  *abort.mutable_id() = id_.to_proto();
  abort.set_expected_metadata_generation(begun_.metadata_generation());
  {
    std::lock_guard lock{uploaded_mutex_};
    for (const auto& k : uploaded_) abort.add_keys_to_remove(k);  // a resumed run's too
  }
  abort.add_keys_to_remove(events::manifest_key(id_));
  auto aborted = c_.abort_import(abort);
  return aborted ? fmt::format("the import was aborted and its {} removed",
                               count_of(static_cast<uint64_t>(aborted->removed_keys_size()),
                                        "uploaded object", "uploaded objects"))
                 : "aborting failed too (" + aborted.error().to_string() +
                       "): run `weightctl abort " + events::canonical_text(id_) + "`";
}

/// SPEC §10: an interrupt (SIGINT, SIGTERM) ends the import cleanly with exit
/// 130: aborted and its uploads removed, or, when --resume was given, kept
/// IMPORTING with the command that continues it.
int import_run::stop_interrupted() {
  if (hashed_.valid()) hashed_.wait();
  if (!t_.resume) {
    err_ << "weightctl: interrupted; " << abort_uploads() << "\n";
    return kExitInterrupted;
  }
  auto again = up_ ? fmt::format("weightctl upsert {} --base {} --request-id {} --resume", t_.dir,
                                 events::canonical_text(up_->base), up_->request_id)
                   : fmt::format("weightctl import {} --as {} --resume", t_.dir,
                                 events::canonical_text(id_));
  err_ << "weightctl: interrupted; " << events::canonical_text(id_)
       << " stays IMPORTING with what it uploaded; continue it with `" << again << "`\n";
  return kExitInterrupted;
}

// ---------------------------------------------------------------- 3. upload

ending import_run::upload() {
  if (interrupted()) return stop_interrupted();
  // The files' sha256 (for the manifest) is computed on a thread of its own
  // while the bytes upload: hashing costs as much CPU as the transfer itself.
  hashed_ = std::async(std::launch::async, [this]() -> result<std::vector<std::string>> {
    std::vector<std::string> digests;
    for (const auto& file : files_) {
      if (interrupted()) return status{errc::internal, "interrupted"};
      auto digest = persistence::digest_file(file.source, true);
      if (!digest) return digest.error();
      digests.push_back(digest->sha256);
    }
    return digests;
  });
  if (auto end = skip_stored()) return end;
  progress_line bar{total_, static_cast<uint64_t>(files_.size()), t_.quiet};
  auto put = put_payloads(o_.connection, payloads_, t_.jobs, bar, skipped_bytes_,
                          [this](const std::string& key) {
                            std::lock_guard lock{uploaded_mutex_};
                            uploaded_.push_back(key);
                          });
  bar.end();
  if (interrupted()) return stop_interrupted();
  if (!put.ok()) return abort_with(put);
  return {};
}

/// --resume: a payload already stored with the same size and bytes is not
/// sent again; one stored with other bytes stops the import untouched.
ending import_run::skip_stored() {
  if (!resumed_) return {};
  std::vector<payload_put> to_send;
  for (auto& p : payloads_) {
    auto info = c_.stat(id_.tenant, p.header.key());
    if (!info) {  // not stored yet
      to_send.push_back(std::move(p));
      continue;
    }
    auto same = stored_matches(p.source, p.offset, p.size, *info);
    if (!same || !*same) hashed_.wait();
    if (!same) return fail(err_, same.error());
    if (!*same)
      return fail(err_,
                  {errc::conflict, "cannot resume: the stored object '" + p.header.key() +
                                       "' differs from '" + p.file + "' in DIR"},
                  "the import was left as it is: `weightctl abort " +
                      events::canonical_text(id_) + "`, then import again");
    skipped_bytes_ += p.size;
    uploaded_.push_back(p.header.key());
  }
  payloads_ = std::move(to_send);
  return {};
}

// ---------------------------------------------------------------- 4. finish

int import_run::finish() {
  auto digests = hashed_.get();
  if (interrupted()) return stop_interrupted();
  if (!digests) return abort_with(digests.error());
  for (int i = 0; i < manifest_.files_size(); ++i)
    manifest_.mutable_files(i)->set_sha256((*digests)[static_cast<size_t>(i)]);
  auto manifest_json = to_json(manifest_, true);
  v1::PutHeader mh;
  mh.set_tenant(id_.tenant);
  mh.set_key(events::manifest_key(id_));
  mh.set_group_id(events::payload_group_id(id_));
  mh.set_data_type(ev1::DATA_TYPE_METADATA);
  auto put_manifest = c_.put_bytes(mh, manifest_json);
  if (!put_manifest && resumed_ && put_manifest.error().code() == errc::object_already_exists) {
    // An earlier run got as far as the manifest: it stands if it is this one.
    auto info = c_.stat(id_.tenant, events::manifest_key(id_));
    if (info && info->sha256() == events::sha256_hex(manifest_json)) put_manifest = *info;
  }
  if (!put_manifest) return abort_with(put_manifest.error());
  if (interrupted()) return stop_interrupted();
  v1::CommitImportRequest commit;
  *commit.mutable_id() = id_.to_proto();
  commit.set_expected_metadata_generation(begun_.metadata_generation());
  auto* m = commit.mutable_manifest();
  m->set_manifest_key(events::manifest_key(id_));
  m->set_manifest_sha256(put_manifest->sha256());
  m->set_payload_keys_sha256(events::payload_keys_sha256(keys_));
  m->set_payload_count(keys_.size());
  m->set_logical_bytes(std::max<uint64_t>(total_, 1));
  for (const auto& k : keys_) commit.add_payload_keys(k);
  if (up_) return commit_upsert(commit);
  auto committed = c_.commit_import(commit);
  if (!committed) return abort_with(committed.error());
  if (o_.json) {
    out_ << to_json(*committed) << "\n";
    return 0;
  }
  out_ << fmt::format("imported {}: {} files, {} payloads, {} ({}){}\n",
                      events::canonical_text(id_), manifest_.files_size(), keys_.size(),
                      format_bytes(total_), ev1::Availability_Name(committed->availability()),
                      resumed_ ? fmt::format("; resumed, {} already stored",
                                             format_bytes(skipped_bytes_))
                               : "");
  return 0;
}

/// The end of `weightctl upsert`: CommitUpsert (the target READY, the base
/// retires), with --wait until the base is deleted, then one line.
int import_run::commit_upsert(const v1::CommitImportRequest& commit) {
  v1::CommitUpsertRequest req;
  *req.mutable_target() = commit.id();
  req.set_request_id(up_->request_id);
  *req.mutable_commit() = commit;
  auto committed = c_.commit_upsert(req);
  if (!committed) {
    // Missing or unreadable members leave the claim for a retry with --resume;
    // anything the daemon did not abort itself is aborted here.
    auto claim = claim_now(c_, *up_);
    if (claim && claim->phase() == "ABORTED")
      return fail(err_, committed.error(), "the upsert was aborted; the base is untouched");
    return abort_with(committed.error());
  }
  auto claim = claim_now(c_, *up_);
  if (claim && t_.upsert->wait)
    claim = wait_for_claim(c_, *up_, {"RETIRING_BASE", "DELETING_BASE"}, t_.quiet, err_);
  if (!claim) return fail(err_, claim.error());
  if (o_.json) {
    out_ << to_json(*committed) << "\n";
    return 0;
  }
  out_ << fmt::format("upserted {} over #{}: {} files, {} payloads, {} ({}); claim '{}' is {}{}\n",
                      events::canonical_text(events::revision_key::from_proto(committed->id())),
                      up_->base.generation, manifest_.files_size(), keys_.size(),
                      format_bytes(total_), ev1::Availability_Name(committed->availability()),
                      up_->request_id, claim->phase(),
                      claim->phase() == "RETIRING_BASE"
                          ? " (the base is deleted once its leases end)"
                          : "");
  return 0;
}

}  // namespace

int import_dir(const online_options& o, const import_args& args, std::ostream& out,
               std::ostream& err) {
  return import_run{o, args, out, err}.run();
}

}  // namespace weightd::api
