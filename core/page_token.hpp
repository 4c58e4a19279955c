// ListRevisions' page tokens: opaque to clients, parsed without trusting them.
#pragma once

#include <string>

#include "events/identity.hpp"
#include "events/status.hpp"

namespace weightd::actors {

/// The token that resumes a listing after `last`: hex of LP(resource)
/// LP(revision) LP(generation) (events::length_prefixed).
std::string page_token(const events::revision_key& last);

/// The key a token names, in the tenant and namespace of `base`; a token this
/// server did not hand out is INVALID_ARGUMENT. Never throws, whatever the input.
result<events::revision_key> parse_page_token(const std::string& token, events::revision_key base);

}  // namespace weightd::actors
