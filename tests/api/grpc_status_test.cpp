// SPEC §5: every weightd code has its one gRPC status, and the domain code
// travels in the trailing metadata.
#include <doctest/doctest.h>

#include "api/common/grpc_status.hpp"

using namespace weightd;
using G = grpc::StatusCode;

TEST_CASE("errors: each SPEC §5 code maps to its gRPC status") {
  const std::vector<std::pair<errc, G>> table = {
      {errc::invalid_argument, G::INVALID_ARGUMENT}, {errc::not_found, G::NOT_FOUND},
      {errc::conflict, G::ALREADY_EXISTS},           {errc::stale_generation, G::ABORTED},
      {errc::not_ready, G::FAILED_PRECONDITION},     {errc::busy, G::UNAVAILABLE},
      {errc::lease_expired, G::FAILED_PRECONDITION}, {errc::policy_unsatisfiable, G::FAILED_PRECONDITION},
      {errc::generation_exhausted, G::RESOURCE_EXHAUSTED},
      {errc::durability_failed, G::UNAVAILABLE},     {errc::managed_object, G::FAILED_PRECONDITION},
      {errc::object_has_lease, G::FAILED_PRECONDITION},
      {errc::object_already_exists, G::ALREADY_EXISTS},
      {errc::no_available_space, G::RESOURCE_EXHAUSTED},
      {errc::unauthenticated, G::UNAUTHENTICATED},   {errc::permission_denied, G::PERMISSION_DENIED},
      {errc::data_loss, G::DATA_LOSS},               {errc::internal, G::INTERNAL},
      {errc::resource_exhausted, G::RESOURCE_EXHAUSTED}, {errc::unimplemented, G::UNIMPLEMENTED},
      {errc::not_leader, G::UNAVAILABLE}};
  for (const auto& row : table) {  // (no structured binding: clang cannot capture one in CAPTURE)
    CAPTURE(code_name(row.first));
    CHECK(api::grpc_code(row.first) == row.second);
  }
  CHECK(table.size() == static_cast<size_t>(kLastErrc));  // every code is in the table
}
