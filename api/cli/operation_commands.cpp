#include "api/cli/operation_commands.hpp"

#include <spdlog/fmt/fmt.h>

#include <optional>
#include <thread>

#include "api/cli/exit_codes.hpp"
#include "api/cli/cli_words.hpp"
#include "api/cli/format.hpp"
#include "api/common/json_output.hpp"
#include "api/cli/online_support.hpp"
#include "api/cli/lease_commands.hpp"
#include "events/time_text.hpp"

namespace weightd::api {

namespace ev1 = events::v1;

namespace {

std::string residency_name(int r) { return short_enum_name(r, ev1::Residency_descriptor()); }
std::string state_name(int s) { return short_enum_name(s, v1::OperationState_descriptor()); }

/// "operation 7: MIGRATING default/m@main#1 -> COLD, RUNNING, 2/4 units, 1.0 KiB/2.0 KiB"
std::string describe(const v1::Operation& op) {
  auto line = fmt::format(
      "operation {}: {} {} -> {}{}, {}, {}/{} units, {} of {}", op.operation_id(),
      short_enum_name(op.kind(), ev1::OperationKind_descriptor()),
      events::canonical_text(events::revision_key::from_proto(op.id())), residency_name(op.target()),
      op.target() == ev1::RESIDENCY_MIXED ? fmt::format(" (ratio {})", op.target_hot_ratio()) : "",
      state_name(op.state()), op.processed_units(), op.total_units(),
      format_bytes(op.processed_bytes()), format_bytes(op.total_bytes()));
  if (!op.message().empty()) line += "; " + in_cli_words(op.message());
  return line;
}

bool running(const v1::Operation& op) { return op.state() == v1::RUNNING; }

/// "; waiting for the lease of 'server' (lease 3) until 2026-...Z (in 50 s)":
/// who holds the revision's HOT replicas back, from ListLeases.
std::string lease_holders(client& c, const events::revision_key& id) {
  v1::ListLeasesRequest req;
  *req.mutable_id() = id.to_proto();
  auto leases = c.list_leases(req);
  if (!leases || leases->leases().empty()) return "";
  std::string names;
  for (const auto& l : leases->leases())
    names += fmt::format("{}'{}' (lease {}) until {}", names.empty() ? "" : ", ", l.holder(),
                         l.lease_id(), format_time(l.expiry_ms()));
  return "; held back by " + names;
}

/// migrate --wait: a line on stderr whenever the operation record changes
/// (its own units and bytes, its message, and the leases it waits for), until
/// it ends. Ctrl-C leaves it running and says so: nullopt then.
result<std::optional<v1::Operation>> wait_for(client& c, v1::Operation op,
                                              const events::revision_key& id, std::ostream& err) {
  install_interrupt_flag();
  v1::GetOperationRequest get;
  get.set_operation_id(op.operation_id());
  std::string last;
  while (running(op)) {
    auto line = fmt::format("operation {}: {}/{} units moved, {} of {}", op.operation_id(),
                            op.processed_units(), op.total_units(),
                            format_bytes(op.processed_bytes()), format_bytes(op.total_bytes()));
    if (!op.message().empty()) line += "; " + in_cli_words(op.message());
    if (op.message().find("lease") != std::string::npos) line += lease_holders(c, id);
    if (line != last) err << line << std::endl;
    last = line;
    for (int i = 0; i < 20 && !interrupted(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (interrupted()) {
      err << fmt::format("weightctl: interrupted; operation {} goes on in the daemon: "
                         "`weightctl op show {}` follows it, `weightctl op cancel {}` stops it\n",
                         op.operation_id(), op.operation_id(), op.operation_id());
      return std::optional<v1::Operation>{};
    }
    auto next = c.get_operation(get);
    if (!next) return next.error();
    op = std::move(*next);
  }
  return std::optional<v1::Operation>{std::move(op)};
}

}  // namespace

int migrate_revision(const online_options& o, const std::string& text, const migrate_args& a,
                     std::ostream& out, std::ostream& err) {
  auto target = parse_residency(a.to, "--to");
  if (!target) return fail(err, target.error());
  client c{o.connection};
  auto rev = read_revision(c, text, true);
  if (!rev) return fail(err, rev.error());
  v1::MigrateRequest req;
  *req.mutable_id() = rev->id.to_proto();
  req.set_expected_metadata_generation(rev->view.metadata_generation());
  req.set_target(*target);
  req.set_mixed_hot_ratio(a.ratio);
  auto op = c.migrate(req);
  if (!op) return fail(err, op.error(), "see `weightctl op ls` for running operations");
  if (a.wait) {
    auto waited = wait_for(c, *op, rev->id, err);
    if (!waited) return fail(err, waited.error());
    if (!*waited) return kExitInterrupted;
    op = std::move(**waited);
  }
  if (o.json) out << to_json(*op) << "\n";
  else out << describe(*op) << "\n";
  if (a.wait && op->state() != v1::COMPLETED)
    return fail(err, {errc::conflict, "the operation ended " + state_name(op->state())});
  return 0;
}

int show_operation(const online_options& o, uint64_t id, std::ostream& out, std::ostream& err) {
  client c{o.connection};
  v1::GetOperationRequest req;
  req.set_operation_id(id);
  auto op = c.get_operation(req);
  if (!op) return fail(err, op.error());
  if (o.json) {
    out << to_json(*op) << "\n";
    return 0;
  }
  out << describe(*op) << "\n";
  out << fmt::format("  started {}, updated {}{}\n", format_time(op->started_at_ms()),
                     format_time(op->updated_at_ms()),
                     op->cursor().empty() ? "" : ", cursor " + op->cursor());
  return 0;
}

int cancel_operation(const online_options& o, uint64_t id, std::ostream& out, std::ostream& err) {
  client c{o.connection};
  v1::CancelOperationRequest req;
  req.set_operation_id(id);
  auto op = c.cancel_operation(req);
  if (!op) return fail(err, op.error());
  if (o.json) {
    out << to_json(*op) << "\n";
    return 0;
  }
  out << describe(*op) << "\n";
  // What a cancel means for the bytes, in the words of the command.
  if (op->state() == v1::CANCELLED)
    out << fmt::format("  stopped at a file boundary: {} of {} units moved, every file whole; "
                       "`weightctl migrate` starts a new one\n",
                       op->processed_units(), op->total_units());
  else if (!running(*op))
    out << fmt::format("  it had already ended {}; nothing to cancel\n", state_name(op->state()));
  return 0;
}

int list_operations(const online_options& o, const std::string& ns, std::ostream& out,
                    std::ostream& err) {
  client c{o.connection};
  v1::ListRevisionsRequest q;
  q.set_tenant(o.tenant);
  q.set_ns(ns);
  std::vector<v1::Operation> ops;
  do {
    auto page = c.list_revisions(q);
    if (!page) return fail(err, page.error());
    for (const auto& v : page->revisions())
      if (v.has_operation()) ops.push_back(v.operation());
    q.set_page_token(page->next_page_token());
  } while (!q.page_token().empty());
  if (o.json) {
    out << json_line(list_of(ops)) << "\n";
    return 0;
  }
  if (ops.empty()) {
    out << "no running operations\n";
    return 0;
  }
  // Every cell is formatted first, so that the header sits over its column.
  constexpr const char* row = "{:<6} {:<{}} {:<6} {:>9} {:>22}  {}\n";
  std::vector<std::string> ids;
  for (const auto& op : ops)
    ids.push_back(events::canonical_text(events::revision_key::from_proto(op.id())));
  auto width = column_width(40, ids);
  out << fmt::format(row, "OP", "REVISION", width, "TO", "UNITS", "BYTES", "MESSAGE");
  for (size_t i = 0; i < ops.size(); ++i) {
    const auto& op = ops[i];
    out << fmt::format(row, op.operation_id(), ids[i], width, residency_name(op.target()),
                       fmt::format("{}/{}", op.processed_units(), op.total_units()),
                       format_bytes(op.processed_bytes()) + "/" + format_bytes(op.total_bytes()),
                       in_cli_words(op.message()));
  }
  return 0;
}

int reconcile(const online_options& o, bool dry_run, std::ostream& out, std::ostream& err) {
  client c{o.connection};
  v1::ReconcileRequest req;
  req.set_dry_run(dry_run);
  auto report = c.reconcile(req);
  if (!report) return fail(err, report.error());
  if (o.json) {
    out << to_json(*report) << "\n";
    return 0;
  }
  double used = report->hot_capacity_bytes()
                    ? 100.0 * static_cast<double>(report->hot_used_bytes()) /
                          static_cast<double>(report->hot_capacity_bytes())
                    : 0;
  out << fmt::format("HOT {} of {} ({:.1f}%): {}\n", format_bytes(report->hot_used_bytes()),
                     format_bytes(report->hot_capacity_bytes()), used,
                     report->pressure() ? "pressure" : report->relief() ? "relief" : "steady");
  if (report->decisions().empty()) {
    out << (dry_run ? "the next round decides nothing\n" : "the round decided nothing\n");
    return 0;
  }
  std::vector<std::string> ids;
  for (const auto& d : report->decisions())
    ids.push_back(events::canonical_text(events::revision_key::from_proto(d.id())));
  auto width = column_width(40, ids);
  out << fmt::format("{:<{}} {:<18} {:<6} {}\n", "REVISION", width, "ACTION", "TO", "REASON");
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto& d = report->decisions(static_cast<int>(i));
    out << fmt::format("{:<{}} {:<18} {:<6} {}\n", ids[i], width, d.action(),
                       d.target() == ev1::RESIDENCY_UNKNOWN ? "-" : residency_name(d.target()),
                       in_cli_words(d.reason()));
  }
  return 0;
}

}  // namespace weightd::api
