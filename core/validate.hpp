// Checks of client input shared by the actors: each names the offending field.
#pragma once

#include <string>

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

}  // namespace weightd::actors
