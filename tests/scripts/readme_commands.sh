#!/usr/bin/env bash
# Runs every command of the README's "Commands" block as written, one at a time, in a scratch
# folder that holds the repository's examples/ and validation/ (what the commands read), with the
# built binary on PATH. A command must exit 0; `calibrate --check` may also exit 1, its answer
# when the machine has drifted beyond the tolerance.
# Usage: readme_commands.sh SOURCE_DIR BINARY_DIR
set -uo pipefail
src=$1
bin=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ln -s "$src/examples" "$work/examples"
ln -s "$src/validation" "$work/validation"
# The fenced block after "## Commands", continuation lines joined.
awk '/^## Commands/{f=1} f && /^```sh/{g=1; next} g && /^```/{exit} g' "$src/README.md" |
  sed -e ':a' -e '/\\$/N; s/\\\n//; ta' > "$work/commands.txt"
[ -s "$work/commands.txt" ] || { echo "no commands found in $src/README.md"; exit 1; }
export PATH="$bin:$PATH"
cd "$work" || exit 1
passed=0
failed=0
while IFS= read -r cmd; do
  [ -n "$cmd" ] || continue
  start=$(date +%s)
  bash -c "$cmd" > out.txt 2>&1 < /dev/null
  rc=$?
  ok=$([ "$rc" -eq 0 ] || { [ "$rc" -eq 1 ] && [[ "$cmd" == *"--check"* ]]; } && echo 1 || echo 0)
  if [ "$ok" = 1 ]; then
    passed=$((passed + 1))
    echo "ok   ($(( $(date +%s) - start )) s, exit $rc): $cmd"
  else
    failed=$((failed + 1))
    echo "FAIL (exit $rc): $cmd"
    tail -n 20 out.txt
  fi
  # What the reader is shown of the last lines, for the record.
  tail -n 3 out.txt | sed 's/^/     | /'
done < "$work/commands.txt"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
