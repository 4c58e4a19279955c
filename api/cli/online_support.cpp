#include "api/cli/online_support.hpp"

#include <google/protobuf/util/json_util.h>
#include <spdlog/fmt/fmt.h>
#include <unistd.h>

#include "api/cli/exit_codes.hpp"
#include "api/cli/cli_words.hpp"
#include "api/cli/format.hpp"
#include "api/common/json_output.hpp"

namespace weightd::api {

namespace ev1 = events::v1;

namespace {
std::string g_daemon_address = "127.0.0.1:7070";

// api/common/grpc_status.cpp's words for a transport failure without a
// weightd error code (it maps them to BUSY, which is "a lease blocks it" to a
// script); recognised here until the client gives them a class of their own.
constexpr const char* kUnreachablePrefix = "weightd is unreachable or too slow (";
}  // namespace

void name_daemon_address(const std::string& address) { g_daemon_address = address; }

bool is_daemon_unreachable(const status& st) {
  return st.code() == errc::busy && st.message().rfind(kUnreachablePrefix, 0) == 0;
}

int fail(std::ostream& err, const status& st, const std::string& next) {
  if (is_daemon_unreachable(st)) {
    auto detail = st.message().substr(std::string{kUnreachablePrefix}.size());
    detail = detail.substr(0, detail.find("); is the daemon running"));
    err << "weightctl: daemon unreachable at " << g_daemon_address << " (" << detail
        << "); is weightd running there? Point weightctl at it with --address or WEIGHTD_ADDRESS\n";
    return kExitDaemonUnreachable;
  }
  err << "weightctl: " << code_name(st.code()) << ": " << in_cli_words(st.message())
      << (next.empty() ? "" : "; " + next) << "\n";
  return exit_code(st.code());
}

std::string to_json(const google::protobuf::Message& m, bool pretty) {
  auto j = message_json(m);
  return pretty ? j.dump(2) : json_line(j);
}

namespace {
std::string& id_tenant() {
  static std::string tenant = "default";
  return tenant;
}
}  // namespace

void set_id_tenant(const std::string& tenant) { id_tenant() = tenant.empty() ? "default" : tenant; }

result<events::revision_key> parse_id(const std::string& text) {
  auto id = events::parse_canonical_text(text);
  if (!id) return id;
  auto colon = text.find(':'), slash = text.find('/');
  if (colon == std::string::npos || colon > slash) id->tenant = id_tenant();
  return id;
}

result<events::revision_key> resolve(client& c, const std::string& text, bool ready_only) {
  auto id = parse_id(text);
  if (!id) return id.error();
  if (id->generation) return id;
  v1::ListRevisionsRequest q;
  q.set_tenant(id->tenant);
  q.set_ns(id->ns);
  q.set_resource(id->resource);
  if (!ready_only)
    for (auto s : {ev1::IMPORTING, ev1::READY, ev1::DEGRADED, ev1::DELETING, ev1::DELETED})
      q.add_states(s);
  q.set_limit(1000);
  auto page = c.list_revisions(q);
  if (!page) return page.error();
  for (const auto& v : page->revisions())
    if (v.id().revision() == id->revision)
      id->generation = std::max(id->generation, v.id().weight_generation());
  return id;
}

result<current_revision> read_revision(client& c, const std::string& text, bool ready_only) {
  auto id = resolve(c, text, ready_only);
  if (!id) return id.error();
  if (!id->generation)  // not a generation 0 the daemon would call an invalid argument
    return status{errc::not_found, std::string{ready_only ? "no READY revision " : "no revision "} +
                                       events::canonical_text(*id)};
  v1::GetRevisionRequest get;
  *get.mutable_id() = id->to_proto();
  get.set_include_hidden(!ready_only);
  auto view = c.get_revision(get);
  if (!view) return view.error();
  return current_revision{*id, *view};
}

int parse_enum_name(const std::string& text, const std::string& prefix,
                    const google::protobuf::EnumDescriptor* d) {
  std::string upper;
  for (char ch : text) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  const auto* v = d->FindValueByName(prefix + upper);
  return v ? v->number() : -1;
}

result<events::v1::Residency> parse_residency(const std::string& text, const std::string& flag) {
  int r = parse_enum_name(text, "RESIDENCY_", events::v1::Residency_descriptor());
  if (r != events::v1::RESIDENCY_HOT && r != events::v1::RESIDENCY_COLD &&
      r != events::v1::RESIDENCY_MIXED)
    return status{errc::invalid_argument, flag + " must be HOT, COLD or MIXED, not '" + text + "'"};
  return static_cast<events::v1::Residency>(r);
}

}  // namespace weightd::api
