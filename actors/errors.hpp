// status <-> caf::error. Domain errors cross actor edges as caf::error in the
// "weightd" category, carrying the message as context; CAF's own errors
// (timeouts, dead actors) become weightd codes with a message saying what to do.
#pragma once

#include "actors/actors.hpp"
#include "events/status.hpp"

namespace weightd::actors {

/// The caf::error for a non-ok status.
caf::error to_error(const status& st);

/// The status for any caf::error (ok for a default-constructed one).
status to_status(const caf::error& err);

/// Registers the "weightd" error category so CAF renders our errors readably.
void add_error_category(caf::actor_system_config& cfg);

}  // namespace weightd::actors
