// Checks of client input: each names the offending field. check_command()
// is the one boundary every command passes, once, before anything acts on
// it — from gRPC and from a host that embeds the actors alike.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "events/identity.hpp"  // check_identity_part
#include "events/status.hpp"

namespace weightd::actors {

inline constexpr size_t kMaxKeyBytes = 4096;
inline constexpr size_t kMaxBatchKeys = 10'000;  // keys of one BatchRemove

/// Tenants and the other identity parts follow one rule (events/identity.hpp).
using events::check_identity_part;

/// An object key: 1..4096 bytes (any bytes).
status check_key(const char* field, const std::string& key);

/// A client's request id: empty, or 1..128 printable ASCII characters (it is
/// logged and kept in every event the request causes).
inline constexpr size_t kMaxRequestIdBytes = 128;
status check_request_id(const std::string& request_id);

/// Lowercase hex of exactly `digits` characters.
status check_hex(const char* field, const std::string& value, size_t digits);

/// A lease's ttl_ms: 1..86 400 000 (24 h, SPEC §8).
inline constexpr uint64_t kMaxLeaseTtlMs = 86'400'000;
status check_ttl(uint64_t ttl_ms);

namespace detail {
template <class T, class = void>
struct has_request_id : std::false_type {};
template <class T>
struct has_request_id<T, std::void_t<decltype(std::declval<T&>().request_id)>> : std::true_type {};
template <class T, class = void>
struct has_ttl : std::false_type {};
template <class T>
struct has_ttl<T, std::void_t<decltype(std::declval<T&>().ttl_ms)>> : std::true_type {};
}  // namespace detail

/// The one validation boundary: the registry calls it on every command
/// before it routes it (INVALID_ARGUMENT naming the field, nothing changed).
/// One check per field, for every command that has the field: request_id
/// (check_request_id), ttl_ms (check_ttl). The revision's identity is
/// checked by the same routing (events::checked_revision_key), object keys
/// and tenants where the object store takes them (check_key), and what only
/// the record can tell by the decide functions.
template <class Command>
status check_command(const Command& cmd) {
  if constexpr (detail::has_request_id<Command>::value)
    if (auto st = check_request_id(cmd.request_id); !st.ok()) return st;
  if constexpr (detail::has_ttl<Command>::value)
    if (auto st = check_ttl(cmd.ttl_ms); !st.ok()) return st;
  return {};
}

}  // namespace weightd::actors
