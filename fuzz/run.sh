#!/usr/bin/env bash
# Builds the fuzz targets (the asan preset: clang, ASan + UBSan, libFuzzer) and runs each for
# SECONDS, after replaying its saved findings (fuzz/findings/<target>/) one by one. Prints each
# target's executions, the total, and every crash, timeout, leak or out-of-memory input found
# (saved under build/asan/fuzz-out/<target>/); exits 1 when there is any.
#
#   bash fuzz/run.sh SECONDS [TARGET...]      e.g. bash fuzz/run.sh 20; bash fuzz/run.sh 600 workload
#
# New corpus entries go to build/asan/fuzz-corpus/<target>/ (kept between runs; the seeds in
# fuzz/corpus/ are read, never written). A crashing input stops nothing: each target fuzzes in
# libFuzzer's fork mode (-ignore_crashes), so one run reports every crash it reaches.
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:?usage: fuzz/run.sh SECONDS [TARGET...]}
shift
all=(model_json profile_json scenario_json hf_config measured_run workload calibration_json data
     cli_inputs plan_file cli_flags)
targets=("${@:-${all[@]}}")
[ $# -eq 0 ] && targets=("${all[@]}")

if [ -z "${PARALLAX_FUZZ_NO_BUILD:-}" ]; then
  cmake --preset asan >/dev/null || exit 2
  cmake --build --preset asan -j "$(nproc)" --target fuzz_targets >/dev/null || exit 2
fi
build=build/asan
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# Inputs longer than this are cut when fuzzing (large inputs are slow, and rarely needed);
# the seeds above it (the 100000-level nesting ones) are replayed whole before fuzzing.
max_len() {
  case $1 in
    cli_flags) echo 4096 ;;
    *) echo 16384 ;;
  esac
}

total=0
failed=0
summary=""
for t in "${targets[@]}"; do
  bin=$build/fuzz/${t}_fuzz
  out=$build/fuzz-out/$t
  work=$build/fuzz-corpus/$t
  rm -rf "$out"
  mkdir -p "$out" "$work"
  # Saved findings first: each must now pass (a regression test), or is still open.
  open=0
  for f in fuzz/findings/"$t"/*; do
    [ -f "$f" ] || continue
    if ! "$bin" -rss_limit_mb=2048 -timeout=30 "$f" >"$out/replay.log" 2>&1; then
      echo "fuzz: $t: finding still crashes: $f"
      open=$((open + 1))
    fi
  done
  # Seeds too long to fuzz whole: each once, whole.
  while IFS= read -r f; do
    if ! "$bin" -rss_limit_mb=2048 -timeout=30 "$f" >"$out/replay.log" 2>&1; then
      cp "$f" "$out/crash-seed-$(basename "$f")"
    fi
  done < <(find fuzz/corpus/"$t" -type f -size +"$(max_len "$t")"c | sort)
  "$bin" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -max_total_time="$seconds" -max_len="$(max_len "$t")" -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="$out/" -print_final_stats=1 "$work" fuzz/corpus/"$t" >"$out/fuzz.log" 2>&1
  # Fork mode's status lines: "#<execs>: cov: ... exec/s: ... oom/timeout/crash: a/b/c time: ..."
  execs=$(grep -oE '^#[0-9]+:' "$out/fuzz.log" | tail -1 | tr -d '#:')
  execs=${execs:-0}
  found=$(find "$out" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o \
          -name 'timeout-*' -o -name 'oom-*' \) | sort)
  n=$(printf '%s' "$found" | grep -c . || true)
  total=$((total + execs))
  line=$(printf '%-18s %12s execs  %3d new findings  %d open saved findings' "$t" "$execs" "$n" "$open")
  echo "fuzz: $line"
  summary+="$line"$'\n'
  if [ "$n" -gt 0 ] || [ "$open" -gt 0 ]; then
    failed=1
    for f in $found; do
      echo "  $f"
      # Replayed alone, for its own summary line (fork mode's log interleaves the jobs').
      "$bin" -rss_limit_mb=2048 -timeout=30 "$f" 2>&1 |
        grep -m1 -E 'SUMMARY: |ERROR: libFuzzer|terminate called|what\(\)' | sed 's/^/    /' || true
    done
  fi
done
echo
echo "fuzz: ${seconds}s per target"
printf '%s' "$summary"
echo "fuzz: total $total executions"
exit $failed
