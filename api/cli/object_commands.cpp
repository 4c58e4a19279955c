#include "api/cli/object_commands.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <iostream>

#include "api/cli/exit_codes.hpp"
#include "api/cli/format.hpp"
#include "api/common/json_output.hpp"
#include "api/cli/online_support.hpp"
#include "api/cli/output_file.hpp"
#include "api/cli/progress.hpp"

namespace weightd::api {

namespace ev1 = events::v1;

namespace {

/// "HOT" -> TIER_HOT etc.: the SPEC's short names of an enum, case-insensitive.
template <class Enum>
result<Enum> parse_short(const std::string& field, const std::string& text,
                         const google::protobuf::EnumDescriptor* d) {
  std::string wanted;
  for (char c : text) wanted += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string names;
  for (int i = 0; i < d->value_count(); ++i) {
    auto name = short_enum_name(d->value(i)->number(), d);
    if (name == "UNSPECIFIED") continue;
    if (name == wanted) return static_cast<Enum>(d->value(i)->number());
    names += (names.empty() ? "" : ", ") + name;
  }
  return status{errc::invalid_argument, field + " must be one of " + names + ", not '" + text + "'"};
}

/// One object's row; the key column is `key_width` wide (the longest key of
/// the table), so that the columns after it line up.
void print_row(const v1::ObjectInfo& i, size_t key_width, std::ostream& out) {
  std::string tiers;
  for (int t : i.replicas()) tiers += (tiers.empty() ? "" : "+") + short_enum_name(t, ev1::Tier_descriptor());
  out << fmt::format("{:<{}} {:>10}  {:<9} {:<8}{}{}\n", i.key(), key_width, format_bytes(i.size()),
                     tiers, short_enum_name(i.data_type(), ev1::DataType_descriptor()),
                     i.hard_pin() ? " pinned" : "",
                     i.managed_by().empty() ? "" : " managed by " + i.managed_by());
}

void print_info(const online_options& o, const v1::ObjectInfo& i, std::ostream& out) {
  if (o.json) out << to_json(i) << "\n";
  else print_row(i, i.key().size(), out);
}

}  // namespace

int obj_put(const online_options& o, const obj_put_args& a, std::ostream& out, std::ostream& err) {
  auto tier = parse_short<ev1::Tier>("--tier", a.tier, ev1::Tier_descriptor());
  if (!tier) return fail(err, tier.error());
  auto type = parse_short<ev1::DataType>("--type", a.type, ev1::DataType_descriptor());
  if (!type) return fail(err, type.error());
  std::error_code ec;
  if (!std::filesystem::is_regular_file(a.file, ec))
    return fail(err, {errc::invalid_argument, "FILE '" + a.file + "' is not a readable file"});
  client c{o.connection};
  v1::PutHeader h;
  h.set_tenant(o.tenant);
  h.set_key(a.key);
  h.set_tier(*tier);
  h.set_data_type(*type);
  h.set_hard_pin(a.pin);
  progress_line bar{std::filesystem::file_size(a.file)};
  auto put = c.put_file(h, a.file, 0, UINT64_MAX, [&](uint64_t d) {
    bar.show(d, a.key);
    return true;
  });
  bar.end();
  if (!put) return fail(err, put.error());
  print_info(o, *put, out);
  return 0;
}

int obj_get(const online_options& o, const std::string& key, const std::string& file,
            std::ostream& out, std::ostream& err) {
  client c{o.connection};
  output_file sink{file};  // SPEC §10: written as the user named it
  if (!sink.ok()) return fail_local(err, sink.error());
  auto got = c.get(o.tenant, key, [&](const std::string& bytes) {
    return sink.write(bytes) ? status{} : status{errc::internal, sink.error()};
  });
  if (!sink.ok()) return fail_local(err, sink.error());
  if (!got) return fail(err, got.error());
  if (!sink.commit()) return fail_local(err, sink.error());
  if (file != "-") print_info(o, *got, out);
  return 0;
}

int obj_rm(const online_options& o, const std::vector<std::string>& keys, bool force,
           std::ostream& out, std::ostream& err) {
  client c{o.connection};
  int rc = 0;
  std::vector<v1::RemoveResponse> removed_all;  // --json: one list of what was removed
  for (const auto& key : keys) {
    v1::RemoveRequest req;
    req.set_tenant(o.tenant);
    req.set_key(key);
    req.set_force(force);
    auto removed = c.remove_object(req);
    if (!removed) {
      rc = fail(err, removed.error());
      continue;
    }
    if (o.json) removed_all.push_back(*removed);
    else out << "removed " << key << "\n";
  }
  // The list of what was removed; when nothing was and an error said why,
  // no document claims an empty success.
  if (o.json && (rc == 0 || !removed_all.empty())) out << json_line(list_of(removed_all)) << "\n";
  return rc;
}

int obj_ls(const online_options& o, const std::string& prefix, std::ostream& out,
           std::ostream& err) {
  client c{o.connection};
  v1::ListObjectsRequest q;
  q.set_tenant(o.tenant);
  q.set_prefix(prefix);
  q.set_limit(1000);
  std::vector<v1::ObjectInfo> objects;
  do {
    auto page = c.list_objects(q);
    if (!page) return fail(err, page.error());
    for (const auto& i : page->objects()) objects.push_back(i);
    q.set_start_after(page->next_start_after());
  } while (!q.start_after().empty());
  if (o.json) {
    out << json_line(list_of(objects)) << "\n";
    return 0;
  }
  if (objects.empty()) {
    out << (prefix.empty() ? std::string{"no objects"} : "no objects under '" + prefix + "'") << "\n";
    return 0;
  }
  size_t key_width = 3;
  for (const auto& i : objects) key_width = std::max(key_width, i.key().size());
  out << fmt::format("{:<{}} {:>10}  {:<9} {:<8} {}\n", "KEY", key_width, "SIZE", "TIERS", "TYPE",
                     "NOTES");
  for (const auto& i : objects) print_row(i, key_width, out);
  return 0;
}

}  // namespace weightd::api
