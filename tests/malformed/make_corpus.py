#!/usr/bin/env python3
"""Rebuilds the malformed-input corpus: tests/malformed/cases/ (the bad files) and cases.jsonl
(one case a line: the command, what it must do, and where its error must point).

Every file Parallax reads (model JSON, Hugging Face config, hardware profile, scenario and plan
file, validation records, serving request traces, raw calibration, training data) and its numeric
flags get mutations: numbers that overflow a double, wrong types, signs, zero, absurd sizes, deep
nesting, duplicated and unknown keys, control characters, truncation, empty and directory inputs.

A case's "expect" is "error" (a non-zero exit whose message names "where") or "warn" (exit 0
with a "warning:" that names "where"); "where" is a substring, or a list of substrings that one
line must all hold. run_corpus.py runs them and tabulates the verdicts.

Usage: python3 tests/malformed/make_corpus.py   (from anywhere; rewrites the corpus in place)
"""
import copy
import json
import pathlib
import shutil

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CASES = HERE / "cases"

MODEL = json.loads((ROOT / "examples/tiny-llama.json").read_text())
PROFILE = json.loads((ROOT / "hw_profiles/h100-sxm-80gb.json").read_text())
SCENARIO = json.loads((ROOT / "tests/data/scenario_small.json").read_text())
HF = json.loads((ROOT / "tests/data/hf/llama3.1-8b.json").read_text())
RECORD = json.loads((ROOT / "validation/public-training.jsonl").read_text().splitlines()[0])
RAW = {
    "format": "parallax-calibration/1", "backend": "cpu", "device": "x86", "ranks": 2,
    "local_size": 2, "activation_bytes": 4, "quick": True, "seconds": 10,
    "gemm": [{"m": 256, "n": 256, "k": 256, "precision": "fp32",
              "stats": {"reps": 5, "median_s": 0.001}}],
    "memory": [{"kernel": "copy", "rows": 1024, "cols": 1024,
                "stats": {"reps": 5, "median_s": 0.0005}}],
    "collectives": [{"op": "all_reduce", "ranks": 2, "bytes": 1048576,
                     "stats": {"reps": 5, "median_s": 0.0002}}],
}
TRACE_JSONL = '{"arrival_s": 0.0, "prompt_len": 128, "output_len": 16}\n' \
              '{"arrival_s": 0.5, "prompt_len": 256, "output_len": 32}\n'

cases = []


def add(case_id, kind, args, where, expect="error", text=None, name=None, note=""):
    """One case; `text` is written to cases/<name> and {file} in args and where names it."""
    entry = {"id": case_id, "kind": kind, "expect": expect, "note": note}
    if text is not None:
        name = name or case_id + ".json"
        path = CASES / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text)
        rel = "tests/malformed/cases/" + name
        args = [a.replace("{file}", rel) for a in args]
        where = [w.replace("{file}", rel) for w in where] if isinstance(where, list) else \
            where.replace("{file}", rel)
    entry["args"] = args
    entry["where"] = where
    cases.append(entry)


def with_flag(args, flag, value):
    """args with `flag value`, replacing the flag's value where args already hold it."""
    out = list(args)
    if flag in out:
        out[out.index(flag) + 1] = value
    else:
        out += [flag, value]
    return out


def dumps(v):
    return json.dumps(v, indent=1)


def set_path(doc, path, value):
    d = copy.deepcopy(doc)
    cur = d
    for k in path[:-1]:
        cur = cur[k]
    if value is DELETE:
        del cur[path[-1]]
    else:
        cur[path[-1]] = value
    return d


DELETE = object()
OVERFLOW = "1e400"   # spliced in as raw text: json.dumps cannot write it
DEEP = "[" * 100000 + "]" * 100000
SIM = ["simulate", "--gpus", "8", "--tp", "1", "--gbs", "8", "--seq", "256"]


def raw(doc, path, token):
    """The JSON text of doc with the value at path replaced by the raw token."""
    marker = "__RAW_TOKEN__"
    return dumps(set_path(doc, path, marker)).replace('"%s"' % marker, token)


