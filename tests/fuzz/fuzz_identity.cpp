// Identities arrive as text (the CLI, page tokens) and as fields: parsing
// never throws, and what parses formats back to the same text; decimal
// numbers never reach std::stoull.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/page_token.hpp"
#include "events/identity.hpp"

using namespace weightd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);

  if (auto n = events::parse_decimal(text); n && events::parse_decimal(std::to_string(*n)) != n)
    __builtin_trap();

  std::string part = text;
  if (events::check_identity_part("tenant", part, "default").ok() && part.empty())
    __builtin_trap();

  auto id = events::parse_canonical_text(text);
  if (id.ok() && id->generation > 0) {
    auto again = events::parse_canonical_text(events::canonical_text(*id));
    if (!again.ok() || !(*again == *id)) __builtin_trap();
    (void)events::manifest_key(*id);
    (void)events::payload_group_id(*id);
    (void)events::revision_stream(*id);
  }

  // Page tokens: any text is a key or INVALID_ARGUMENT; a token handed out
  // names the key it was made from.
  events::revision_key base{"default", "default", "", "", 0};
  auto parsed = actors::parse_page_token(text, base);
  if (!parsed.ok() && parsed.error().code() != errc::invalid_argument) __builtin_trap();
  if (parsed.ok()) {
    auto round = actors::parse_page_token(actors::page_token(*parsed), base);
    if (!round.ok() || !(*round == *parsed)) __builtin_trap();
  }
  events::revision_key key{"default", "default", text, text, size};
  auto token = actors::parse_page_token(actors::page_token(key), base);
  if (!token.ok() || !(*token == key)) __builtin_trap();
  return 0;
}
