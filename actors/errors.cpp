#include "actors/errors.hpp"

namespace weightd::actors {

namespace {
constexpr caf::atom_value kCategory = caf::atom("weightd");

std::string context_message(const caf::message& context) {
  if (context.match_elements<std::string>()) return context.get_as<std::string>(0);
  return context.empty() ? std::string{} : caf::to_string(context);
}
}  // namespace

caf::error to_error(const status& st) {
  if (st.ok()) return {};
  return caf::make_error(st.code(), st.message());
}

status to_status(const caf::error& err) {
  if (!err) return {};
  if (err.category() == kCategory)
    return {static_cast<errc>(err.code()), context_message(err.context())};
  if (err == caf::sec::request_timeout)
    return {errc::busy, "an internal request timed out (the daemon is overloaded or a "
                        "component is stuck); retry later"};
  if (err == caf::sec::request_receiver_down)
    return {errc::internal, "an internal component stopped; check the daemon log"};
  return {errc::internal, "internal error: " + caf::to_string(err)};
}

void add_error_category(caf::actor_system_config& cfg) {
  cfg.add_error_category(
      kCategory, [](uint8_t code, caf::atom_value, const caf::message& context) {
        return std::string{code_name(static_cast<errc>(code))} + ": " +
               context_message(context);
      });
}

}  // namespace weightd::actors
