#!/usr/bin/env bash
# Install, build, and run the whole test suite (CTest), then the validation set as a smoke run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
ctest --preset release -j "$(nproc)"
