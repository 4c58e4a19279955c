#!/usr/bin/env bash
# The one entry point for developers and CI on Debian 12.
#
#   scripts/dev.sh daemon [weightd flags]   install deps, build, run weightd
#   scripts/dev.sh test [ctest args]        install deps, build, run every test
#   scripts/dev.sh deps | build             just that step
#   scripts/dev.sh bench                    build and run the benchmarks (installs etcd too)
#   scripts/dev.sh fuzz [seconds]           build the sanitizer tree (clang) and run each
#                                           libFuzzer target for that long (default 600)
#
# `test` runs the whole suite, then the sanitizer step: a clang tree with
# ASan+UBSan (build-san) runs the doctest suite again and every fuzz target for
# 20 s. WEIGHTD_QUICK=1 skips that step locally; CI runs it.
#
# Environment: BUILD_DIR (default ./build), BUILD_TYPE (default Release),
# SANITIZE=1 for an ASan+UBSan gcc build of everything.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
BUILD_TYPE=${BUILD_TYPE:-Release}
JOBS=$(nproc)

# Debian 12 packages only; nothing is downloaded at build or run time.
PACKAGES=(
  build-essential cmake pkg-config
  libcaf-dev libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc
  liblmdb-dev libspdlog-dev doctest-dev libcli11-dev libxxhash-dev libssl-dev
  libcpp-httplib-dev lmdb-utils nlohmann-json3-dev prometheus-cpp-dev libsystemd-dev
  # The Python package (python/) and its tests, run by ctest like the rest.
  python3-grpcio python3-protobuf python3-pytest python3-numpy
  # The security tests make their TLS certificates with openssl.
  openssl
  # The metrics test checks /metrics with promtool.
  prometheus
)
# Only the benchmarks need these: lease_bench compares with etcd 3.4.
BENCH_PACKAGES=(etcd-server)
# The sanitizer tree: Debian's clang and its libFuzzer runtime.
SAN_PACKAGES=(clang libclang-rt-14-dev)
SAN_DIR=${SAN_DIR:-$BUILD_DIR-san}

deps() {  # [extra packages]
  local missing=()
  for p in "${PACKAGES[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}" >&2
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

build() {
  local sanitize=OFF
  [ "${SANITIZE:-0}" = "1" ] && sanitize=ON
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" -DWEIGHTD_SANITIZE="$sanitize" >/dev/null
  cmake --build "$BUILD_DIR" -j "$JOBS"
}

# The sanitizer tree (clang, RelWithDebInfo, -DWEIGHTD_FUZZ=ON): every library
# built with ASan+UBSan and libFuzzer's coverage hooks, the fuzz targets
# (tests/fuzz) and the doctest suite. One build serves both: the suite runs
# under the sanitizers and the fuzzers reuse its libraries.
build_san() {  # seconds each fuzz target runs under ctest
  CC=clang CXX=clang++ cmake -S . -B "$SAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DWEIGHTD_FUZZ=ON -DWEIGHTD_BUILD_BENCH=OFF -DWEIGHTD_FUZZ_SECONDS="$1" >/dev/null
  cmake --build "$SAN_DIR" -j "$JOBS" --target fuzz_targets weightd_core_tests weightd_tests
}

# Any sanitizer finding fails the test (UBSan would otherwise only print).
sanitizer_env() {
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$PWD/scripts/ubsan.supp"
  export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1"
}
[ "${SANITIZE:-0}" = "1" ] && sanitizer_env

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  deps) deps ;;
  build) deps && build ;;
  test)
    if [ "${WEIGHTD_QUICK:-0}" = "1" ]; then deps; else deps "${SAN_PACKAGES[@]}"; fi
    build
    ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" "$@"
    if [ "${WEIGHTD_QUICK:-0}" != "1" ]; then
      build_san 20
      sanitizer_env
      # The kill -9 harness (label crash) ran above; under ASan it only repeats it slower.
      # The Python tests (label python) ran above too: this tree builds no
      # Python package and no daemon for them, only the doctest suite and fuzzers.
      ctest --test-dir "$SAN_DIR" --output-on-failure -j "$JOBS" -LE 'crash|python'
    fi
    ;;
  fuzz)
    deps "${SAN_PACKAGES[@]}" && build_san "${1:-600}"
    sanitizer_env
    ctest --test-dir "$SAN_DIR" --output-on-failure -j "$JOBS" -L fuzz -V |
      grep -E "number_of_executed_units|Test #|Passed|Failed"
    ;;
  daemon)
    deps && build
    exec "$BUILD_DIR/api/weightd" "$@"
    ;;
  bench)
    deps "${BENCH_PACKAGES[@]}" && build
    for b in "$BUILD_DIR"/bench/*_bench; do echo "== $b"; "$b" "$@"; done
    ;;
  *)
    sed -n '2,12p' "$0" >&2
    exit 1
    ;;
esac
