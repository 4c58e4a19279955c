#include "api/cli/online_commands.hpp"
#include "events/time_text.hpp"

#include <google/protobuf/util/json_util.h>
#include <spdlog/fmt/fmt.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <thread>
#include <fstream>
#include <future>
#include <optional>
#include <set>

#include "core/mixed_plan.hpp"
#include "api/cli/cli_words.hpp"
#include "api/cli/format.hpp"
#include "api/cli/journal_commands.hpp"
#include "api/common/json_output.hpp"
#include "api/cli/lease_commands.hpp"
#include "api/cli/online_support.hpp"
#include "events/identity.hpp"
#include "persistence/tier_store.hpp"

namespace weightd::api {

namespace ev1 = events::v1;
namespace fs = std::filesystem;


namespace {

std::string residency_name(int r) { return short_enum_name(r, ev1::Residency_descriptor()); }
std::string availability_name(int a) { return short_enum_name(a, ev1::Availability_descriptor()); }

std::string percent_decode(const std::string& x) {
  std::string out;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] == '%' && i + 2 < x.size() && std::isxdigit(static_cast<unsigned char>(x[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(x[i + 2]))) {
      out += static_cast<char>(std::stoi(x.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += x[i];
    }
  }
  return out;
}

/// The namespaces the tenant's revisions live in, found in the key space:
/// every published or importing revision has its objects under
/// "weights/<ns>/..." (ListRevisions lists one namespace at a time). A
/// namespace whose revisions are all deleted has no object left and is not
/// listed; "default" always is.
result<std::set<std::string>> namespaces_of(client& c, const std::string& tenant) {
  std::set<std::string> found{"default"};
  v1::ListObjectsRequest q;
  q.set_tenant(tenant);
  q.set_prefix("weights/");
  q.set_limit(1000);
  do {
    auto page = c.list_objects(q);
    if (!page) return page.error();
    for (const auto& i : page->objects()) {
      auto rest = i.key().substr(8);
      if (auto slash = rest.find('/'); slash != std::string::npos)
        found.insert(percent_decode(rest.substr(0, slash)));
    }
    q.set_start_after(page->next_start_after());
  } while (!q.start_after().empty());
  return found;
}

constexpr const char* kRevisionRow = "{:<{}} {:<9} {:<9} {:>5} {:>10}{}\n";

}  // namespace

int list_revisions(const online_options& o, const std::string& ns, const std::string& resource,
                   bool all_states, bool all_namespaces, std::ostream& out, std::ostream& err) {
  client c{o.connection};
  std::set<std::string> namespaces{ns};
  if (all_namespaces) {
    auto found = namespaces_of(c, o.tenant);
    if (!found) return fail(err, found.error());
    namespaces = *found;
  }
  std::vector<v1::RevisionView> views;
  for (const auto& one : namespaces) {
    v1::ListRevisionsRequest q;
    q.set_tenant(o.tenant);
    q.set_ns(one);
    q.set_resource(resource);
    q.set_limit(1000);
    if (all_states)
      for (auto s : {ev1::IMPORTING, ev1::READY, ev1::DEGRADED, ev1::DELETING, ev1::DELETED})
        q.add_states(s);
    do {
      auto page = c.list_revisions(q);
      if (!page) return fail(err, page.error());
      for (const auto& v : page->revisions()) views.push_back(v);
      q.set_page_token(page->next_page_token());
    } while (!q.page_token().empty());
  }
  if (o.json) {
    out << json_line(list_of(views)) << "\n";
    return 0;
  }
  if (views.empty()) {
    out << fmt::format("no {}revisions in {}{}\n", all_states ? "" : "READY or DEGRADED ",
                       all_namespaces ? "any namespace" : "namespace " + ns,
                       all_states ? "" : " (--all shows every state)");
    return 0;
  }
  std::vector<std::string> ids;
  for (const auto& v : views)
    ids.push_back(events::canonical_text(events::revision_key::from_proto(v.id())));
  auto width = column_width(44, ids);
  out << fmt::format(kRevisionRow, "REVISION", width, "STATE", "RESIDENCY", "GEN", "SIZE",
                     "  OPERATION");
  for (size_t i = 0; i < views.size(); ++i) {
    const auto& v = views[i];
    // The active operation, if any, at the end: "op 4 -> COLD 3/8 units".
    std::string op;
    if (v.operation_id() && v.has_operation())
      op = fmt::format("  op {} -> {} {}/{} units", v.operation_id(),
                       residency_name(v.operation().target()), v.operation().processed_units(),
                       v.operation().total_units());
    out << fmt::format(kRevisionRow, ids[i], width, availability_name(v.availability()), residency_name(v.residency()),
                       v.metadata_generation(), format_bytes(v.manifest().logical_bytes()), op);
  }
  return 0;
}

namespace {

/// "Field:  value" lines, the values aligned.
struct describe_lines {
  std::ostream& out;
  std::string indent;
  void line(const std::string& field, const std::string& value) {
    // Values start at one column however deep the section.
    out << fmt::format("{}{:<{}}{}\n", indent, field + ":", 22 - indent.size(), value);
  }
  void section(const std::string& title) { out << fmt::format("{}{}:\n", indent, title); }
};

std::string time_or_never(int64_t ms, const char* never = "-") {
  return ms ? format_time(ms) : never;
}

}  // namespace

int online_history(const online_options& o, const std::string& text, std::ostream& out,
                   std::ostream& err) {
  client c{o.connection};
  auto id = resolve(c, text, false);
  if (!id) return fail(err, id.error());
  if (!id->generation) return fail(err, {errc::not_found, "no revision " + text});
  return print_history(
      *id,
      [&](const std::function<void(const events::v1::Envelope&)>& each) -> status {
        v1::HistoryRequest req;
        *req.mutable_id() = id->to_proto();
        req.set_limit(1000);
        do {  // page by page: the daemon answers at most 1000 events a call
          auto page = c.history(req);
          if (!page) return page.error();
          for (const auto& e : page->events()) each(e);
          req.set_page_token(page->next_page_token());
        } while (!req.page_token().empty());
        return {};
      },
      o.json, out, err);
}

int show_revision(const online_options& o, const std::string& text, std::ostream& out,
                  std::ostream& err) {
  client c{o.connection};
  auto rev = read_revision(c, text, false);
  if (!rev) return fail(err, rev.error());
  const auto& v = rev->view;
  if (o.json) {
    out << to_json(v) << "\n";
    return 0;
  }
  describe_lines d{out, ""};
  d.line("Revision", events::canonical_text(rev->id));
  d.line("State", availability_name(v.availability()));
  d.line("Residency", residency_name(v.residency()) +
                          (v.residency() == ev1::RESIDENCY_MIXED
                               ? fmt::format(" ({:.0f}% of the bytes HOT)", 100 * v.observed_hot_ratio())
                               : ""));
  d.line("Generation", std::to_string(v.metadata_generation()));
  d.line("Size", v.has_manifest() ? format_bytes(v.manifest().logical_bytes()) : "-");
  d.line("Created", time_or_never(v.created_at_ms()));
  d.line("Updated", time_or_never(v.updated_at_ms()));
  d.line("Last accessed", time_or_never(v.last_accessed_at_ms(), "never"));
  d.section("Policy");
  describe_lines p{out, "  "};
  p.line("Preferred", residency_name(v.policy().preferred_residency()));
  if (v.policy().preferred_residency() == ev1::RESIDENCY_MIXED || v.policy().mixed_hot_ratio() != 0)
    p.line("Mixed HOT ratio", fmt::format("{}", v.policy().mixed_hot_ratio()));
  p.line("Mode", short_enum_name(v.policy().migration_mode(), ev1::MigrationMode_descriptor()));
  d.section("Files");
  p.line("Manifest", v.has_manifest() && !v.manifest().manifest_key().empty()
                         ? v.manifest().manifest_key() : "-");
  p.line("Payloads", std::to_string(v.payload_keys_size()));
  p.line("Affinity units", std::to_string(v.affinity_count()));
  d.section("Leases");
  p.line("Live", std::to_string(v.active_lease_count()));
  if (v.active_lease_count()) p.line("Nearest expiry", time_or_never(v.nearest_lease_expiry_ms()));
  if (v.drain_deadline_ms())
    p.line("Draining until", format_time(v.drain_deadline_ms()) + " (then revoked and removed)");
  if (!v.retired_by().empty())
    p.line("Retiring", "upsert claim '" + v.retired_by() + "' replaced it; removed once they end");
  d.section("Operation");
  if (v.operation_id() && v.has_operation()) {
    const auto& op = v.operation();
    p.line("Id", std::to_string(op.operation_id()));
    p.line("Kind", short_enum_name(op.kind(), ev1::OperationKind_descriptor()));
    p.line("Target", residency_name(op.target()));
    p.line("State", short_enum_name(op.state(), v1::OperationState_descriptor()));
    p.line("Progress", fmt::format("{}/{} units, {} of {}", op.processed_units(), op.total_units(),
                                   format_bytes(op.processed_bytes()),
                                   format_bytes(op.total_bytes())));
    if (!op.message().empty()) p.line("Message", in_cli_words(op.message()));
  } else {
    p.line("Id", "none");
  }
  return 0;
}

int remove_revision(const online_options& o, const std::string& text, uint64_t drain_timeout_ms,
                    std::ostream& out, std::ostream& err) {
  client c{o.connection};
  auto rev = read_revision(c, text, true);
  if (!rev && rev.error().code() == errc::not_found) {
    // Nothing READY: an import that never finished is removed by `abort`.
    auto hidden = read_revision(c, text, false);
    if (hidden && hidden->view.availability() == ev1::IMPORTING) {
      auto name = events::canonical_text(hidden->id);
      return fail(err, {errc::not_found, "no READY revision " + text + "; " + name +
                                             " is IMPORTING (an import that did not finish)"},
                  "`weightctl abort " + name + "` aborts it and removes what it uploaded");
    }
  }
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
    out << fmt::format("removing {}: waiting for {} to end (revoked at {})\n",
                       events::canonical_text(id),
                       count_of(removed->revision().active_lease_count(), "live lease",
                                "live leases"),
                       format_time(removed->revision().drain_deadline_ms()));
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
  if (!updated) return fail(err, updated.error());
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
  out << fmt::format("aborted {}: {} removed ({})\n", events::canonical_text(rev->id),
                     count_of(static_cast<uint64_t>(aborted->removed_keys_size()), "object",
                              "objects"),
                     availability_name(aborted->revision().availability()));
  for (const auto& r : aborted->refused_keys())
    out << fmt::format("  not touched: {} ({})\n", r.key(), in_cli_words(r.reason()));
  return 0;
}

int show_lineage(const online_options& o, const std::string& text,
                 const std::string& abort_request_id, std::ostream& out, std::ostream& err) {
  client c{o.connection};
  auto id = parse_id(text);
  if (!id) return fail(err, id.error());
  v1::GetLineageRequest q;
  q.set_tenant(id->tenant);
  q.set_ns(id->ns);
  q.set_resource(id->resource);
  q.set_revision(id->revision);
  auto lineage = c.get_lineage(q);
  if (!lineage) return fail(err, lineage.error());
  if (!abort_request_id.empty()) {
    if (lineage->claim().request_id() != abort_request_id)
      return fail(err, {errc::not_found, "the lineage has no claim '" + abort_request_id + "'"});
    v1::AbortUpsertRequest abort;
    auto base = *id;
    base.generation = lineage->claim().base_generation();
    *abort.mutable_base() = base.to_proto();
    abort.set_request_id(abort_request_id);
    auto aborted = c.abort_upsert(abort);
    if (!aborted) return fail(err, aborted.error());
    lineage = c.get_lineage(q);
    if (!lineage) return fail(err, lineage.error());
  }
  if (o.json) {
    out << to_json(*lineage) << "\n";
    return 0;
  }
  auto name = *id;
  name.generation = 0;
  describe_lines d{out, ""};
  d.line("Lineage", events::canonical_text(name));
  d.line("Watermark", lineage->watermark() ? "#" + std::to_string(lineage->watermark())
                                           : std::string{"none (no generation committed)"});
  if (!lineage->has_claim()) {
    d.line("Claim", "none");
    return 0;
  }
  const auto& claim = lineage->claim();
  d.section("Claim");
  describe_lines p{out, "  "};
  p.line("Request id", claim.request_id());
  p.line("Mode", claim.mode() == v1::DELETE_FIRST ? "DELETE_FIRST" : "PUT_FIRST");
  p.line("Base", "#" + std::to_string(claim.base_generation()));
  p.line("Target", "#" + std::to_string(claim.target_generation()));
  p.line("Phase", claim.phase());
  return 0;
}

int promote_standby(const online_options& o, bool force, std::ostream& out, std::ostream& err) {
  client c{o.connection};
  v1::PromoteRequest req;
  req.set_force(force);
  auto promoted = c.promote(req);
  if (!promoted) return fail(err, promoted.error());
  // The standby restarts as the leader on its journal: wait until it serves.
  // A fresh channel each time: the first one saw the standby's server go
  // away and waits out gRPC's reconnect backoff (seconds) before it tries.
  for (int i = 0; i < 600; ++i) {
    auto s = client{o.connection}.server_status();
    if (s && s->role() == "leader") {
      if (o.json) out << to_json(*s) << "\n";
      else
        out << fmt::format("promoted {}: the leader at epoch {}, journal seq {}\n",
                           o.connection.address, s->epoch(), s->journal_seq());
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return fail(err, {errc::busy, "the standby accepted the promotion to epoch " +
                                    std::to_string(promoted->epoch()) +
                                    " but does not serve as the leader after 60 s"},
              "look at its log");
}

int show_status(const online_options& o, std::ostream& out, std::ostream& err) {
  client c{o.connection};
  auto s = c.server_status();
  if (!s) return fail(err, s.error());
  if (o.json) {
    out << to_json(*s) << "\n";
    return 0;
  }
  if (s->role() == "standby") {  // SPEC §11: where it is behind its leader
    out << fmt::format("weightd {} at {} (standby of {}, epoch {})\n", s->version(),
                       o.connection.address, s->leader(), s->epoch());
    auto behind = s->leader_seq() > s->journal_seq() ? s->leader_seq() - s->journal_seq() : 0;
    out << fmt::format("journal seq  {} ({} behind its leader, lag {} ms)\n", s->journal_seq(),
                       behind, s->lag_ms());
    out << fmt::format("following    {}\n",
                       s->following() ? std::string{"yes"}
                                      : "no" + (s->follow_error().empty() ? std::string{}
                                                                          : ": " + s->follow_error()));
    out << fmt::format("replicas     {} of {} here, {} copied from the leader{}\n",
                       s->mirror_held(), s->mirror_objects(), format_bytes(s->mirror_copied_bytes()),
                       s->mirror_error().empty() ? std::string{}
                                                 : " (last failure: " + s->mirror_error() + ")");
    return 0;
  }
  out << fmt::format("weightd {} at {} (leader, epoch {}, writer {})\n", s->version(),
                     o.connection.address, s->epoch(), s->writer_id());
  out << fmt::format("journal seq  {}\n", s->journal_seq());
  out << fmt::format("objects      {}\n", s->objects());
  out << fmt::format("HOT          {} used, {} reserved of {}\n", format_bytes(s->hot().used_bytes()),
                     format_bytes(s->hot().reserved_bytes()), format_bytes(s->hot().capacity_bytes()));
  out << fmt::format("COLD         {} used\n", format_bytes(s->cold().used_bytes()));
  for (const auto& standby : s->standbys())  // SPEC §11: who follows, how far
    out << fmt::format("standby      {} at seq {}, bytes to seq {}\n", standby.member(),
                       standby.durable_seq(), standby.mirrored_seq());
  if (s->sync_standbys() > 0)
    out << fmt::format("sync         a write waits for {} standby{}\n", s->sync_standbys(),
                       s->sync_standbys() == 1 ? "" : "s");
  for (const auto& [op, n] : s->guard_skips()) out << fmt::format("guard skips  {} {}\n", op, n);
  return 0;
}

}  // namespace weightd::api
