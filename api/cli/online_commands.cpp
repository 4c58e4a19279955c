#include "api/cli/online_commands.hpp"
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
#include "api/cli/format.hpp"
#include "api/cli/lease_commands.hpp"
#include "api/cli/online_support.hpp"
#include "events/identity.hpp"
#include "persistence/tier_store.hpp"

namespace weightd::api {

namespace ev1 = events::v1;
namespace fs = std::filesystem;


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
