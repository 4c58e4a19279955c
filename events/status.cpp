#include "events/status.hpp"

namespace weightd {

const char* code_name(errc code) {
  switch (code) {
    case errc::ok: return "OK";
    case errc::invalid_argument: return "INVALID_ARGUMENT";
    case errc::not_found: return "NOT_FOUND";
    case errc::conflict: return "CONFLICT";
    case errc::stale_generation: return "STALE_GENERATION";
    case errc::not_ready: return "NOT_READY";
    case errc::busy: return "BUSY";
    case errc::lease_expired: return "LEASE_EXPIRED";
    case errc::policy_unsatisfiable: return "POLICY_UNSATISFIABLE";
    case errc::generation_exhausted: return "GENERATION_EXHAUSTED";
    case errc::durability_failed: return "DURABILITY_FAILED";
    case errc::managed_object: return "MANAGED_OBJECT";
    case errc::object_has_lease: return "OBJECT_HAS_LEASE";
    case errc::object_already_exists: return "OBJECT_ALREADY_EXISTS";
    case errc::no_available_space: return "NO_AVAILABLE_SPACE";
    case errc::unauthenticated: return "UNAUTHENTICATED";
    case errc::permission_denied: return "PERMISSION_DENIED";
    case errc::data_loss: return "DATA_LOSS";
    case errc::internal: return "INTERNAL";
    case errc::resource_exhausted: return "RESOURCE_EXHAUSTED";
    case errc::unimplemented: return "UNIMPLEMENTED";
    case errc::not_leader: return "NOT_LEADER";
  }
  return "UNKNOWN";
}

std::string status::to_string() const {
  if (ok()) return "OK";
  return std::string{code_name(code_)} + ": " + message_;
}

}  // namespace weightd
