// /metrics as Prometheus expects it, the gRPC health and reflection services, shutdown.
#include <doctest/doctest.h>
