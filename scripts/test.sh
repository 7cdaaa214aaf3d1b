#!/usr/bin/env bash
# Install, build, and run the whole test suite (CTest) on the release build; then the unit and CLI
# tests again under AddressSanitizer + UndefinedBehaviorSanitizer (the asan preset, clang), and
# every fuzz target for PARALLAX_FUZZ_SECONDS each (default 10, which keeps the whole run under
# 25 minutes on a 2-core machine; 0 skips fuzzing). Each stage prints how long it took; a
# sanitizer report or a fuzzing crash fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

stage() {
  local name=$1 start=$SECONDS
  shift
  "$@"
  echo "test.sh: $name: $((SECONDS - start)) s"
}

stage "setup and release build" bash scripts/setup.sh --sanitizers
stage "release tests" ctest --preset release -j "$(nproc)"
stage "asan build" bash -c 'cmake --preset asan >/dev/null && cmake --build --preset asan -j "$(nproc)"'
stage "asan tests" ctest --preset asan -j "$(nproc)"
fuzz_seconds=${PARALLAX_FUZZ_SECONDS:-10}
if [ "$fuzz_seconds" -gt 0 ]; then
  stage "fuzz" env PARALLAX_FUZZ_NO_BUILD=1 bash fuzz/run.sh "$fuzz_seconds"
fi
echo "test.sh: total: $SECONDS s"
