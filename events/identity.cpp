#include "events/identity.hpp"

#include <limits>

#include <algorithm>

#include "events/digest.hpp"

namespace weightd::events {

status check_identity_part(const std::string& field, std::string& value, const char* fallback) {
  if (value.empty() && fallback) value = fallback;
  if (value.empty()) return {errc::invalid_argument, field + " is empty"};
  if (value.size() > 1024)
    return {errc::invalid_argument,
            field + " is " + std::to_string(value.size()) + " bytes; the limit is 1024"};
  for (unsigned char c : value)
    if (c < 0x20 || c == 0x7f)
      return {errc::invalid_argument, field + " contains a control character"};
  return {};
}


revision_key revision_key::from_proto(const v1::RevisionId& id) {
  return {id.tenant(), id.ns(), id.resource(), id.revision(), id.weight_generation()};
}

v1::RevisionId revision_key::to_proto() const {
  v1::RevisionId id;
  id.set_tenant(tenant);
  id.set_ns(ns);
  id.set_resource(resource);
  id.set_revision(revision);
  id.set_weight_generation(generation);
  return id;
}

result<revision_key> checked_revision_key(const v1::RevisionId& id, const std::string& field) {
  auto key = revision_key::from_proto(id);
  if (auto st = check_identity_part(field + ".tenant", key.tenant, "default"); !st.ok()) return st;
  if (auto st = check_identity_part(field + ".ns", key.ns, "default"); !st.ok()) return st;
  if (auto st = check_identity_part(field + ".resource", key.resource, nullptr); !st.ok()) return st;
  if (auto st = check_identity_part(field + ".revision", key.revision, nullptr); !st.ok()) return st;
  if (key.generation == 0)
    return status{errc::invalid_argument, field + ".weight_generation must be at least 1"};
  return key;
}

std::string canonical_text(const revision_key& id) {
  std::string out = id.tenant == "default" ? "" : id.tenant + ":";
  out += id.ns + "/" + id.resource + "@" + id.revision;
  if (id.generation) out += "#" + std::to_string(id.generation);
  return out;
}

result<revision_key> parse_canonical_text(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return status{errc::invalid_argument,
                  "'" + text + "' is not a revision id (" + why +
                      "); write [tenant:]ns/resource@revision[#generation], e.g. "
                      "default/llama-3-8b@main#1"};
  };
  revision_key key;
  std::string rest = text;
  auto slash = rest.find('/');
  if (slash == std::string::npos) return bad("no '/'");
  auto colon = rest.find(':');
  if (colon != std::string::npos && colon < slash) {
    key.tenant = rest.substr(0, colon);
    rest = rest.substr(colon + 1);
    slash = rest.find('/');
  }
  key.ns = rest.substr(0, slash);
  rest = rest.substr(slash + 1);
  auto at = rest.rfind('@');
  if (at == std::string::npos) return bad("no '@'");
  key.resource = rest.substr(0, at);
  rest = rest.substr(at + 1);
  auto hash = rest.rfind('#');
  if (hash != std::string::npos) {
    auto generation = parse_decimal(rest.substr(hash + 1));
    if (!generation) return bad("the generation after '#' is not a number");
    key.generation = *generation;
    if (key.generation == 0) return bad("generation 0");
    rest = rest.substr(0, hash);
  }
  key.revision = rest;
  for (auto* part : {&key.tenant, &key.ns, &key.resource, &key.revision})
    if (part->empty()) return bad("an empty part");
  return key;
}

std::optional<uint64_t> parse_decimal(std::string_view digits) {
  if (digits.empty() || digits.size() > 20) return std::nullopt;
  uint64_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    auto d = static_cast<uint64_t>(c - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - d) / 10) return std::nullopt;  // overflow
    value = value * 10 + d;
  }
  return value;
}

std::string revision_stream(const revision_key& id) { return "revision|" + canonical_text(id); }

std::string object_stream(const std::string& tenant, const std::string& key) {
  return "object|" + tenant + "/" + key;
}

std::string length_prefixed(const std::string& x) {
  return std::to_string(x.size()) + ":" + x + "\n";
}

std::string percent_encode(const std::string& x) {
  static const char* digits = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : x) {
    bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '_' || c == '.' || c == '~';
    if (plain) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += digits[c >> 4];
      out += digits[c & 0xf];
    }
  }
  return out;
}

std::string payload_group_id(const revision_key& id) {
  return "weight:" + sha256_hex(length_prefixed(id.tenant) + length_prefixed(id.ns) +
                                length_prefixed(id.resource) + length_prefixed(id.revision) +
                                length_prefixed(std::to_string(id.generation)));
}

std::string manifest_key(const revision_key& id) {
  return "weights/" + percent_encode(id.ns) + "/" + percent_encode(id.resource) + "/" +
         percent_encode(id.revision) + "/" + std::to_string(id.generation) + "/manifest";
}

std::string payload_keys_sha256(std::vector<std::string> keys) {
  std::sort(keys.begin(), keys.end());
  std::string all;
  for (const auto& k : keys) all += length_prefixed(k);
  return sha256_hex(all);
}

}  // namespace weightd::events
