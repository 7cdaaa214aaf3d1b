#!/usr/bin/env bash
# Rewrites validation/residuals.json, the corpus residuals behind every prediction's error bar,
# from the current build's predictions of every record in validation/. Run it after a change to
# the model or the corpus (the test CliValidate.ResidualTableIsCurrent fails until then), then
# rebuild: the table is compiled into the binary.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${PARALLAX:-build/release/cli/parallax}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$bin" validate --residuals-out validation/residuals.json validation/public-training.jsonl \
  validation/training/*/records.jsonl > /dev/null 2> "$log" || { cat "$log" >&2; exit 1; }
echo "wrote validation/residuals.json ($(grep -c 'record skipped' "$log" || true) records skipped;" \
  "parallax validate lists them)"
