#!/usr/bin/env bash
# One command for a new user: install, build, and run the main job (a plan for the built-in
# default model and cluster). Extra arguments go to `parallax plan`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
./build/release/cli/parallax plan --explain "$@"
