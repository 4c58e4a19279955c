// What weightd logs: one info line per state change a human cares about, warnings for refusals that mean trouble.
#include <doctest/doctest.h>
