#include "api/common/units.hpp"

#include <algorithm>
#include <iterator>
#include <limits>

namespace weightd::api {

namespace {

using std::chrono::milliseconds;

constexpr uint64_t kMaxU64 = std::numeric_limits<uint64_t>::max();

struct unit {
  std::string_view name;
  uint64_t factor;  // in the base unit: milliseconds or bytes
};

constexpr unit kDurationUnits[] = {{"ms", 1}, {"s", 1'000}, {"m", 60'000}, {"h", 3'600'000}};
constexpr std::string_view kDurationUnitList = "ms, s, m, h";

// Both spellings of the SI kilo are common (kB is SI, KB is what most tools print).
constexpr unit kSizeUnits[] = {
    {"", 1},
    {"B", 1},
    {"kB", 1'000},
    {"KB", 1'000},
    {"MB", 1'000'000},
    {"GB", 1'000'000'000},
    {"TB", 1'000'000'000'000},
    {"KiB", 1ull << 10},
    {"MiB", 1ull << 20},
    {"GiB", 1ull << 30},
    {"TiB", 1ull << 40},
};
constexpr std::string_view kSizeUnitList =
    "B, KiB, MiB, GiB, TiB (powers of 2), kB or KB, MB, GB, TB (powers of 10)";

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

std::string in_quotes(std::string_view s) { return "\"" + std::string{s} + "\""; }

weightd::status invalid(std::string message) {
  return {errc::invalid_argument, std::move(message)};
}

// Overflow-checked value = value × factor + addend.
bool multiply_add(uint64_t& value, uint64_t factor, uint64_t addend = 0) {
  if (factor != 0 && value > kMaxU64 / factor) return false;
  value *= factor;
  if (value > kMaxU64 - addend) return false;
  value += addend;
  return true;
}

// "1.5GiB" → number "1.5", unit "GiB" (a space between them is allowed).
struct number_and_unit {
  std::string_view number, unit;
};
number_and_unit split(std::string_view text) {
  text = trim(text);
  size_t end = std::min(text.find_first_not_of("0123456789."), text.size());
  return {text.substr(0, end), trim(text.substr(end))};
}

const unit* find_unit(std::string_view name, const unit* first, const unit* last) {
  for (const unit* u = first; u != last; ++u)
    if (u->name == name) return u;
  return nullptr;
}

// number × factor, exactly, in integers ("1.5" × 1000 = 1500): no binary
// floating point rounding, and a value that is no whole number of the base
// unit (1.0005s, 1.5B) is refused rather than silently rounded.
// `text` and `base` (the base unit's name) are for the messages.
result<uint64_t> scale(std::string_view number, uint64_t factor, std::string_view text,
                       std::string_view base) {
  size_t dot = number.find('.');
  std::string_view whole = number.substr(0, dot);
  std::string_view fraction = dot == std::string_view::npos ? "" : number.substr(dot + 1);
  if (fraction.find('.') != std::string_view::npos || (whole.empty() && fraction.empty()))
    return invalid(in_quotes(text) + " is not a number");
  while (!fraction.empty() && fraction.back() == '0') fraction.remove_suffix(1);

  // All the digits as one integer, then divided by 10^(digits after the dot).
  uint64_t digits = 0, divisor = 1;
  bool fits = true;
  for (char c : whole) fits = fits && multiply_add(digits, 10, c - '0');
  for (char c : fraction)
    fits = fits && multiply_add(digits, 10, c - '0') && multiply_add(divisor, 10);
  fits = fits && multiply_add(digits, factor);
  if (!fits) return invalid(in_quotes(text) + " is too large");
  if (digits % divisor != 0)
    return invalid(in_quotes(text) + " is not a whole number of " + std::string{base});
  return digits / divisor;
}

}  // namespace

result<std::chrono::milliseconds> parse_duration(std::string_view text) {
  const std::string units = " (units: " + std::string{kDurationUnitList} + ")";
  auto [number, unit_name] = split(text);
  if (number.empty())
    return invalid(in_quotes(text) + " is not a duration: write a number and a unit, e.g. 30s" +
                   units);
  if (unit_name.empty()) {
    // 0 is 0 in every unit; any other bare number is ambiguous.
    if (number.find_first_not_of("0.") == std::string_view::npos) return milliseconds{0};
    std::string n{number};
    return invalid(in_quotes(text) + " has no unit: write " + n + "s or " + n + "ms" + units);
  }
  const unit* u = find_unit(unit_name, std::begin(kDurationUnits), std::end(kDurationUnits));
  if (!u) return invalid(in_quotes(text) + " has an unknown unit " + in_quotes(unit_name) + units);
  auto ms = scale(number, u->factor, text, "milliseconds");
  if (!ms) return ms.error();
  if (*ms > static_cast<uint64_t>(std::numeric_limits<milliseconds::rep>::max()))
    return invalid(in_quotes(text) + " is too large");
  return milliseconds{static_cast<milliseconds::rep>(*ms)};
}

result<uint64_t> parse_size(std::string_view text) {
  const std::string units = " (units: " + std::string{kSizeUnitList} + ")";
  auto [number, unit_name] = split(text);
  if (number.empty())
    return invalid(in_quotes(text) + " is not a size: write bytes, or a number and a unit, e.g. " +
                   "64MiB" + units);
  const unit* u = find_unit(unit_name, std::begin(kSizeUnits), std::end(kSizeUnits));
  if (!u) return invalid(in_quotes(text) + " has an unknown unit " + in_quotes(unit_name) + units);
  return scale(number, u->factor, text, "bytes");
}

std::string format_duration(std::chrono::milliseconds d) {
  if (d.count() == 0) return "0";  // what parse_duration reads without a unit
  // Largest unit first, so 300000ms reads as 5m.
  for (auto it = std::rbegin(kDurationUnits); it != std::rend(kDurationUnits); ++it) {
    auto factor = static_cast<milliseconds::rep>(it->factor);
    if (d.count() % factor == 0)
      return std::to_string(d.count() / factor) + std::string{it->name};
  }
  return std::to_string(d.count()) + "ms";
}

std::string format_size(uint64_t bytes) {
  constexpr unit kBinary[] = {{"TiB", 1ull << 40}, {"GiB", 1ull << 30}, {"MiB", 1ull << 20},
                              {"KiB", 1ull << 10}};
  for (const unit& u : kBinary)
    if (bytes != 0 && bytes % u.factor == 0)
      return std::to_string(bytes / u.factor) + std::string{u.name};
  return std::to_string(bytes);
}

}  // namespace weightd::api
