#!/usr/bin/env python3
"""Census of the measured-run corpus: reads every */records.jsonl under this directory and prints markdown tables
(records per directory, and breakdowns by source, part, dense/MoE, precision, scale bucket and stack framework).

"readable" = the record is not skipped by `parallax validate` for a reason this script can see without the binary:
a null field the
validator requires (model.vocab, model.ffn_hidden of a dense model, model.moe.top_k, batch.global_batch). Run
`parallax validate FILE` for the authoritative answer.

Usage: python3 census.py            (markdown to stdout)
"""
import collections
import glob
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
UNSUPPORTED_PRECISION = set()  # nvfp4 and mxfp8 are modelled
UNMODELLED_ATTENTION = set()  # FlashAttention-1 is modelled (half FA2's rate)


def skip_reason(r):
    m = r["model"]
    if r.get("precision") in UNSUPPORTED_PRECISION:
        return "precision " + r["precision"]
    if (r.get("stack") or {}).get("attention") in UNMODELLED_ATTENTION:
        return "attention " + r["stack"]["attention"]
    if m.get("vocab") is None:
        return "vocab null"
    if m.get("moe") is None and m.get("ffn_hidden") is None:
        return "ffn_hidden null"
    if m.get("moe") is not None and m["moe"].get("top_k") is None:
        return "moe.top_k null"
    if r["batch"].get("global_batch") is None:
        return "global_batch null"
    return None


def bucket(n):
    if n <= 64:
        return "<=64"
    if n <= 512:
        return "65-512"
    if n <= 4096:
        return "513-4096"
    return ">4096"


def source_key(r):
    s = r["source"]
    for cut in (" results (closed division)", ", Table", ", Sec", ", Throughput", ", FLOPS", ", Training speed", " (", ": "):
        if cut in s and not s.startswith("MLPerf") or (cut == " results (closed division)" and cut in s):
            s = s.split(cut)[0]
            break
    return s


def load():
    recs = []
    for f in sorted(glob.glob(os.path.join(HERE, "*", "records.jsonl"))):
        d = os.path.basename(os.path.dirname(f))
        for line in open(f):
            if line.strip():
                r = json.loads(line)
                r["_dir"] = d
                recs.append(r)
    return recs


def table(title, counter_all, counter_read, order=None):
    keys = order or sorted(counter_all, key=lambda k: (-counter_all[k], str(k)))
    out = [f"**{title}**", "", "| | records | readable |", "|---|---:|---:|"]
    for k in keys:
        if counter_all.get(k):
            out.append(f"| {k} | {counter_all[k]} | {counter_read.get(k, 0)} |")
    out.append("")
    return "\n".join(out)


def main():
    recs = load()
    read = [r for r in recs if skip_reason(r) is None]
    dims = {
        "directory": lambda r: r["_dir"],
        "source": source_key,
        "part (cluster.gpu)": lambda r: r["cluster"]["gpu"],
        "dense / MoE": lambda r: "MoE" if r["model"].get("moe") else "dense",
        "precision": lambda r: r.get("precision") or "null (not stated)",
        "scale (GPUs)": lambda r: bucket(r["cluster"]["num_gpus"]),
        "stack framework": lambda r: (r.get("stack") or {}).get("framework") or "none",
        "stack.attention (as the source says; absent: the framework's default)":
            lambda r: (r.get("stack") or {}).get("attention") or "absent",
        "stack.compiled (as the source says; absent: the framework's default)":
            lambda r: {True: "true", False: "false"}.get((r.get("stack") or {}).get("compiled"), "absent"),
    }
    orders = {"scale (GPUs)": ["<=64", "65-512", "513-4096", ">4096"]}
    print(f"Total: {len(recs)} records, {len(read)} readable "
          f"(not skipped for a required null field).\n")
    skipped = collections.Counter(skip_reason(r) for r in recs if skip_reason(r))
    print("Skipped: " + ", ".join(f"{v} {k}" for k, v in sorted(skipped.items(), key=lambda kv: -kv[1])) + ".\n")
    for title, fn in dims.items():
        print(table(title, collections.Counter(map(fn, recs)), collections.Counter(map(fn, read)), orders.get(title)))


if __name__ == "__main__":
    main()
