// Checks of client input shared by the actors: each names the offending field.
#pragma once

#include <string>

#include "events/status.hpp"

namespace weightd::actors {

inline constexpr size_t kMaxKeyBytes = 4096;
inline constexpr size_t kMaxIdentityPartBytes = 1024;

/// A tenant, namespace, resource or revision: 1..1024 bytes, no control
/// characters. `value` may be defaulted ("" -> fallback) when fallback is set.
status check_identity_part(const char* field, std::string& value, const char* fallback = nullptr);

/// An object key: 1..4096 bytes (any bytes).
status check_key(const char* field, const std::string& key);

/// Lowercase hex of exactly `digits` characters.
status check_hex(const char* field, const std::string& value, size_t digits);

}  // namespace weightd::actors
