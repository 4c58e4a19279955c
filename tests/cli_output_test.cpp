// weightctl's output contract (SPEC §10): one JSON document per command, text for people, exit codes, environment.
#include <doctest/doctest.h>