def model_cases():
    sim = lambda f: SIM + ["--model", f]
    for field in ["layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "vocab"]:
        add(f"model-{field}-overflow", "model JSON", sim("{file}"), "{file}:",
            text=raw(MODEL, [field], OVERFLOW))
        for label, v in [("negative", -8), ("zero", 0), ("string", "64"), ("fraction", 2.5),
                         ("int64", 2 ** 40), ("array", [64])]:
            add(f"model-{field}-{label}", "model JSON", sim("{file}"), "{file}:/" + field,
                text=dumps(set_path(MODEL, [field], v)))
    add("model-layers-absurd", "model JSON", sim("{file}"), "{file}:/layers",
        text=dumps(set_path(MODEL, ["layers"], 2147483647)), note="ran 36 s before")
    add("model-hidden-absurd", "model JSON", sim("{file}"), "{file}:/hidden",
        text=dumps(set_path(MODEL, ["hidden"], 2 ** 30)))
    add("model-vocab-absurd", "model JSON", sim("{file}"), "{file}:/vocab",
        text=dumps(set_path(MODEL, ["vocab"], 2 ** 31 - 1)))
    add("model-missing-hidden", "model JSON", sim("{file}"), "{file}:/hidden",
        text=dumps(set_path(MODEL, ["hidden"], DELETE)))
    add("model-unknown-key", "model JSON", sim("{file}"), "{file}:/hiden",
        text=dumps(set_path(MODEL, ["hiden"], 256)))
    add("model-duplicate-key", "model JSON", sim("{file}"), ["{file}:1:", "/layers"],
        text='{"name": "dup", "layers": 4, "layers": 400, "hidden": 256, "heads": 8,'
             ' "ffn_hidden": 688, "vocab": 256}')
    add("model-dropout-negative", "model JSON", sim("{file}"), "{file}:/dropout",
        text=dumps(set_path(MODEL, ["dropout"], -0.5)))
    add("model-dropout-above-one", "model JSON", sim("{file}"), "{file}:/dropout",
        text=dumps(set_path(MODEL, ["dropout"], 1.5)))
    add("model-name-control", "model JSON", sim("{file}"), "{file}:/name",
        text=dumps(set_path(MODEL, ["name"], "evil\x1b[2Jname\x07")))
    add("model-name-huge", "model JSON", sim("{file}"), "{file}:/name",
        text=dumps(set_path(MODEL, ["name"], "x" * 300000)))
    add("model-name-number", "model JSON", sim("{file}"), "{file}:/name",
        text=dumps(set_path(MODEL, ["name"], 7)))
    add("model-act-unknown", "model JSON", sim("{file}"), "{file}:/ffn_act",
        text=dumps(set_path(MODEL, ["ffn_act"], "relu2")))
    add("model-deep-value", "model JSON", sim("{file}"), "{file}:",
        text=dumps(MODEL)[:-1] + ', "notes": ' + DEEP + "}")
    add("model-deep-root", "model JSON", sim("{file}"), "{file}:", text=DEEP)
    add("model-empty", "model JSON", sim("{file}"), "{file}", text="")
    add("model-truncated", "model JSON", sim("{file}"), "{file}:", text=dumps(MODEL)[:40])
    add("model-trailing", "model JSON", sim("{file}"), "{file}:", text=dumps(MODEL) + " {}")
    add("model-array-root", "model JSON", sim("{file}"), "{file}", text="[1, 2, 3]")
    add("model-string-root", "model JSON", sim("{file}"), "{file}", text='"tiny"')
    add("model-nul-bytes", "model JSON", sim("{file}"), "{file}:", text="{\x00\x00}")
    add("model-bad-utf8", "model JSON", sim("{file}"), "{file}:",
        text=b'{"name": "\xff\xfe", "layers": 4}')
    add("model-directory", "model JSON", sim("tests/malformed/cases"), "tests/malformed/cases")
    add("model-missing-file", "model JSON", sim("tests/malformed/cases/nope.json"),
        "tests/malformed/cases/nope.json")
    moe = dict(MODEL, moe={"experts": 8, "top_k": 2, "expert_ffn_hidden": 128})
    for label, patch, where in [
            ("experts-zero", {"experts": 0}, "/moe"), ("topk-above", {"top_k": 9}, "/moe"),
            ("experts-overflow", None, ""), ("experts-string", {"experts": "8"}, "/moe/experts"),
            ("unknown", {"expertz": 8}, "/moe/expertz"), ("dense-negative", {"dense_layers": -1},
                                                          "/moe")]:
        if patch is None:
            text = raw(moe, ["moe", "experts"], OVERFLOW)
        else:
            text = dumps(dict(moe, moe=dict(moe["moe"], **patch)))
        add(f"model-moe-{label}", "model JSON", sim("{file}"), "{file}:" + where, text=text)
    add("model-moe-wrong-type", "model JSON", sim("{file}"), "{file}:/moe",
        text=dumps(dict(MODEL, moe=[8, 2])))
    add("model-mla-wrong-type", "model JSON", sim("{file}"), "{file}:/mla",
        text=dumps(dict(MODEL, mla="yes")))
    add("model-rope-theta-negative", "model JSON", sim("{file}"), "{file}:/rope_theta",
        text=dumps(dict(MODEL, rope_theta=-10000)))
    add("model-norm-eps-string", "model JSON", sim("{file}"), "{file}:/norm_eps",
        text=dumps(dict(MODEL, norm_eps="1e-5")))


def hf_cases():
    sim = lambda f: SIM + ["--model", f]
    add("hf-mamba", "HF config", sim("{file}"), "{file}:/model_type",
        text=dumps(dict(HF, model_type="mamba")), name="hf-mamba/config.json")
    add("hf-model-type-missing", "HF config", sim("{file}"), "{file}:/model_type",
        text=dumps(set_path(HF, ["model_type"], DELETE)), name="hf-no-type/config.json")
    for field in ["hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
                  "intermediate_size"]:
        add(f"hf-{field}-overflow", "HF config", sim("{file}"), "{file}:",
            text=raw(HF, [field], OVERFLOW), name=f"hf-{field}-overflow/config.json")
        add(f"hf-{field}-string", "HF config", sim("{file}"), "{file}:/" + field,
            text=dumps(dict(HF, **{field: "4096"})), name=f"hf-{field}-string/config.json")
        add(f"hf-{field}-negative", "HF config", sim("{file}"), "{file}:/" + field,
            text=dumps(dict(HF, **{field: -4096})), name=f"hf-{field}-negative/config.json")
    add("hf-rope-type-number", "HF config", sim("{file}"), "{file}:/rope_scaling",
        text=dumps(dict(HF, rope_scaling={"rope_type": 3, "factor": 8.0})),
        name="hf-rope-type-number/config.json")
    add("hf-rope-factor-string", "HF config", sim("{file}"), "{file}:/rope_scaling",
        text=dumps(dict(HF, rope_scaling={"rope_type": "llama3", "factor": "8"})),
        name="hf-rope-factor-string/config.json")
    add("hf-quant-wrong-type", "HF config", sim("{file}"), "{file}:/quantization_config",
        text=dumps(dict(HF, quantization_config=[1, 2])), name="hf-quant/config.json")
    add("hf-deep", "HF config", sim("{file}"), "{file}:",
        text=dumps(HF)[:-1] + ', "extra": ' + DEEP + "}", name="hf-deep/config.json")
    add("hf-duplicate", "HF config", sim("{file}"), ["{file}:", "/hidden_size"],
        text=dumps(HF)[:-1] + ', "hidden_size": 8192}', name="hf-dup/config.json")


def profile_cases():
    sim = lambda f: SIM + ["--model", "llama3.1-8b", "--cluster", f]
    for field in ["hbm_gib", "bf16_tflops", "hbm_bw_gbps", "gpus_per_node"]:
        if field not in PROFILE:
            continue
        add(f"profile-{field}-overflow", "hw profile", sim("{file}"), "{file}:",
            text=raw(PROFILE, [field], OVERFLOW))
        add(f"profile-{field}-negative", "hw profile", sim("{file}"), "{file}:/" + field,
            text=dumps(dict(PROFILE, **{field: -80})))
        add(f"profile-{field}-zero", "hw profile", sim("{file}"), "{file}:/" + field,
            text=dumps(dict(PROFILE, **{field: 0})))
        add(f"profile-{field}-string", "hw profile", sim("{file}"), "{file}:/" + field,
            text=dumps(dict(PROFILE, **{field: "80"})))
    tables = {"collectives": [{"op": "all_reduce", "group_size": 8, "bytes": 1e6,
                               "busbw_gbps": 300}]}
    add("profile-tables-string", "hw profile", sim("{file}"), "{file}:/measured_tables/gemm",
        text=dumps(dict(PROFILE, measured_tables={"gemm": "fast"})))
    add("profile-collectives-object", "hw profile", sim("{file}"),
        "{file}:/measured_tables/collectives",
        text=dumps(dict(PROFILE, measured_tables={"collectives": {"op": "all_reduce"}})))
    add("profile-collectives-strings", "hw profile", sim("{file}"),
        "{file}:/measured_tables/collectives/0",
        text=dumps(dict(PROFILE, measured_tables={"collectives": ["all_reduce"]})))
    add("profile-collective-link", "hw profile", sim("{file}"),
        "{file}:/measured_tables/collectives/0/link",
        text=dumps(dict(PROFILE, measured_tables={"collectives": [
            dict(tables["collectives"][0], link="infiniband")]})))
    add("profile-gemm-precision", "hw profile", sim("{file}"),
        "{file}:/measured_tables/gemm/0/precision",
        text=dumps(dict(PROFILE, measured_tables={"gemm": [
            {"m": 1024, "n": 1024, "k": 1024, "precision": "int4", "tflops": 500}]})))
    add("profile-gemm-negative", "hw profile", sim("{file}"), "{file}:/measured_tables/gemm/0",
        text=dumps(dict(PROFILE, measured_tables={"gemm": [
            {"m": 1024, "n": 1024, "k": 1024, "tflops": -5}]})))
    add("profile-name-control", "hw profile", sim("{file}"), "{file}:/name",
        text=dumps(dict(PROFILE, name="h100\x1b[31m")))
    add("profile-unknown-key", "hw profile", sim("{file}"), "{file}:/hbm_gbi",
        text=dumps(dict(PROFILE, hbm_gbi=80)))
    add("profile-deep", "hw profile", sim("{file}"), "{file}:", text=DEEP)
    add("profile-empty", "hw profile", sim("{file}"), "{file}", text="")


def scenario_cases():
    sim = lambda f: ["simulate", "--scenario", f]
    for label, path, v, where in [
            ("gpus-zero", ["cluster", "num_gpus"], 0, "/cluster/num_gpus"),
            ("gpus-negative", ["cluster", "num_gpus"], -8, "/cluster/num_gpus"),
            ("gpus-string", ["cluster", "num_gpus"], "8", "/cluster/num_gpus"),
            ("gpus-absurd", ["cluster", "num_gpus"], 2 ** 30, "/cluster/num_gpus"),
            ("tp-zero", ["parallel", "tp"], 0, "/parallel/tp"),
            ("tp-negative", ["parallel", "tp"], -2, "/parallel/tp"),
            ("tp-string", ["parallel", "tp"], "8", "/parallel/tp"),
            ("zero-stage-7", ["parallel", "zero"], 7, "/parallel/zero"),
            ("mbs-zero", ["batch", "micro_batch"], 0, "/batch/micro_batch"),
            ("gbs-negative", ["batch", "global_batch"], -4, "/batch/global_batch"),
            ("gbs-absurd", ["batch", "global_batch"], 2147483647, "/batch/global_batch"),
            ("seq-zero", ["seq_len"], 0, "/seq_len"),
            ("seq-absurd", ["seq_len"], 2 ** 30, "/seq_len"),
            ("recompute-unknown", ["recompute"], "most", "/recompute"),
            ("precision-unknown", ["precision"], "fp4", "/precision"),
            ("schedule-number", ["parallel", "schedule"], 3, "/parallel/schedule"),
            ("imbalance-below-one", ["moe_imbalance"], 0.5, "/moe_imbalance"),
            ("model-unknown", ["model"], "llama-9000", "/model"),
            ("model-number", ["model"], 7, "/model"),
            ("cluster-string", ["cluster"], "h100", "/cluster"),
            ("gpu-unknown", ["cluster", "gpu"], "h1000", "/cluster/gpu"),
            ("unknown-key", ["seqlen"], 4096, "/seqlen"),
            ("format-future", ["format"], "parallax-plan/99", "/format"),
            ("format-number", ["format"], 1, "/format"),
            ("predicted-string", ["predicted"], "fast", "/predicted")]:
        add(f"scenario-{label}", "scenario/plan", sim("{file}"), "{file}:" + where,
            text=dumps(set_path(SCENARIO, path, v)))
    add("scenario-gbs-overflow", "scenario/plan", sim("{file}"), "{file}:",
        text=raw(SCENARIO, ["batch", "global_batch"], OVERFLOW))
    add("scenario-deep", "scenario/plan", sim("{file}"), "{file}:",
        text=dumps(SCENARIO)[:-1] + ', "notes": ' + DEEP + "}")
    add("scenario-duplicate", "scenario/plan", sim("{file}"), ["{file}:", "/seq_len"],
        text=dumps(SCENARIO)[:-1] + ', "seq_len": 1}')
    add("scenario-truncated", "scenario/plan", sim("{file}"), "{file}:", text=dumps(SCENARIO)[:60])
    add("launch-plan-future", "scenario/plan",
        ["launch", "--plan", "{file}", "--target", "megatron"], "{file}:/format",
        text=dumps(dict(SCENARIO, format="parallax-plan/99")))
    add("plan-scenario-gpus-zero", "scenario/plan",
        ["plan", "--scenario", "{file}", "--no-progress"], "{file}:/cluster/num_gpus",
        text=dumps(set_path(SCENARIO, ["cluster", "num_gpus"], 0)))


def record_cases():
    """A bad record is skipped with a warning naming its line; the good one before it is
    predicted. A file with no record at all, or none predictable, is an error."""
    val = lambda f: ["validate", f]
    line = lambda r: json.dumps(r) + "\n"
    good = line(dict(RECORD, id="good"))
    for label, bad in [
            ("duplicate-id", line(dict(RECORD, id="good"))),
            ("unknown-key", line(dict(RECORD, measurd={}))),
            ("mfu-above-one", line(set_path(RECORD, ["measured", "mfu"], 3.5))),
            ("tflops-negative", line(set_path(RECORD, ["measured", "tflops_per_gpu"], -137))),
            ("tflops-overflow",
             raw(RECORD, ["measured", "tflops_per_gpu"], OVERFLOW).replace("\n", "") + "\n"),
            ("gpus-zero", line(set_path(RECORD, ["cluster", "num_gpus"], 0))),
            ("layers-string", line(set_path(RECORD, ["model", "layers"], "24"))),
            ("cut-off", '{"id": "c", \n'),
            ("deep", DEEP + "\n"),
            ("array-line", "[1]\n"),
            ("id-missing", line(set_path(RECORD, ["id"], DELETE))),
            ("gpu-unknown", line(set_path(RECORD, ["cluster", "gpu"], "h1000"))),
            ("layout-invalid", line(set_path(RECORD, ["parallel", "tp"], 7)))]:
        add(f"record-{label}", "validation records", val("{file}"), "{file}:2", expect="warn",
            text=good + bad, name=f"record-{label}.jsonl")
    add("record-all-bad", "validation records", val("{file}"), "{file}",
        text=line(set_path(RECORD, ["id"], DELETE)), name="record-all-bad.jsonl")
    add("record-empty", "validation records", val("{file}"), "{file}", text="\n\n",
        name="record-empty.jsonl")
    add("record-directory", "validation records", val("tests/malformed/cases"),
        "tests/malformed/cases")


def trace_cases():
    serve = lambda f: ["serve", "--model", "llama3.1-8b", "--gpus", "1", "--tp", "1",
                       "--requests-file", f]
    rows = [
        ("neg-arrival", '{"arrival_s": -1, "prompt_len": 10, "output_len": 5}', ":1"),
        ("zero-prompt", '{"arrival_s": 0, "prompt_len": 0, "output_len": 5}', ":1"),
        ("neg-output", '{"arrival_s": 0, "prompt_len": 10, "output_len": -5}', ":1"),
        ("overflow", '{"arrival_s": 1e400, "prompt_len": 10, "output_len": 5}', ":1"),
        ("string-len", '{"arrival_s": 0, "prompt_len": "10", "output_len": 5}', ":1"),
        ("fraction-len", '{"arrival_s": 0, "prompt_len": 10.5, "output_len": 5}', ":1"),
        ("huge-prompt", '{"arrival_s": 0, "prompt_len": 1e15, "output_len": 5}', ":1"),
        ("missing-output", '{"arrival_s": 0, "prompt_len": 10}', ":1"),
        ("hash-ids-string", '{"arrival_s": 0, "prompt_len": 10, "output_len": 5, '
                            '"hash_ids": "abc"}', ":1"),
        ("hash-ids-negative", '{"arrival_s": 0, "prompt_len": 10, "output_len": 5, '
                              '"hash_ids": [-1]}', ":1"),
        ("duplicate-key", '{"arrival_s": 0, "prompt_len": 10, "prompt_len": 20, '
                          '"output_len": 5}', ":1:"),
        ("deep", '{"arrival_s": 0, "x": ' + DEEP + "}", ":1"),
        ("array-line", "[0, 10, 5]", ":1"),
    ]
    for label, row, where in rows:
        add(f"trace-{label}", "request trace", serve("{file}"), "{file}" + where,
            text=row + "\n", name=f"trace-{label}.jsonl")
    add("trace-unknown-key", "request trace", serve("{file}"), "{file}:1", expect="warn",
        text='{"arrival_s": 0, "prompt_len": 10, "output_len": 5, "prio": 1}\n',
        name="trace-unknown-key.jsonl")
    add("trace-csv-extra-column", "request trace", serve("{file}"), "{file}:1", expect="warn",
        text="arrival_s,prompt_len,output_len,user\n0,10,5,7\n", name="trace-csv-extra.csv")
    add("trace-bad-line-2", "request trace", serve("{file}"), "{file}:2",
        text=TRACE_JSONL.splitlines()[0] + "\n{oops\n", name="trace-bad-line.jsonl")
    csv_rows = [
        ("csv-nan", "arrival_s,prompt_len,output_len\nnan,10,5\n", ":2"),
        ("csv-inf", "arrival_s,prompt_len,output_len\ninf,10,5\n", ":2"),
        ("csv-text", "arrival_s,prompt_len,output_len\n0,ten,5\n", ":2"),
        ("csv-missing-col", "arrival_s,prompt_len\n0,10\n", ":1"),
        ("csv-short-row", "arrival_s,prompt_len,output_len\n0,10\n", ":2"),
        ("csv-negative", "arrival_s,prompt_len,output_len\n0,-10,5\n", ":2"),
        ("csv-overflow", "arrival_s,prompt_len,output_len\n1e400,10,5\n", ":2"),
        ("csv-header-only", "arrival_s,prompt_len,output_len\n", ""),
        ("csv-control", "arrival_s,prompt_len,output_len\n0,1\x1b[2J0,5\n", ":2"),
    ]
    for label, text, where in csv_rows:
        add(f"trace-{label}", "request trace", serve("{file}"), "{file}" + where, text=text,
            name=f"trace-{label}.csv")
    add("trace-empty", "request trace", serve("{file}"), "{file}", text="",
        name="trace-empty.jsonl")
    add("trace-directory", "request trace", serve("tests/malformed/cases"),
        "tests/malformed/cases")


def calibration_cases():
    cal = lambda f: ["calibrate", "--from-raw", f, "--base", "h100-sxm-80gb"]
    for label, path, v, where in [
            ("median-negative", ["gemm", 0, "stats", "median_s"], -1, "/gemm/0/stats/median_s"),
            ("median-zero", ["gemm", 0, "stats", "median_s"], 0, "/gemm/0/stats/median_s"),
            ("median-string", ["gemm", 0, "stats", "median_s"], "1ms", "/gemm/0/stats/median_s"),
            ("gemm-string", ["gemm"], "fast", "/gemm"),
            ("gemm-object", ["gemm"], {"m": 1}, "/gemm"),
            ("gemm-row-string", ["gemm", 0], "row", "/gemm/0"),
            ("gemm-precision", ["gemm", 0, "precision"], "int4", "/gemm/0/precision"),
            ("gemm-m-negative", ["gemm", 0, "m"], -256, "/gemm/0/m"),
            ("memory-rows-absurd", ["memory", 0, "rows"], 2 ** 31 - 1, "/memory/0/rows"),
            ("memory-kernel", ["memory", 0, "kernel"], "gelu", "/memory/0/kernel"),
            ("collective-op", ["collectives", 0, "op"], "broadcast", "/collectives/0/op"),
            ("collective-link", ["collectives", 0, "link"], "ib", "/collectives/0/link"),
            ("collective-ranks-zero", ["collectives", 0, "ranks"], 0, "/collectives/0/ranks"),
            ("collective-bytes-negative", ["collectives", 0, "bytes"], -1,
             "/collectives/0/bytes"),
            ("format-wrong", ["format"], "parallax-calibration/9", "/format"),
            ("activation-bytes", ["activation_bytes"], 2 ** 30, "/activation_bytes"),
            ("ranks-negative", ["ranks"], -2, "/ranks"),
            ("rejected-string", ["rejected"], "none", "/rejected")]:
        add(f"raw-{label}", "raw calibration", cal("{file}"), "{file}:" + where,
            text=dumps(set_path(RAW, path, v)))
    add("raw-median-overflow", "raw calibration", cal("{file}"), "{file}:",
        text=raw(RAW, ["gemm", 0, "stats", "median_s"], OVERFLOW))
    add("raw-deep", "raw calibration", cal("{file}"), "{file}:", text=DEEP)
    add("raw-empty", "raw calibration", cal("{file}"), "{file}", text="")


def data_cases():
    ex = ["execute", "--model", "examples/tiny-llama.json", "--steps", "1"]
    add("data-directory", "training data", ex + ["--data", "tests/malformed/cases"],
        "tests/malformed/cases")
    add("data-empty", "training data", ex + ["--data", "{file}"], "{file}", text="",
        name="data-empty.txt")
    add("data-too-short", "training data", ex + ["--data", "{file}"], "{file}", text="hi",
        name="data-short.txt")
    add("data-missing", "training data", ex + ["--data", "tests/malformed/cases/nope.txt"],
        "tests/malformed/cases/nope.txt")


def flag_cases():
    sim = ["simulate", "--model", "llama3.1-8b", "--gpus", "8", "--gbs", "8", "--seq", "1024"]
    for flag, values in [("--gbs", ["2147483647", "-1", "0", "99999999999"]),
                         ("--gpus", ["0", "-8", "1073741824"]),
                         ("--seq", ["0", "-1", "1073741824"]),
                         ("--tp", ["0", "-2"]), ("--pp", ["0"]), ("--mbs", ["0", "-1"]),
                         ("--cp", ["0"]), ("--zero", ["5", "-1"]), ("--vpp", ["0"]),
                         ("--moe-imbalance", ["nan", "0.5", "inf"])]:
        for v in values:
            add(f"flag-simulate{flag}={v}", "flags", with_flag(sim, flag, v), flag)
    plan = ["plan", "--no-progress", "--model", "llama3.1-8b", "--gpus", "8", "--gbs", "8",
            "--seq", "1024"]
    for flag, v in [("--gpus", "1073741824"), ("--gpus", "0"), ("--tokens", "nan"),
                    ("--tokens", "-1"), ("--max-days", "nan"), ("--max-days", "0"),
                    ("--memory-headroom", "abc"), ("--memory-headroom", "-0.5"),
                    ("--max-tp", "0"), ("--max-mbs", "-1"), ("--threads", "-1")]:
        args = with_flag(plan, flag, v)
        if flag == "--max-days":
            args = with_flag(args, "--tokens", "1e12")
        add(f"flag-plan{flag}={v}", "flags", args, flag)
    add("flag-plan--max-days-without-tokens", "flags", plan + ["--max-days", "3"], "--max-days")
    whatif = ["whatif", "--model", "llama3.1-8b", "--gpus", "8", "--gbs", "8", "--seq", "1024",
              "--svg", "/dev/null"]
    for v in ["gpus=", "gpus=nan", "gpus=-8", "bogus=1,2", "gpus=0", "gpus", "seq=1e400",
              "nvlink-bw=inf", "hbm=-80"]:
        add(f"flag-whatif--vary={v}", "flags", whatif + ["--vary", v], "--vary")
    serve = ["serve", "--model", "llama3.1-8b", "--gpus", "1", "--tp", "1", "--requests", "4"]
    for flag, v in [("--rate", "nan"), ("--rate", "-1"), ("--rate", "inf"),
                    ("--requests", "0"), ("--requests", "-5"), ("--requests", "1000000000"),
                    ("--prompt-len", "0"), ("--prompt-len", "-1"), ("--prompt-len", "2000000000"),
                    ("--output-len", "0"), ("--output-len", "-3"),
                    ("--gpu-memory-utilization", "0"), ("--gpu-memory-utilization", "1.5"),
                    ("--gpu-memory-utilization", "nan"), ("--block-size", "0"),
                    ("--block-size", "-16"), ("--max-num-seqs", "0"),
                    ("--max-num-batched-tokens", "-1"), ("--slo-ttft", "nan"),
                    ("--slo-ttft", "-1"), ("--slo-tpot", "inf"), ("--hash-block", "0"),
                    ("--prefix-len", "-1"), ("--prefix-groups", "0"), ("--pd", "x:y"),
                    ("--pd", "0:1"), ("--tp", "0"), ("--dp", "-1"), ("--pp", "0")]:
        add(f"flag-serve{flag}={v}", "flags", with_flag(serve, flag, v), flag)
    sp = ["serve-plan", "--model", "llama3.1-8b", "--gpus", "8", "--rate", "2", "--requests", "20"]
    for flag, v in [("--ttft-p90", "nan"), ("--ttft-p90", "-1"), ("--tpot-p90", "inf"),
                    ("--gpu-memory-utilization", "2"), ("--threads", "-1"),
                    ("--requests", "0"), ("--block-size", "0"), ("--prompt-len", "-5"),
                    ("--rate", "nan"), ("--gpus", "0"), ("--gpus", "1073741824")]:
        add(f"flag-serve-plan{flag}={v}", "flags", with_flag(sp, flag, v), flag)
    ex = ["execute", "--model", "examples/tiny-llama.json", "--steps", "2"]
    for flag, v in [("--lr", "nan"), ("--lr", "1e30"), ("--lr", "-1"), ("--lr", "0"),
                    ("--warmup", "-5"), ("--steps", "0"), ("--steps", "-1"),
                    ("--timeout", "nan"), ("--timeout", "0"), ("--save-every", "-1"),
                    ("--temperature", "nan"), ("--max-new-tokens", "-1"), ("--fit-gib", "nan"),
                    ("--fit-gib", "0")]:
        add(f"flag-execute{flag}={v}", "flags", with_flag(ex, flag, v), flag)
    add("flag-calibrate--tolerance=nan", "flags",
        ["calibrate", "--quick", "--tolerance", "nan", "--check", "h100-sxm-80gb"], "--tolerance")
    add("flag-profiles-unknown", "flags", ["profiles", "h1000"], "h1000")
    add("flag-launch-target-unknown", "flags",
        ["launch", "--model", "llama3.1-8b", "--gpus", "8", "--gbs", "8", "--target", "jax"],
        "--target")


def main():
    if CASES.exists():
        shutil.rmtree(CASES)
    CASES.mkdir(parents=True)
    for part in [model_cases, hf_cases, profile_cases, scenario_cases, record_cases, trace_cases,
                 calibration_cases, data_cases, flag_cases]:
        part()
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids)), "duplicate case ids"
    with open(HERE / "cases.jsonl", "w") as f:
        for c in cases:
            f.write(json.dumps(c) + "\n")
    print(f"make_corpus: {len(cases)} cases in {CASES.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
