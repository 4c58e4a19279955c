#include "api/cli/import_support.hpp"

#include <spdlog/fmt/fmt.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "api/cli/format.hpp"
#include "api/cli/online_support.hpp"
#include "events/digest.hpp"
#include "persistence/tier_store.hpp"

namespace weightd::api {

namespace ev1 = events::v1;
namespace fs = std::filesystem;

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

}  // namespace weightd::api
