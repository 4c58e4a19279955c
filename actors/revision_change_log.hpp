// The daemon log's lines for the revision state changes a human cares about:
// one structured spdlog line ("short message key=value ...") per committed
// event that begins, ends or redirects something — import begun, committed,
// aborted; removal requested, drain started and finished, revision removed;
// lease expired or revoked; policy changed; migration or repair started,
// finished, failed, cancelled; a revision degraded or ready again.
//
// Called only where a revision applies events the journal has just
// committed (revision_queue.cpp's apply_committed), never while the state is
// rebuilt from the journal at startup: a restart does not re-log history.
// Quiet on purpose: grants, renewals, releases, progress rounds and
// residency observations write nothing (a reader's traffic is not news).
//
// Header-only so that it joins the actors library without a build change.
#pragma once

#include <spdlog/spdlog.h>

#include <string>
#include <string_view>

#include "actors/log_value.hpp"
#include "events/identity.hpp"
#include "events/revision_fold.hpp"
#include "events/time_text.hpp"

namespace weightd::actors::change_log {

using actors::quote_value;

/// "HOT", "COLD", "MIXED" (the proto's names without their prefix).
inline std::string residency_name(events::v1::Residency r) {
  std::string name = events::v1::Residency_Name(r);
  constexpr std::string_view kPrefix = "RESIDENCY_";
  if (name.compare(0, kPrefix.size(), kPrefix) == 0) name.erase(0, kPrefix.size());
  return name;
}

/// " by=... request=..." for an event a client's request caused; "" for the
/// system's own (the reconciler, a drain's end, startup work).
inline std::string requester(const events::v1::Envelope& e) {
  std::string out;
  if (!e.principal().empty()) out += " by=" + quote_value(e.principal());
  if (!e.request_id().empty()) out += " request=" + quote_value(e.request_id());
  return out;
}

/// " target=MIXED ratio=0.5" (the ratio only for MIXED); `key` names the first pair.
inline std::string target_text(events::v1::Residency target, double ratio,
                               std::string_view key = "target") {
  std::string out = " " + std::string{key} + "=" + residency_name(target);
  if (target == events::v1::RESIDENCY_MIXED) out += fmt::format(" ratio={}", ratio);
  return out;
}

/// The line of an operation that starts (alone, or inside the commit or the
/// policy change that starts it).
inline void operation_started(const std::string& rev, const events::v1::OperationStarted& op,
                              const events::v1::Envelope& e) {
  const char* what = op.kind() == events::v1::REPAIRING ? "repair" : "migration";
  std::string origin = op.automatic() ? " by=reconciler reason=" + quote_value(op.reason()) : requester(e);
  spdlog::info("{} started rev={} operation={}{} units={} bytes={}{}", what, rev, op.operation_id(),
               target_text(op.target(), op.target_hot_ratio()), op.total_units(), op.total_bytes(),
               origin);
}

/// What an operation that ends was doing, from the fold before its end.
inline std::string operation_text(const events::revision_index& before, uint64_t operation_id,
                                  const char** what) {
  *what = "migration";
  auto it = before.operations.find(operation_id);
  if (it == before.operations.end()) return "";
  if (it->second.kind == events::v1::REPAIRING) *what = "repair";
  return target_text(it->second.target, it->second.target_hot_ratio) +
         fmt::format(" units={}/{} bytes={}/{}", it->second.processed_units,
                     it->second.total_units, it->second.processed_bytes, it->second.total_bytes);
}

/// Logs `e`, a committed revision-stream event; `before` is the revision's
/// fold just before `e` is applied (for what the event itself does not
/// carry: a lease's holder, an operation's target, whether a drain ran).
inline void log_committed(const events::v1::Envelope& e, const events::revision_index& before) {
  namespace v1 = events::v1;
  auto rev_of = [](const v1::RevisionId& id) {
    return events::canonical_text(events::revision_key::from_proto(id));
  };
  auto record_of = [&](const v1::RevisionId& id) {
    return before.find(events::revision_key::from_proto(id));
  };
  switch (e.payload_case()) {
    case v1::Envelope::kImportBegun: {
      const auto& p = e.import_begun();
      spdlog::info("import begun rev={} group={} expected_payloads={} expected_bytes={}{}",
                   rev_of(p.id()), quote_value(p.payload_group_id()), p.expected_payload_count(),
                   p.expected_logical_bytes(), requester(e));
      break;
    }
    case v1::Envelope::kImportCommitted: {
      const auto& p = e.import_committed();
      std::string rev = rev_of(p.id());
      spdlog::info("import committed rev={} payloads={} bytes={} residency={}{}", rev,
                   p.payload_keys_size(), p.manifest().logical_bytes(),
                   residency_name(p.residency() == v1::RESIDENCY_UNKNOWN ? v1::RESIDENCY_HOT
                                                                         : p.residency()),
                   requester(e));
      if (p.has_operation()) operation_started(rev, p.operation(), e);
      break;
    }
    case v1::Envelope::kImportAborted: {
      const auto& p = e.import_aborted();
      // An empty reason is a client's AbortImport; else weightd's own (abandon).
      std::string reason = p.reason().empty() ? "client" : quote_value(p.reason());
      spdlog::info("import aborted rev={} reason={} extra_keys={}{}", rev_of(p.id()), reason,
                   p.keys_to_remove_size(), requester(e));
      break;
    }
    case v1::Envelope::kPolicyUpdated: {
      const auto& p = e.policy_updated();
      std::string rev = rev_of(p.id());
      const char* mode = p.policy().migration_mode() == v1::MIGRATION_PINNED   ? "PINNED"
                         : p.policy().migration_mode() == v1::MIGRATION_MANUAL ? "MANUAL"
                                                                                : "AUTO";
      spdlog::info("policy changed rev={}{} mode={}{}", rev,
                   target_text(p.policy().preferred_residency(), p.policy().mixed_hot_ratio(),
                               "preferred"),
                   mode, requester(e));
      if (p.has_operation()) operation_started(rev, p.operation(), e);
      break;
    }
    case v1::Envelope::kRemovalStarted: {
      const auto& p = e.removal_started();
      std::string rev = rev_of(p.id());
      const auto* r = record_of(p.id());
      if (p.drain_deadline_ms() > 0) {
        spdlog::info("revision removal requested rev={} drain=started leases={} drain_until={}{}",
                     rev, r ? r->leases.size() : 0, events::utc_text(p.drain_deadline_ms()),
                     requester(e));
      } else if (r && r->draining()) {
        // The system's second RemovalStarted: the drain is over, the delete begins.
        spdlog::info("drain finished rev={} leases_left={}; deleting", rev, r->leases.size());
      } else {
        spdlog::info("revision removal requested rev={}{}", rev, requester(e));
      }
      break;
    }
    case v1::Envelope::kRevisionDeleted: {
      const auto& p = e.revision_deleted();
      spdlog::info("revision removed rev={} removed_objects={}", rev_of(p.id()),
                   p.removed_keys_size());
      break;
    }
    case v1::Envelope::kLeaseExpired:
    case v1::Envelope::kLeaseRevoked: {
      bool revoked = e.has_lease_revoked();
      const auto& id = revoked ? e.lease_revoked().id() : e.lease_expired().id();
      uint64_t lease_id = revoked ? e.lease_revoked().lease_id() : e.lease_expired().lease_id();
      std::string holder;
      if (const auto* r = record_of(id))
        if (auto it = r->leases.find(lease_id); it != r->leases.end()) holder = it->second.holder;
      if (revoked)
        spdlog::info("lease revoked rev={} lease={} holder={} reason={}{}", rev_of(id), lease_id,
                     quote_value(holder), quote_value(e.lease_revoked().reason()), requester(e));
      else
        spdlog::info("lease expired rev={} lease={} holder={}", rev_of(id), lease_id,
                     quote_value(holder));
      break;
    }
    case v1::Envelope::kOperationStarted:
      operation_started(rev_of(e.operation_started().id()), e.operation_started(), e);
      break;
    case v1::Envelope::kOperationFinished: {
      const auto& p = e.operation_finished();
      const char* what = nullptr;
      std::string details = operation_text(before, p.operation_id(), &what);
      spdlog::info("{} finished rev={} operation={}{}", what, rev_of(p.id()), p.operation_id(),
                   details);
      break;
    }
    case v1::Envelope::kOperationFailed: {
      const auto& p = e.operation_failed();
      const char* what = nullptr;
      std::string details = operation_text(before, p.operation_id(), &what);
      spdlog::warn("{} failed rev={} operation={}{} error={}", what, rev_of(p.id()),
                   p.operation_id(), details, quote_value(p.message()));
      break;
    }
    case v1::Envelope::kOperationCancelled: {
      const auto& p = e.operation_cancelled();
      const char* what = nullptr;
      std::string details = operation_text(before, p.operation_id(), &what);
      std::string reason = p.message().empty() ? "client" : quote_value(p.message());
      spdlog::info("{} cancelled rev={} operation={}{} reason={}{}", what, rev_of(p.id()),
                   p.operation_id(), details, reason, requester(e));
      break;
    }
    case v1::Envelope::kAvailabilityObserved: {
      const auto& p = e.availability_observed();
      const auto* r = record_of(p.id());
      if (p.availability() == v1::DEGRADED)
        spdlog::warn("revision degraded rev={} reason={}", rev_of(p.id()), quote_value(p.reason()));
      else if (p.availability() == v1::READY && r && r->availability == v1::DEGRADED)
        spdlog::info("revision ready again rev={} reason={}", rev_of(p.id()), quote_value(p.reason()));
      break;
    }
    default:
      break;  // grants, renewals, releases, progress, residency: no line
  }
}

}  // namespace weightd::actors::change_log
