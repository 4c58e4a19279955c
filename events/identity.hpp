// Revision identity (SPEC §1): the five-part id, its canonical text form and
// the names derived from it. These strings are part of the contract: clients
// compute them too, so they never change.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "events/events.pb.h"
#include "events/status.hpp"

namespace weightd::events {

/// A revision's identity; the first four parts are its lineage.
struct revision_key {
  std::string tenant = "default";
  std::string ns = "default";
  std::string resource;
  std::string revision;
  uint64_t generation = 0;

  auto tie() const { return std::tie(tenant, ns, resource, revision, generation); }
  friend bool operator<(const revision_key& a, const revision_key& b) { return a.tie() < b.tie(); }
  friend bool operator==(const revision_key& a, const revision_key& b) { return a.tie() == b.tie(); }
  friend bool operator!=(const revision_key& a, const revision_key& b) { return !(a == b); }

  static revision_key from_proto(const v1::RevisionId& id);
  v1::RevisionId to_proto() const;
  bool same_lineage(const revision_key& o) const {
    return tenant == o.tenant && ns == o.ns && resource == o.resource && revision == o.revision;
  }
};

/// One identity part (tenant, ns, resource, revision): 1..1024 bytes without
/// control characters; an empty value becomes `fallback` when one is given.
/// Errors name `field`.
status check_identity_part(const std::string& field, std::string& value,
                           const char* fallback = nullptr);

/// Validates and defaults an id from a request: tenant and ns default to
/// "default"; every part 1..1024 bytes without control characters;
/// generation >= 1. Errors name the field (prefixed with `field`).
result<revision_key> checked_revision_key(const v1::RevisionId& id, const std::string& field = "id");

/// "[tenant:]ns/resource@revision#generation" (tenant omitted when "default").
std::string canonical_text(const revision_key& id);

/// A decimal uint64 of 1..20 digits without sign or spaces; nullopt for
/// anything else, overflow included (client input never reaches std::stoull).
std::optional<uint64_t> parse_decimal(std::string_view digits);

/// Parses the canonical text; `#generation` may be omitted (generation 0 =
/// "the highest live one", resolved by the caller).
result<revision_key> parse_canonical_text(const std::string& text);

/// The journal stream of a revision: "revision|<canonical text>".
std::string revision_stream(const revision_key& id);
/// The journal stream of an object: "object|<tenant>/<key>".
std::string object_stream(const std::string& tenant, const std::string& key);
/// The journal stream of everything else (writer_started).
inline constexpr const char* kSystemStream = "system";

/// "weight:" + hex(sha256(LP(tenant) LP(ns) LP(resource) LP(revision) LP(gen))).
std::string payload_group_id(const revision_key& id);

/// weights/<enc(ns)>/<enc(resource)>/<enc(revision)>/<generation>/manifest.
std::string manifest_key(const revision_key& id);

/// hex(sha256(concatenation of LP(key) over the keys sorted bytewise)).
std::string payload_keys_sha256(std::vector<std::string> keys);

/// LP(x) = decimal(len(x)) ":" x "\n".
std::string length_prefixed(const std::string& x);

/// Percent-encoding of every byte outside [A-Za-z0-9-_.~], uppercase hex.
std::string percent_encode(const std::string& x);

}  // namespace weightd::events
