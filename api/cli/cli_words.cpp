#include "api/cli/cli_words.hpp"

#include <chrono>
#include <regex>
#include <utility>

#include "api/cli/format.hpp"
#include "api/common/units.hpp"

namespace weightd::api {

namespace {

/// The daemon's words -> weightctl's. Longer phrases first where one
/// contains another.
const std::pair<const char*, const char*> kHints[] = {
    {"use RemoveRevision", "use `weightctl rm`"},
    {"use AbortImport", "use `weightctl abort`"},
    {"pass drain_timeout_ms", "pass --drain-timeout"},
    {"drain_timeout_ms", "--drain-timeout"},
    {"ttl_ms must be within 1..86400000 (24 h)", "--ttl must be within 1ms..24h"},
    {"re-read the revision and retry", "re-read it with `weightctl show` and retry"},
    {"policy.mixed_hot_ratio", "--ratio"},
    {"policy.preferred_residency", "--preferred"},
    {"policy.migration_mode", "--mode"},
    {"mixed_hot_ratio", "--ratio"},
    {"preferred_residency", "--preferred"},
    {"migration_mode", "--mode"},
    {"acquire one with AcquireLease", "acquire one with `weightctl lease acquire`"},
    {"RemoveRevision", "`weightctl rm`"},
    {"AbortImport", "`weightctl abort`"},
    {"CancelOperation", "`weightctl op cancel`"},
};

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

/// Applies `fn` to each match of `re`, keeping the text between matches.
template <class Fn>
std::string rewrite(const std::string& text, const std::regex& re, Fn fn) {
  std::string out;
  auto last = text.cbegin();
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) {
    out.append(last, (*it)[0].first);
    out += fn(*it);
    last = (*it)[0].second;
  }
  out.append(last, text.cend());
  return out;
}

}  // namespace

std::string in_cli_words(const std::string& message, int64_t now_ms) {
  std::string text = message;
  for (const auto& [from, to] : kHints) text = replace_all(text, from, to);
  // "at 1796284281079 ms": an epoch time (13 digits: 2001..2286).
  static const std::regex epoch_ms{R"(\b(\d{13}) ms\b)"};
  text = rewrite(text, epoch_ms, [&](const std::smatch& m) {
    return format_time(std::stoll(m[1].str()), now_ms);
  });
  // The daemon's ttl range check names milliseconds: "not 90000000" -> "not 25h".
  static const std::regex ttl_ms{R"(--ttl must be within 1ms\.\.24h, not (\d{1,18}))"};
  text = rewrite(text, ttl_ms, [](const std::smatch& m) {
    return "--ttl must be within 1ms..24h, not " +
           format_duration(std::chrono::milliseconds{std::stoll(m[1].str())});
  });
  // "58720271 hot bytes", "134217728 bytes": sizes.
  static const std::regex byte_count{R"(\b(\d+) (hot )?bytes\b)"};
  text = rewrite(text, byte_count, [](const std::smatch& m) {
    return format_bytes(std::stoull(m[1].str())) + (m[2].matched ? " HOT" : "");
  });
  return text;
}

}  // namespace weightd::api
