#!/usr/bin/env bash
# Runs every example: each scenario under examples/ is simulated and must fit (exit 0); each
# model file is simulated on one GPU. Usage: examples.sh SOURCE_DIR PARALLAX_BINARY
set -uo pipefail
src=$1
parallax=$2
passed=0
failed=0
for f in "$src"/examples/*.json; do
  if grep -q '"cluster"' "$f"; then
    cmd=("$parallax" simulate --scenario "$f" --format json)
  else
    cmd=("$parallax" simulate --model "$f" --gpus 1 --tp 1 --gbs 8 --seq 128 --format json)
  fi
  if out=$("${cmd[@]}" 2>&1) && grep -q '"step_time_s"' <<<"$out"; then
    passed=$((passed + 1))
    echo "ok   ${f#"$src"/}"
  else
    failed=$((failed + 1))
    echo "FAIL ${f#"$src"/}: ${cmd[*]}"
    tail -n 20 <<<"$out"
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
