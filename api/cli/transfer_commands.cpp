// weightctl export (and the import and export commands' flags): a revision
// back into a model directory. The import itself is import_command.cpp.
#include "api/cli/transfer_commands.hpp"

#include <google/protobuf/util/json_util.h>
#include <spdlog/fmt/fmt.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

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
constexpr std::chrono::milliseconds kExportLeaseTtl{30'000};  // renewed every 10 s
}  // namespace

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
