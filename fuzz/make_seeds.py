#!/usr/bin/env python3
"""Rebuilds fuzz/corpus/<target>/: the repository's own valid inputs for each fuzz target
(examples/, hw_profiles/, tests/data/, validation/, the README's commands) plus small malformed
ones (numbers out of range, deep nesting, wrong types, huge integers, truncation).

Usage: python3 fuzz/make_seeds.py   (from anywhere; rewrites fuzz/corpus/ from scratch)
"""
import hashlib
import json
import pathlib
import re
import shutil

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"
DEEP = 100000  # nesting levels of the deep-nesting seeds


def files(*globs):
    out = []
    for g in globs:
        out += sorted(p for p in ROOT.glob(g) if p.is_file())
    return out


def put(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    (d / name).write_bytes(data)


def put_files(target, paths):
    for p in paths:
        put(target, p.name, p.read_bytes())


def malformed_json(base):
    """Variants of one valid JSON object: each top-level field set to a hostile value."""
    hostile = {
        "1e400": "1e400",
        "neg1e400": "-1e400",
        "huge_int": "123456789012345678901234567890",
        "u64max": "18446744073709551615",
        "i64min": "-9223372036854775808",
        "int_max_plus1": "2147483648",
        "neg": "-1",
        "zero": "0",
        "frac": "0.5",
        "string": '"x"',
        "array": "[1, 2]",
        "object": '{"a": 1}',
        "null": "null",
        "deep": "[" * DEEP + "]" * DEEP,
    }
    out = {}
    for n, key in enumerate(list(base)[:12]):
        for tag, lit in hostile.items():
            if tag == "deep" and n > 0:
                continue  # one deep value a document is enough, and each is 200 KB
            doc = dict(base)
            doc[key] = "@@"
            out[f"{key}-{tag}"] = json.dumps(doc).replace('"@@"', lit)
    return out


def generic_malformed():
    return {
        "deep-object": '{"a":' * DEEP + "1" + "}" * DEEP,
        "top-array": "[]",
        "top-number": "1e400",
        "top-string": '"x"',
        "top-null": "null",
        "empty": "",
        "truncated": '{"name": "x", "layers": ',
        "bad-utf8": b'{"name": "\xff\xfe"}',
        "nul": b'{"name": "a\x00b"}',
    }


def seed_json_target(target, valid_paths, extra_bases=()):
    put_files(target, valid_paths)
    bases = [json.loads(p.read_text()) for p in valid_paths[:1]] + list(extra_bases)[:1]
    for i, base in enumerate(bases):
        if isinstance(base, dict):
            for name, text in malformed_json(base).items():
                put(target, f"bad{i}-{name}.json", text)
    for name, text in generic_malformed().items():
        put(target, f"bad-{name}.json", text)


PLAN_FILE = {
    "format": "parallax-plan/1",
    "model": {"name": "tiny-llama", "layers": 4, "hidden": 256, "heads": 8, "kv_heads": 4,
              "head_dim": 32, "ffn_hidden": 688, "ffn_act": "swiglu", "vocab": 256,
              "tied_embeddings": False},
    "cluster": {"gpu": "h100-sxm-80gb", "num_gpus": 8},
    "parallel": {"tp": 2, "pp": 2, "dp": 2, "cp": 1, "ep": 1, "etp": 1, "vpp": 1,
                 "sequence_parallel": True, "zero": 1, "fsdp": False, "schedule": "1f1b"},
    "batch": {"micro_batch": 1, "global_batch": 16},
    "seq_len": 1024, "recompute": "selective", "precision": "bf16",
    "overlap": {"grad_reduce": True, "param_gather": True, "tp_comm": False},
    "predicted": {"step_time_s": 0.01, "tokens_per_s_per_gpu": 1e5, "mfu": 0.3,
                  "peak_memory_gib": 1.5, "hbm_gib": 80},
}

CALIBRATION = {
    "format": "parallax-calibration/1", "backend": "cpu", "device": "fuzz", "communicator": "mpi",
    "date": "2026-01-01", "driver": "", "ranks": 2, "local_size": 2, "shared_processors": 0,
    "settle": {"seconds": 1.0, "first_tflops": 0.1, "last_tflops": 0.1},
    "memory_gib": 16, "baseline_gib": 1, "activation_bytes": 4,
    "attention_representative": True, "quick": True, "seconds": 10,
    "gemm": [{"m": 1024, "n": 1024, "k": 1024, "precision": "fp32",
              "stats": {"reps": 5, "median_s": 0.01}},
             {"m": 4096, "n": 4096, "k": 4096, "precision": "bf16",
              "stats": {"reps": 3, "median_s": 0.5, "p10_s": 0.49, "p90_s": 0.52,
                        "min_s": 0.48, "max_s": 0.6, "outliers": 0}}],
    "memory": [{"kernel": "copy", "rows": 4096, "cols": 4096, "stats": {"reps": 5,
                                                                      "median_s": 0.004}},
               {"kernel": "rmsnorm", "rows": 1024, "cols": 4096,
                "stats": {"reps": 5, "median_s": 0.002}}],
    "attention": [{"batch_heads": 8, "seq": 1024, "head_dim": 64, "backward": False,
                   "stats": {"reps": 5, "median_s": 0.02}},
                  {"batch_heads": 8, "seq": 1024, "head_dim": 64, "backward": True,
                   "stats": {"reps": 5, "median_s": 0.05}}],
    "collectives": [{"op": "all_reduce", "link": "scale_up", "ranks": 2, "stride": 1,
                     "bytes": 1048576, "stats": {"reps": 5, "median_s": 0.001}},
                    {"op": "send_recv", "link": "scale_out", "ranks": 2, "bytes": 65536,
                     "stats": {"reps": 5, "median_s": 0.0002}}],
    "rejected": [{"table": "gemm", "what": "fp8", "why": "no fp8 on this backend"}],
}

TRACES = {
    "jsonl": '{"arrival_s": 0, "prompt_len": 128, "output_len": 16}\n'
             '{"arrival_s": 0.5, "prompt_len": 2048, "output_len": 64}\n'
             '{"timestamp": 0.25, "input_len": 10, "output_tokens": 3, "model": "x"}\n',
    "mooncake": '{"timestamp": 0, "input_length": 1100, "output_length": 9, "hash_ids": [0, 1, 7]}\n'
                '{"timestamp": 2, "input_length": 600, "output_length": 4, "hash_ids": [0, 2]}\n',
    "csv": "arrival_s,prompt_len,output_len\n0,128,16\n0.1,256,8\r\n\n1.5,64,2\n",
    "csv-bom": "\ufeffinput_len, output_tokens ,timestamp,user\n10,3,0.25,a\n",
    "bad-1e400": '{"arrival_s": 1e400, "prompt_len": 1e400, "output_len": -1e400}\n',
    "bad-huge": '{"arrival_s": 0, "prompt_len": 18446744073709551615, "output_len": '
                '123456789012345678901234567890, "hash_ids": [18446744073709551616, -1, 1e400]}\n',
    "bad-types": '{"arrival_s": "0", "prompt_len": [1], "output_len": {"a": 1}, "hash_ids": {"x": 1}}\n',
    "bad-csv": "arrival_s,prompt_len,output_len\n1e400,1e400,nan\n-0,inf,9223372036854775808\n",
    "bad-deep": '{"arrival_s": 0, "prompt_len": 1, "output_len": 1, "x": ' + "[" * DEEP + "]" * DEEP + "}\n",
}


def readme_commands():
    """The README's `parallax ...` commands, as argument vectors."""
    text = (ROOT / "README.md").read_text()
    text = text.replace("\\\n", " ")
    cmds = []
    for line in text.splitlines():
        m = re.search(r"\bparallax ((?:plan|simulate|whatif|launch|validate|models|profiles|calibrate"
                      r"|execute|serve|serve-plan)\b[^#`]*)", line)
        if m:
            cmds.append(m.group(1).split())
    return cmds


def main():
    if CORPUS.exists():
        shutil.rmtree(CORPUS)
    models = files("examples/tiny-llama.json")
    scenarios = files("examples/*.json", "tests/data/scenario_*.json")
    scenarios = [p for p in scenarios if p.name != "tiny-llama.json"]
    profiles = files("hw_profiles/*.json")
    hf = files("tests/data/hf/*.json")

    # A model: ours, and the model blocks of scenarios and validation records.
    records = [json.loads(l) for l in (ROOT / "validation/public-training.jsonl").read_text()
               .splitlines() if l.strip()]
    model_blocks = [r["model"] for r in records[:6] if isinstance(r.get("model"), dict)]
    seed_json_target("model_json", models, model_blocks[:1])
    for i, m in enumerate(model_blocks):
        put("model_json", f"record-model-{i}.json", json.dumps(m))
    put("model_json", "plan-file.json", json.dumps(PLAN_FILE))

    seed_json_target("profile_json", profiles[:3])
    put_files("profile_json", profiles[3:])
    seed_json_target("scenario_json", scenarios, [PLAN_FILE])
    put("scenario_json", "plan-file.json", json.dumps(PLAN_FILE, indent=2))
    seed_json_target("hf_config", hf)

    # Validation records: the whole files, and each record alone with hostile variants.
    put_files("measured_run", files("validation/*.jsonl", "tests/data/*.jsonl"))
    for i, r in enumerate(records[:1]):
        for name, text in malformed_json(r).items():
            put("measured_run", f"bad{i}-{name}.jsonl", text + "\n")
    for key in ("model", "parallel", "batch", "measured", "cluster"):
        for tag, lit in (("1e400", '{"x": 1e400}'), ("string", '"x"'), ("array", "[1]")):
            r = dict(records[0])
            r[key] = "@@"
            put("measured_run", f"bad-{key}-{tag}.jsonl", json.dumps(r).replace('"@@"', lit) + "\n")
    for name, text in generic_malformed().items():
        put("measured_run", f"bad-{name}.jsonl", text)

    # Serving traces: the first byte is the hash block selector (see workload_fuzz.cc).
    for name, text in TRACES.items():
        put("workload", name, b"\x1f" + text.encode())

    seed_json_target("calibration_json", [], [CALIBRATION])
    put("calibration_json", "calibration.json", json.dumps(CALIBRATION, indent=1))
    for table in ("gemm", "memory", "attention", "collectives", "rejected"):
        for tag, lit in (("object", '{"a": {"stats": {"median_s": 1}}}'), ("string", '"x"'),
                         ("1e400", "[{\"m\": 1e400, \"n\": 1e400, \"k\": 1e400, \"rows\": 1e400, "
                                   "\"cols\": 1e400, \"ranks\": 1e400, \"bytes\": 1e400, "
                                   "\"stats\": {\"reps\": 1e400, \"median_s\": 1e400}}]"),
                         ("huge", "[{\"m\": 9223372036854775807, \"n\": 9223372036854775807, "
                                  "\"k\": 9223372036854775807, \"rows\": 9223372036854775807, "
                                  "\"cols\": 9223372036854775807, \"ranks\": 2147483648, "
                                  "\"batch_heads\": 9223372036854775807, \"seq\": 9223372036854775807, "
                                  "\"head_dim\": 9223372036854775807, \"kernel\": \"copy\", "
                                  "\"op\": \"all_reduce\", \"precision\": \"bf16\", "
                                  "\"stats\": {\"reps\": 1, \"median_s\": 1e-300}}]")):
            c = dict(CALIBRATION)
            c[table] = "@@"
            put("calibration_json", f"bad-{table}-{tag}.json", json.dumps(c).replace('"@@"', lit))

    # Training data: two header bytes (sequence length - 1, vocabulary selector), then the text.
    text = (ROOT / "examples/data/gettysburg.txt").read_bytes()
    put("data", "gettysburg", b"\x7f\x01" + text)
    put("data", "short", b"\x10\x01" + text[:40])
    put("data", "small-vocab", b"\x10\x20" + text[:200])
    put("data", "too-short", b"\xff\x01abc")

    # The CLI reading a model or profile file.
    put_files("cli_inputs", models + hf[:4] + profiles[:2])
    put("cli_inputs", "scenario-model.json", json.dumps({"model": json.loads(models[0].read_text())}))
    for name, text in list(generic_malformed().items())[:5]:
        put("cli_inputs", f"bad-{name}.json", text)

    # Plan files and scenarios as `simulate --plan` reads them.
    put_files("plan_file", scenarios)
    put("plan_file", "plan-file.json", json.dumps(PLAN_FILE, indent=2))
    for name, text in malformed_json(PLAN_FILE).items():
        put("plan_file", f"bad-{name}.json", text)
    for key in ("tp", "pp", "dp", "cp", "ep", "vpp"):
        p = json.loads(json.dumps(PLAN_FILE))
        p["parallel"][key] = 1 << 30
        p["cluster"]["num_gpus"] = 2147483647
        put("plan_file", f"huge-{key}.json", json.dumps(p))

    # Argument vectors, one argument a line.
    for i, argv in enumerate(readme_commands()):
        put("cli_flags", f"readme-{i:02d}", "\n".join(argv))
    for name, argv in {
        "help": ["--help"], "version": ["--version"], "plan-help": ["plan", "--help"],
        "huge-gpus": ["simulate", "--gpus", "99999999999999999999", "--tp", "-1"],
        "inf": ["whatif", "--vary", "gpus=1e400,nan", "--tokens", "1e400"],
        "serve-neg": ["serve", "--rate", "-inf", "--requests", "-5", "--hash-block", "0"],
        "pd": ["serve", "--pd", "999999999999:0", "--model", "llama3.1-8b"],
    }.items():
        put("cli_flags", name, "\n".join(argv))

    n = sum(1 for _ in CORPUS.rglob("*") if _.is_file())
    size = sum(p.stat().st_size for p in CORPUS.rglob("*") if p.is_file())
    print(f"make_seeds: {n} files, {size // 1024} KiB in {CORPUS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
