#!/usr/bin/env bash
# One command for a new user: install, build, and run the main job on built-in defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
./build/release/cli/parallax simulate "$@"
