#!/usr/bin/env python3
"""Runs the malformed-input corpus (cases.jsonl, built by make_corpus.py) against a parallax
binary and tabulates the verdicts by input kind.

Verdicts:
  located   a non-zero exit whose "error:" message names the case's file, pointer or flag
  warned    exit 0 with a "warning:" that names it (cases that expect a warning)
  unlocated an error that does not say where
  accepted  exit 0 without an error or a warning: the input was silently accepted
  crash     killed by a signal, a sanitizer report, an uncaught exception, or an exit code
            other than 1-3
  slow      still running after --timeout seconds (work that should have been refused)

Exits 1 if any case is crash, slow, accepted or unlocated.

Usage: python3 tests/malformed/run_corpus.py --parallax build/release/cli/parallax
           [--timeout 20] [--jobs 2] [--only SUBSTRING] [--verbose]
"""
import argparse
import collections
import concurrent.futures
import json
import pathlib
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BAD = ("crash", "slow", "accepted", "unlocated")
CRASH_MARKS = ("terminate called", "AddressSanitizer", "runtime error:", "Segmentation fault",
               "LeakSanitizer", "core dumped")


def verdict(case, rc, err):
    if rc is None:
        return "slow"
    if rc < 0 or rc > 3 or any(m in err for m in CRASH_MARKS):
        return "crash"
    wants = case["where"] if isinstance(case["where"], list) else [case["where"]]
    names = lambda line: all(w in line for w in wants)
    if rc == 0:
        warned = any(line.startswith("warning:") and names(line) for line in err.splitlines())
        return "warned" if warned and case["expect"] == "warn" else "accepted"
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    return "located" if any(names(line) for line in errors) else "unlocated"


def run(case, binary, timeout):
    start = time.monotonic()
    try:
        p = subprocess.run([binary] + case["args"], cwd=ROOT, capture_output=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        rc, err = p.returncode, p.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        rc, err = None, (e.stderr or b"").decode("utf-8", "replace")
    return case, rc, err, time.monotonic() - start


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parallax", required=True)
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    binary = str(pathlib.Path(a.parallax).resolve())
    cases = [json.loads(line) for line in open(HERE / "cases.jsonl")]
    cases = [c for c in cases if a.only in c["id"]]
    table = collections.defaultdict(collections.Counter)
    bad = []
    longest = (0.0, "")
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        for case, rc, err, secs in pool.map(lambda c: run(c, binary, a.timeout), cases):
            v = verdict(case, rc, err)
            table[case["kind"]][v] += 1
            longest = max(longest, (secs, case["id"]))
            first = next((l for l in err.splitlines() if l.startswith(("error:", "warning:"))),
                         err.strip().splitlines()[-1] if err.strip() else "")
            if v in BAD:
                bad.append((case["id"], v, rc, first[:200]))
            elif a.verbose:
                print(f"{v:9} {case['id']}: {first[:160]}")
    cols = ["located", "warned", "unlocated", "accepted", "crash", "slow"]
    print(f"{'input':20}{'cases':>7}" + "".join(f"{c:>11}" for c in cols))
    total = collections.Counter()
    for kind in sorted(table):
        n = sum(table[kind].values())
        total.update(table[kind])
        print(f"{kind:20}{n:>7}" + "".join(f"{table[kind][c]:>11}" for c in cols))
    print(f"{'all':20}{sum(total.values()):>7}" + "".join(f"{total[c]:>11}" for c in cols))
    print(f"slowest case: {longest[1]} ({longest[0]:.1f} s)")
    for cid, v, rc, first in bad:
        print(f"  {v:9} {cid} (exit {rc}): {first}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
