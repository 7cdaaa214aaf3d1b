#!/usr/bin/env python3
"""Hand-transcribed records (torchtitan docs/benchmarks, torchao READMEs, PyTorch blog posts).
Every measured number below was read in the stored source text named in source_locator.
Run: python3 manual_records.py > manual_records.jsonl   (records.jsonl = this + extract.py output)
"""
import copy
import json

# ---------------------------------------------------------------- model architectures
L31_8B = {"name": "Llama 3.1 8B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128,
          "ffn_hidden": 14336, "ffn_act": "swiglu", "vocab": 128256, "tied_embeddings": False, "moe": None, "mla": None}
L3_8B = dict(L31_8B, name="Llama 3 8B")
L3_70B = {"name": "Llama 3 70B", "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "head_dim": 128,
          "ffn_hidden": 28672, "ffn_act": "swiglu", "vocab": 128256, "tied_embeddings": False, "moe": None, "mla": None}
L31_70B = dict(L3_70B, name="Llama 3.1 70B")
L31_405B = {"name": "Llama 3.1 405B", "layers": 126, "hidden": 16384, "heads": 128, "kv_heads": 8, "head_dim": 128,
            "ffn_hidden": 53248, "ffn_act": "swiglu", "vocab": 128256, "tied_embeddings": False, "moe": None, "mla": None}
L2_7B = {"name": "Llama 2 7B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 32, "head_dim": 128,
         "ffn_hidden": 11008, "ffn_act": "swiglu", "vocab": 32000, "tied_embeddings": False, "moe": None, "mla": None}
L2_13B = {"name": "Llama 2 13B", "layers": 40, "hidden": 5120, "heads": 40, "kv_heads": 40, "head_dim": 128,
          "ffn_hidden": 13824, "ffn_act": "swiglu", "vocab": 32000, "tied_embeddings": False, "moe": None, "mla": None}
L2_34B = {"name": "Llama 2 34B (fms-fsdp llama2_34b, CodeLlama-34B shape)", "layers": 48, "hidden": 8192, "heads": 64,
          "kv_heads": 8, "head_dim": 128, "ffn_hidden": 22016, "ffn_act": "swiglu", "vocab": 32000,
          "tied_embeddings": False, "moe": None, "mla": None}
L2_70B = {"name": "Llama 2 70B", "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "head_dim": 128,
          "ffn_hidden": 28672, "ffn_act": "swiglu", "vocab": 32000, "tied_embeddings": False, "moe": None, "mla": None}
QWEN3_8B = {"name": "Qwen3 8B", "layers": 36, "hidden": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128,
            "ffn_hidden": 12288, "ffn_act": "swiglu", "vocab": 151936, "tied_embeddings": False, "moe": None, "mla": None}
QWEN3_30B_A3B = {"name": "Qwen3-30B-A3B", "layers": 48, "hidden": 2048, "heads": 32, "kv_heads": 4, "head_dim": 128,
                 "ffn_hidden": None, "ffn_act": "swiglu", "vocab": 151936, "tied_embeddings": False,
                 "moe": {"experts": 128, "top_k": 8, "shared_experts": 0, "expert_ffn_hidden": 768, "dense_layers": 0},
                 "mla": None}
L4_SCOUT = {"name": "Llama 4 Scout (17B-16E)", "layers": 48, "hidden": 5120, "heads": 40, "kv_heads": 8, "head_dim": 128,
            "ffn_hidden": None, "ffn_act": "swiglu", "vocab": 202048, "tied_embeddings": False,
            "moe": {"experts": 16, "top_k": 1, "shared_experts": 1, "expert_ffn_hidden": 8192, "dense_layers": 0},
            "mla": None}
L4_SCOUT_2L = dict(copy.deepcopy(L4_SCOUT), name="Llama 4 Scout shape truncated to 2 layers (torchtitan debug config)", layers=2)

ARCH_NOTE = {
    "L3": "arch: Llama 3/3.1 dims from Meta's HF config.json (vocab 128256, untied)",
    "L2": "arch: Llama 2 dims from Meta's HF config.json (vocab 32000, untied; 7B/13B MHA, 70B GQA-8)",
    "L2_34": "arch: fms-fsdp get_model_config('llama2_34b'): emb 8192, 64 heads, 8 kv heads, 48 layers, hidden_grow_factor 22016/8192; vocab 32000 (LLaMAConfig default)",
    "QW8": "arch: Qwen/Qwen3-8B HF config.json (36 layers, 4096, 32/8 heads, head_dim 128, intermediate 12288, vocab 151936, untied)",
    "QW30": "arch: Qwen/Qwen3-30B-A3B HF config.json (48 layers, hidden 2048, 32 q / 4 kv heads, head_dim 128, 128 experts top-8, moe_intermediate_size 768, no shared expert, all layers MoE, vocab 151936)",
    "SCOUT": "arch: meta-llama/Llama-4-Scout-17B-16E HF config.json (48 layers, hidden 5120, 40/8 heads, 16 routed experts top-1 + 1 shared expert, expert intermediate 8192, vocab 202048; 3 of 4 layers use chunked attention with chunk 8192 and NoPE on every 4th layer, irrelevant at seq 8192)",
}


def par(tp=1, pp=1, dp=1, cp=1, ep=1, etp=1, vpp=None, sp=False, fsdp=True, dopt=None):
    return {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep, "etp": etp, "vpp": vpp,
            "sequence_parallel": sp, "fsdp": fsdp, "distributed_optimizer": dopt}


def meas(tps=None, mfu=None, tflops=None, basis=None, attn=None, step=None):
    return {"tflops_per_gpu": tflops, "flops_basis": basis, "mfu": mfu,
            "tokens_per_s_per_gpu": tps, "step_time_s": step, "attention_flops": attn}


def rec(id, source, url, model, seq, gpu, n, gpn, parallel, mb, gb, recompute, precision, measured,
        unknown, notes, stack, locator, sweep=None, split=None):
    return {"id": id, "source": source, "source_url": url, "model": copy.deepcopy(model), "seq_len": seq,
            "cluster": {"gpu": gpu, "num_gpus": n, "gpus_per_node": gpn}, "parallel": parallel,
            "batch": {"micro_batch": mb, "global_batch": gb}, "recompute": recompute, "precision": precision,
            "measured": measured, "unknown": unknown, "notes": notes, "stack": stack, "sweep": sweep,
            "pipeline_split": split, "source_locator": locator}


def stk(fw, ver, kern, notes, attention=None, compiled=None):
    """stack object; `attention` / `compiled` (SCHEMA.md) only where the cited source says which kernel or
    compile mode the run used -- otherwise left out, so the framework's defaults apply."""
    s = {"framework": fw, "version": ver, "kernels": kern, "notes": notes}
    if attention is not None:
        s["attention"] = attention
    if compiled is not None:
        s["compiled"] = compiled
    return s


# SDPA on A100 (sm80), bf16, is_causal, head_dim 128 dispatches to PyTorch's flash backend (FlashAttention-2); on
# Hopper/Blackwell the backend (flash or cuDNN) depends on the PyTorch build and is not stated, so left to the default.
SDPA_A100 = "attention = F.scaled_dot_product_attention(is_causal=True) in the model code at this commit, flash backend (FA2) on A100"


R = []

# ====================================================================================
# 1. torchtitan docs/performance.md, version of Aug 2024 (pre-Dec-2024 rewrite)
# ====================================================================================
TT_PERF_C = "3faaa1a0dee68ce028400e3dafd1735d152cb4f8"
TT_PERF_SRC = "pytorch/torchtitan docs/performance.md (Aug 2024 version)"
TT_PERF_URL = f"https://github.com/pytorch/torchtitan/blob/{TT_PERF_C}/docs/performance.md"
TT_MFU_NOTE = ("MFU/WPS as logged by torchtitan train.py at that commit: flop/token = 6*N(non-embedding params) + "
               "12*layers*heads*head_dim*seq (no causal halving), MFU = flop/token*WPS/peak, peak A100 312, "
               "H100 989 TFLOP/s (SXM value); WPS = tokens/s per GPU")

# 1a. Llama 3.1 405B on 128 H100 (2D)
for suf, tps, mfu, prec, opt in [("bf16", 109, 0.29, "bf16", "None"),
                                  ("fp8", 177, 0.2346, "fp8", "Float8"),
                                  ("fp8-asynctp", 185, 0.2452, "fp8", "Float8 + Async TP")]:
    R.append(rec(
        f"ttperf24-405b-128-2d-{suf}", TT_PERF_SRC, TT_PERF_URL, L31_405B, 8192, "h100-sxm-96gb-500w", 128, 8,
        par(tp=8, dp=16, sp=True, fsdp=True), 2, 32, "full", prec,
        meas(tps=tps, mfu=mfu, basis="model", attn="full"),
        ["parallel.vpp"],
        (f"Llama 3.1 performance table row: 405B, batch size 2, AC full, WPS {tps}, MFU {mfu*100:.2f}%, "
         f"Optimizations '{opt}' | text: 'we run on 128 H100 GPUs', 'we only tested 2D parallelism (FSDP2 + "
         "Tensor Parallel)', 'local batch size 2 (global batch size = local batch size 2 * number of FSDP "
         "ranks 16 = 32)' => FSDP 16, TP = 128/16 = 8 (train_configs/llama3_405b.toml at this commit also "
         "sets tensor_parallel_degree = 8, seq_len 8192, compile = true) | seq_len 8192 from "
         "train_configs/llama3_405b.toml (not stated in table) | H100 '94GB'/'95GB' HBM2e lower-TDP SXM "
         "(footnote 1) -> h100-sxm-96gb-500w profile; footnote: MFU uses SXM peak so it understates | "
         f"{TT_MFU_NOTE} | footnote 2: Float8 MFU lower because attention is not in float8 | "
         "torchtitan TP applies sequence parallel on norms (loss_parallel) by default | "
         f"{ARCH_NOTE['L3']}"),
        stk("torchtitan", TT_PERF_C[:12], "sdpa",
            "FSDP2 + DTensor TP; Float8 = torchao float8 linear (tensorwise dynamic) with float8 FSDP all-gather per "
            "llama3_405b.toml; AsyncTP = SymmetricMemory micro-pipelined TP; torch.compile enabled in the toml "
            "(not stated per row)", compiled=True),
        f"{TT_PERF_SRC} @ {TT_PERF_C[:12]}, section 'Llama 3.1 performance numbers', row 405B/{opt}",
        sweep="ttperf24-405b-128h100"))

# 1b. Llama 3 8B/70B on 64 A100 (FSDP2 1D)
for rid, model, mb, ac, ac_src, wps, mfu in [
        ("ttperf24-l3-8b-64a100-sac-layer", L3_8B, 1, "selective", "selective layer", 2904, 0.568),
        ("ttperf24-l3-8b-64a100-sac-op", L3_8B, 1, "selective", "selective op", 2973, 0.582),
        ("ttperf24-l3-70b-64a100-full", L3_70B, 1, "full", "full", 331, 0.517)]:
    R.append(rec(
        rid, TT_PERF_SRC, TT_PERF_URL, model, 8192, "a100-sxm-80gb", 64, 8,
        par(dp=64, fsdp=True), mb, 64, ac, "bf16",
        meas(tps=wps, mfu=mfu, basis="model", attn="full"),
        ["parallel.vpp"],
        (f"Llama 3 table row: {model['name'][8:]}, batch size {mb}, AC '{ac_src}', WPS {wps}, MFU {mfu*100:.1f}% | "
         "text: 'Llama 3 models with FSDP2 on 64 A100 (80GB) GPUs', 'local batch size 1 (global batch size = ... "
         "64)' | seq_len 8192 from train_configs/llama3_*.toml at this commit (text: Llama 2 default 4096 'is "
         "halved compared with Llama 3') | "
         + ("selective layer = checkpoint every n-th layer (torchtitan selective_ac_option int), not Megatron "
            "selective | " if ac_src == "selective layer" else "")
         + ("selective op = torchtitan per-op SAC policy (saves matmul outputs), not Megatron selective | "
            if ac_src == "selective op" else "")
         + f"{TT_MFU_NOTE} | compile not used (toml compile = false) | {ARCH_NOTE['L3']}"),
        stk("torchtitan", TT_PERF_C[:12], "sdpa", "FSDP2 (per-parameter sharding), bf16 mixed precision, "
            f"fp32 reduce; A100 cluster details not given; {SDPA_A100}; toml compile = false",
            attention="flash2", compiled=False),
        f"{TT_PERF_SRC} @ {TT_PERF_C[:12]}, section 'Llama 3 performance numbers', row {model['name'][8:]}/{ac_src}",
        sweep="ttperf24-64a100"))

# 1c. Llama 2 13B/70B on 64 A100
for rid, model, mb, ac, ac_src, wps, mfu in [
        ("ttperf24-l2-13b-64a100-noac", L2_13B, 2, "none", "no", 2162, 0.611),
        ("ttperf24-l2-13b-64a100-sac-layer", L2_13B, 2, "selective", "selective layer", 1914, 0.541),
        ("ttperf24-l2-13b-64a100-sac-op", L2_13B, 2, "selective", "selective op", 1904, 0.538),
        ("ttperf24-l2-70b-64a100-sac-op-mb1", L2_70B, 1, "selective", "selective op", 355, 0.508),
        ("ttperf24-l2-70b-64a100-full-mb2", L2_70B, 2, "full", "full", 353, 0.505)]:
    R.append(rec(
        rid, TT_PERF_SRC, TT_PERF_URL, model, 4096, "a100-sxm-80gb", 64, 8,
        par(dp=64, fsdp=True), mb, 64 * mb, ac, "bf16",
        meas(tps=wps, mfu=mfu, basis="model", attn="full"),
        ["parallel.vpp"],
        (f"Llama 2 table row: {model['name'][8:]}, batch size {mb}, AC '{ac_src}', WPS {wps}, MFU {mfu*100:.1f}% | "
         "text: 'Llama 2 models with FSDP2 on 64 A100 (80GB) GPUs', 'We primarily use local batch size 2 "
         "(global batch size 128)'; global_batch = local batch x 64 FSDP ranks | seq_len 4096 stated in text "
         "('the default sequence length in Llama 2 is 4096') | "
         + ("selective layer = checkpoint every n-th layer, not Megatron selective | " if ac_src == "selective layer" else "")
         + ("selective op = torchtitan per-op SAC policy, not Megatron selective | " if ac_src == "selective op" else "")
         + ("footnote: 70B local batch 2 with selective AC OOMs, so batch 1 reported | " if mb == 1 else "")
         + f"{TT_MFU_NOTE} | compile not used (toml compile = false) | {ARCH_NOTE['L2']}"),
        stk("torchtitan", TT_PERF_C[:12], "sdpa", "FSDP2, bf16 mixed precision; A100 cluster details not given; "
            f"{SDPA_A100}; toml compile = false", attention="flash2", compiled=False),
        f"{TT_PERF_SRC} @ {TT_PERF_C[:12]}, section 'Llama 2 performance numbers', row {model['name'][8:]}/batch {mb}/{ac_src}",
        sweep="ttperf24-64a100"))

# ====================================================================================
# 2. torchtitan benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md
# ====================================================================================
TRAINY_URL = "https://github.com/pytorch/torchtitan/blob/main/benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md"
for nodes, tps in [(4, 10938), (8, 10753)]:
    R.append(rec(
        f"tt-trainy-h200-l31-8b-{nodes}n-fp8", "pytorch/torchtitan benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md",
        TRAINY_URL, L31_8B, 8192, "h200-sxm-141gb", 8 * nodes, 8,
        par(dp=8 * nodes, fsdp=True), 2, 16 * nodes, "selective", "fp8",
        meas(tps=tps, basis=None),
        ["parallel.vpp", "measured.flops_basis", "measured.attention_flops"],
        (f"Results table row NUM_NODES {nodes}: TPS/GPU {tps}, Memory {47.96 if nodes == 4 else 46.97} GiB, sampled at "
         "the 100th iteration | command: llama3_8b.toml, --training.local_batch_size=2, --training.compile, "
         "float8 converter with enable_fsdp_float8_all_gather, precompute_float8_dynamic_scale_for_fsdp, "
         "force_recompute_fp8_weight_in_bwd | global_batch = 2 x 8 x nodes (FSDP over all GPUs, "
         "data_parallel_shard_degree=-1 in toml) | seq_len 8192 and AC selective (op) from "
         "torchtitan/models/llama3/train_configs/llama3_8b.toml at e7c0cae | hardware: 8 H200 per host, "
         f"NVLink, 400 Gb/s CX-7 RDMA per GPU (Trainy on WhiteFiber) | {ARCH_NOTE['L3']}"),
        stk("torchtitan", "e7c0cae (2025-06-13)", "sdpa",
            "torch 2.8.0a0+5228986c39 (NGC 25.05), torchao 0afa4c1; float8 = torchao tensorwise dynamic scaling on "
            "nn.Linear with float8 FSDP all-gather; torch.compile (--training.compile)", compiled=True),
        f"benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md @ b5bcd76c66d0, Results table, row NUM_NODES={nodes}",
        sweep="tt-trainy-h200"))

# ====================================================================================
# 3. torchtitan torchtitan/components/quantization/mxfp8.md (dense B200 + Llama4 Scout GB200)
# ====================================================================================
MX_URL = "https://github.com/pytorch/torchtitan/blob/main/torchtitan/components/quantization/mxfp8.md"
MX_SRC = "pytorch/torchtitan torchtitan/components/quantization/mxfp8.md (table sourced from torchao mx_formats README)"
AO_MX_C = "374601de6"
AO_MX_URL = "https://github.com/pytorch/ao/blob/374601de6/torchao/prototype/mx_formats/README.md"
AO_MX_SRC = "pytorch/ao torchao/prototype/mx_formats/README.md, training e2e benchmarks on B200 (copied into torchtitan mxfp8.md)"
for suf, prec, recipe, mem, tps in [("bf16", "bf16", "None (bfloat16)", 33.71, 8307.5),
                                     ("mxfp8-cublas", "mxfp8", "mxfp8_cublas", 33.88, 9969.0),
                                     ("mxfp8-cublas-rceil", "mxfp8", "mxfp8_cublas_rceil", 33.88, 9642.0),
                                     ("fp8-tensorwise", "fp8", "float8 tensorwise", 33.38, 10417.0),
                                     ("fp8-rowwise", "fp8", "float8 rowwise", 33.72, 8640.5)]:
    R.append(rec(
        f"tt-mxfp8-b200-l3-8b-8-{suf}", AO_MX_SRC, AO_MX_URL, L3_8B, 8192, "b200-sxm-180gb", 8, 8,
        par(dp=8, fsdp=True), 1, 8, "selective", prec,
        meas(tps=tps, basis=None),
        ["parallel.vpp", "measured.flops_basis", "measured.attention_flops"],
        ("POWER-LIMITED: the 8 B200s ran capped at 750 W (torchao mx_formats README @ 374601de6: 'Single-node "
         "training on 8xB200 GPUs limited to 750W'), below the 1000 W the b200-sxm-180gb profile assumes, so a "
         "prediction on that profile overstates this run | "
         f"B200 table row '{recipe}': peak memory {mem} GB, median tokens/s {tps} | setup text (torchtitan mxfp8.md "
         "copy): 'Single-node training on 8x power limited B200 GPUs, batch size 1, sequence length 8192, steps 100, "
         "torch.compile, FSDP2, per-op SAC'; model Llama3-8b named in torchao mx_formats README (the cited "
         "source) | tokens/s read as per GPU "
         "(torchtitan logs tps per device); the table does not say 'per GPU' | per-op SAC = torchtitan "
         f"selective op policy, not Megatron selective | {ARCH_NOTE['L3']}"),
        stk("torchtitan", "6fc499f6f5b3", "sdpa",
            f"pytorch 2.9.0.dev20250815+cu128, torchao 0.13.0+gite4e681be; recipe {recipe} "
            "(MXFP8 = 1x32 block-scaled e4m3 GEMMs for nn.Linear; float8 tensorwise = per-tensor dynamic scaling with "
            "float8 all-gather; float8 rowwise = per-row scales, bf16 all-gather); "
            "B200 power limited (750 W per torchao README); torch.compile", compiled=True),
        f"pytorch/ao@{AO_MX_C} torchao/prototype/mx_formats/README.md, 'Training e2e benchmarks on NVIDIA B200' table, row "
        f"'{recipe}' (the primary; torchtitan/components/quantization/mxfp8.md @ b5bcd76c66d0 copies the first four rows)",
        sweep="tt-mxfp8-b200-l3-8b"))

for suf, prec, tps in [("bf16", "bf16", 6169), ("mxfp8", "mxfp8", 7401)]:
    R.append(rec(
        f"tt-mxfp8-gb200-scout-256-{suf}", MX_SRC.split(" (")[0], MX_URL, L4_SCOUT, 8192, "gb200-nvl72", 256, 4,
        par(dp=256, ep=16, fsdp=True), None, None, "none", prec,
        meas(tps=tps, basis=None),
        ["batch.micro_batch", "batch.global_batch", "parallel.vpp", "measured.flops_basis", "measured.attention_flops"],
        (f"MoE models table row '{'None (bfloat16)' if prec == 'bf16' else 'mxfp8'}': median tokens/s {tps} | text: "
         "'512 GPU training on 64 node GB200 cluster' but config says '64 nodes of 4 devices each = 256 chips'; "
         "recorded as 256 GPUs (CUDA devices), the '512' presumably counts dies | tokens/s read as per GPU "
         "(torchtitan per-device tps), not stated | parallelism: FSDP=256 on attention/shared experts/dense "
         "FFNs, 256/4=64 on routed experts, EP=16 on routed experts | local batch size CONFLICT: mxfp8.md says 10, "
         "torchao moe_training README and the PyTorch blog say 1 -> left null | AC: mxfp8.md and torchao README "
         "say 'none', the PyTorch blog says 'full' -> recorded 'none' per this file, doubtful | "
         f"torch.compile enabled | {ARCH_NOTE['SCOUT']}"),
        stk("torchtitan", None, "sdpa",
            "mxfp8 on routed-expert grouped GEMMs and all linears except output, router.gate, attention.wk/wv; "
            "all communication in bf16; run on Crusoe Cloud GB200 (per PyTorch blog); torch.compile enabled",
            compiled=True) if prec == "mxfp8" else
        stk("torchtitan", None, "sdpa", "bf16 baseline of the MXFP8 MoE study; Crusoe Cloud GB200 (per PyTorch blog); "
            "torch.compile enabled", compiled=True),
        "torchtitan/components/quantization/mxfp8.md @ b5bcd76c66d0, Performance > MoE models table "
        f"(same numbers in pytorch/ao torchao/prototype/moe_training/README.md, 'Number of GPUs 512' table)",
        sweep="tt-mxfp8-gb200-scout"))

# ====================================================================================
# 4. torchao torchao/prototype/moe_training/README.md: Llama4 Scout 2-layer on 4x B200
# ====================================================================================
AO_C = "36027d82d1ad9949597ea16002ff4940374b1b94"
for suf, prec, cfg, tps, mem in [("bf16", "bf16", "bf16 baseline", 49381.0, 145.55),
                                  ("mxfp8-linear", "mxfp8", "MXFP8 for Linears only", 52038.0, 146.62),
                                  ("mxfp8-gg", "mxfp8", "MXFP8 for Grouped GEMMs only", 69350.0, 144.71),
                                  ("mxfp8-all", "mxfp8", "MXFP8 for Linears + Grouped GEMMs", 70747.0, 145.32)]:
    R.append(rec(
        f"ao-moe-b200-scout2l-4-{suf}", "pytorch/ao torchao/prototype/moe_training/README.md",
        "https://github.com/pytorch/ao/blob/main/torchao/prototype/moe_training/README.md",
        L4_SCOUT_2L, 8192, "b200-sxm-180gb", 4, 8,
        par(dp=4, ep=4, fsdp=True), 8, 32, "none", prec,
        meas(tps=tps, basis=None),
        ["parallel.vpp", "measured.flops_basis", "measured.attention_flops"],
        (f"End-to-end TorchTitan benchmark table row '{cfg}': median tokens/s {tps}, max memory {mem} GiB | text: "
         "'Single node benchmarks with 4xB200', 'Llama4 16e default configs; FSDP=4, EP=4; AC=none; compile=True; "
         "seq_len=8192; local_bs=8', 'Reduced num layers from 48 -> 2' | global_batch = 8 x 4 FSDP ranks | "
         "tokens/s read as per GPU (torchtitan per-device tps), not stated | node has 8 GPUs of which 4 used "
         f"(CUDA_VISIBLE_DEVICES=4,5,6,7 in the commands) | {ARCH_NOTE['SCOUT']}; layers reduced to 2"),
        stk("torchtitan", None, "sdpa", f"torchao @ {AO_C[:12]} README; converters: "
            + {"bf16": "none", "mxfp8-linear": "quantize.linear.mx", "mxfp8-gg": "quantize.grouped_mm.mx",
               "mxfp8-all": "quantize.grouped_mm.mx,quantize.linear.mx"}[suf] + "; compile=True", compiled=True),
        f"pytorch/ao@{AO_C[:12]} torchao/prototype/moe_training/README.md, section 'End-to-end training benchmark "
        f"with TorchTitan: Llama4 Scout vs bfloat16 baseline', row '{cfg}'",
        sweep="ao-moe-b200-scout2l"))

# ====================================================================================
# 5. torchtitan torchtitan/components/quantization/nvfp4.md (GB200 x4)
# ====================================================================================
NV_URL = "https://github.com/pytorch/torchtitan/blob/main/torchtitan/components/quantization/nvfp4.md"
for rid, model, mb, gb, prec, run, tps, mem, loss, tail, anote in [
        ("tt-nvfp4-gb200-l3-8b-4-nvfp4", L3_8B, 32, 128, "nvfp4", "NVFP4 (bf16 tail)", 30040, "110.95 GiB (60.2%)", 1.2715,
         "layers 0-26 NVFP4, layers 27-31 and LM head bf16", "L3"),
        ("tt-nvfp4-gb200-l3-8b-4-mxfp8", L3_8B, 32, 128, "mxfp8", "MXFP8", 28084, "179.94 GiB (97.6%)", 1.2671, None, "L3"),
        ("tt-nvfp4-gb200-l3-8b-4-bf16", L3_8B, 32, 128, "bf16", "BF16", 21919, "174.49 GiB (94.7%)", 1.2738, None, "L3"),
        ("tt-nvfp4-gb200-qwen3-8b-4-nvfp4", QWEN3_8B, 16, 64, "nvfp4", "NVFP4 (bf16 tail)", 26732, "78.63 GiB (42.67%)",
         3.82986, "layers 0-29 NVFP4, layers 30-35 and LM head bf16", "QW8"),
        ("tt-nvfp4-gb200-qwen3-8b-4-mxfp8", QWEN3_8B, 16, 64, "mxfp8", "MXFP8", 27587, "112.63 GiB (61.12%)", 3.81545, None, "QW8"),
        ("tt-nvfp4-gb200-qwen3-8b-4-bf16", QWEN3_8B, 16, 64, "bf16", "BF16", 20913, "112.88 GiB (61.25%)", 3.81439, None, "QW8")]:
    is_q = model is QWEN3_8B
    R.append(rec(
        rid, "pytorch/torchtitan torchtitan/components/quantization/nvfp4.md", NV_URL, model, 2048, "gb200-nvl72", 4, 4,
        par(dp=4, fsdp=True), mb, gb, None, prec,
        meas(tps=tps, basis=None),
        ["recompute", "parallel.vpp", "measured.flops_basis", "measured.attention_flops"],
        (f"{'Qwen3 8B Random Initialization' if is_q else 'Llama 3 8B 200M-Token Evidence'} table row '{run}': "
         f"Tokens/sec (per GPU) {tps}, memory {mem}, loss {loss} | text: global batch size {gb} (local batch size {mb}, "
         "FSDP degree 4), eager + torch.compile"
         + (", sequence length 2048, 1,526 steps" if is_q else ", 763 steps; seq 2048 from the usage command "
            "(--training.max_context_length 2048)")
         + " | hardware: doc says 'NVIDIA Blackwell SM100'; the commit that added it (bcc09297a, PR #3914) says "
         "'4x NVIDIA GB200, 184.3 GiB HBM each' (consistent with the memory percentages) -> gb200-nvl72 profile, "
         "4 GPUs = one tray | recompute not stated (llama3_8b() base config uses SelectiveAC; not confirmed for "
         f"these runs) | {ARCH_NOTE[anote]}"),
        stk("torchtitan", None, "sdpa",
            "PyTorch 2.14.0a0+gitd9abf9e, TorchAO 0.18.0+gitcb76f29 (Llama runs; doc's 'Versioned Environment'); "
            + (f"NVFP4 recipe: {tail}; NVFP4 quantizes GEMM inputs/weights/grads, collectives stay bf16" if tail else
               ("MXFP8 linear converter" if prec == "mxfp8" else "bf16 baseline"))
            + "; 'All runs use eager execution with model compilation' (eager + torch.compile)", compiled=True),
        f"torchtitan/components/quantization/nvfp4.md @ b5bcd76c66d0, section "
        f"'{'Qwen3 8B 200M-Token Evidence > Random Initialization' if is_q else 'Llama 3 8B 200M-Token Evidence'}', row '{run}'",
        sweep="tt-nvfp4-gb200-qwen3-8b" if is_q else "tt-nvfp4-gb200-l3-8b"))

# ====================================================================================
# 6. torchtitan DeepEP README (unmerged PR branch refs/pull/2500), Qwen3-30B-A3B on B200
# ====================================================================================
DEEP_C = "2a642d022de2eb0e63be4ddd4d95619c3da0b518"
DEEP_URL = f"https://github.com/pytorch/torchtitan/blob/{DEEP_C}/torchtitan/distributed/deepep/README.md"
for nodes, lbs, tps, tfl, mem, tab in [(1, 8, 14796, 341, "167.93 GiB (94.15%)", "strong"),
                                        (2, 8, 14380, 331, "138.75 GiB (77.78%)", "strong"),
                                        (4, 8, 14276, 329, "124.58 GiB (69.84%)", "strong"),
                                        (8, 8, 14107, 325, "117.50 GiB (65.88%)", "strong"),
                                        (16, 8, 13856, 319, "114.78 GiB (64.35%)", "strong"),
                                        (16, 10, 14123, 326, "142.21 GiB (79.73%)", "weak")]:
    R.append(rec(
        f"tt-deepep-b200-qwen3-30b-a3b-{nodes}n-lbs{lbs}", "pytorch/torchtitan DeepEP README (PR branch, unmerged)",
        DEEP_URL, QWEN3_30B_A3B, 4096, "b200-sxm-180gb", 8 * nodes, 8,
        par(dp=8 * nodes, ep=8, fsdp=True), lbs, lbs * 8 * nodes, "full", "bf16",
        meas(tps=tps, tflops=tfl, basis=None),
        ["parallel.vpp", "measured.flops_basis", "measured.attention_flops"],
        (f"{'Strong' if tab == 'strong' else 'Weak'} Scaling table row: {nodes} node(s), {8*nodes} GPUs, Tokens/sec {tps}, "
         f"TFLOPS {tfl}, Memory/GPU {mem} | tokens/s per GPU (README: '14,796 vs 9,930 tok/s/GPU at EP=8') | "
         "config torchtitan/models/qwen3/train_configs/qwen3_30b_a3b_with_deepep.toml at the same commit: "
         "local_batch_size 8, seq_len 4096, FSDP over all ranks (dp_shard -1), TP 1, CP 1, EP 8, AC full, "
         "compile model+loss, float8 section present but no float8 converter enabled, debug.moe_force_load_balance "
         "= true (router forced to balanced load: idealised MoE routing) | the weak-scaling LBS 10 row changes only "
         "local batch | TFLOPS basis (torchtitan MFU counting) not stated, kept as tflops_per_gpu with unknown "
         "basis | B200: README 'Expected performance ... on 8x B200s'; 167.93 GiB = 94.15% -> 178.4 GiB device | "
         f"{ARCH_NOTE['QW30']}"),
        stk("torchtitan", f"PR branch {DEEP_C[:12]} (refs/pull/2500, 2026-01)", "sdpa",
            "DeepEP token dispatcher (NVSHMEM) for EP all-to-all, fused_silu_gate_prob=true, sync_comm_stream=false; "
            "unmerged pull-request README; toml [compile] enable=true, components model+loss", compiled=True),
        f"pytorch/torchtitan@{DEEP_C[:12]} torchtitan/distributed/deepep/README.md, "
        f"'{'Strong Scaling' if tab == 'strong' else 'Weak Scaling'}' table, row {nodes} node(s)"
        + (", LBS 10" if tab == "weak" else ""),
        sweep="tt-deepep-b200-qwen3-30b-a3b"))

R.append(rec(
    "tt-deepep-b200-qwen3-30b-a3b-1n-lbs8-default-a2a", "pytorch/torchtitan DeepEP README (PR branch, unmerged)",
    DEEP_URL, QWEN3_30B_A3B, 4096, "b200-sxm-180gb", 8, 8,
    par(dp=8, ep=8, fsdp=True), 8, 64, "full", "bf16",
    meas(tps=9930, basis=None),
    ["parallel.vpp", "measured.flops_basis", "measured.attention_flops"],
    ("README opening sentence: 'near-linear scaling ... 33% faster than TorchTitan's default expert parallelism "
     "(14,796 vs 9,930 tok/s/GPU at EP=8)' -> 9,930 tok/s/GPU is the 1-node EP8 run with TorchTitan's default "
     "all-to-all token dispatcher instead of DeepEP; the README gives no separate config for it, so the same "
     "qwen3_30b_a3b_with_deepep.toml settings (LBS 8, seq 4096, FSDP over all ranks, AC full, compile, forced load "
     "balance) are assumed apart from the dispatcher (DOUBT) | " + ARCH_NOTE["QW30"]),
    stk("torchtitan", f"PR branch {DEEP_C[:12]} (refs/pull/2500, 2026-01)", "sdpa",
        "TorchTitan default EP token dispatch (all-to-all), the baseline of the DeepEP README; unmerged pull-request README; "
        "compile not stated for this run (stack.compiled left to the default)"),
    f"pytorch/torchtitan@{DEEP_C[:12]} torchtitan/distributed/deepep/README.md, line 3 ('14,796 vs 9,930 tok/s/GPU at EP=8')",
    sweep="tt-deepep-b200-qwen3-30b-a3b"))

# ====================================================================================
# 7. torchao float8 README (H100 8 GPUs, Llama3-8B)
# ====================================================================================
AO_F8_C = "90e7ca043"
for suf, prec, scaling, mem, tps in [("bf16", "bf16", "none (bfloat16)", 47.65, 6150),
                                      ("fp8-tensorwise", "fp8", "tensorwise with float8 all-gather", 47.77, 7689.5),
                                      ("fp8-rowwise", "fp8", "rowwise with bfloat16 all-gather", 47.79, 6768)]:
    R.append(rec(
        f"ao-f8-h100-l3-8b-8-{suf}", "pytorch/ao torchao/float8/README.md (performance section)",
        "https://github.com/pytorch/ao/blob/main/torchao/float8/README.md", L3_8B, 8192, "h100-sxm-80gb", 8, 8,
        par(dp=8, fsdp=True), 1, 8, "selective", prec,
        meas(tps=tps, basis=None),
        ["parallel.vpp", "measured.flops_basis", "measured.attention_flops"],
        (f"table row Llama3-8b / '{scaling}' / per op SAC: peak memory {mem} GB, median tokens/second {tps} | text: "
         "'Single-node training on 8xH100 GPUs, batch size 1, sequence length 8192, steps 100, torch.compile, FSDP2, "
         "per-op SAC' | H100 variant not stated (Meta-internal H100s are often 96 GB/500 W Grand Teton parts; "
         "h100-sxm-80gb assumed) | tokens/s read as per GPU (torchtitan per-device tps) | per-op SAC = torchtitan "
         f"selective op policy | {ARCH_NOTE['L3']}"),
        stk("torchtitan", "0.0.2", "sdpa", "pytorch 2.7.0a0+gitb98af95, torchao 0.10.0+git890e0ac8; "
            f"float8 recipe: {scaling}; torch.compile", compiled=True),
        f"pytorch/ao@{AO_F8_C} torchao/float8/README.md (last version before the docs moved), Performance table "
        f"for 8xH100, row '{scaling}'",
        sweep="ao-f8-h100-l3-8b"))

# ====================================================================================
# 8. PyTorch blog "Maximizing training throughput using PyTorch FSDP" (2024-03-13)
# ====================================================================================
MAX_URL = "https://pytorch.org/blog/maximizing-training/"
MAX_LOC = "pytorch/pytorch.github.io@2ad10059d302 _posts/2024-03-13-maximizing-training.md, Table 1"
for mname, model, ac, ac_src, a_tps, a_mfu, a_hfu, h_tps, h_mfu, h_hfu, anote in [
        ("7B", L2_7B, "none", "No", 3700, 0.57, 0.57, 7500, 0.37, 0.37, "L2"),
        ("13B", L2_13B, "selective", "Selective", 1800, 0.51, 0.59, 3800, 0.35, 0.40, "L2"),
        ("34B", L2_34B, "full", "Yes", 700, 0.47, 0.64, 1550, 0.32, 0.44, "L2_34"),
        ("70B", L2_70B, "full", "Yes", 370, 0.50, 0.67, 800, 0.34, 0.45, "L2")]:
    for gpu, n, tps, mfu, hfu, net in [("a100-sxm-80gb", 128, a_tps, a_mfu, a_hfu, "400Gbps"),
                                        ("h100-sxm-80gb", 96, h_tps, h_mfu, h_hfu, "800Gbps")]:
        R.append(rec(
            f"pt-maxfsdp-{'a100' if gpu.startswith('a100') else 'h100'}-{n}-l2-{mname.lower()}",
            "PyTorch blog: Maximizing training throughput using PyTorch FSDP (IBM + Meta, 2024-03-13)", MAX_URL,
            model, 4096, gpu, n, 8, par(dp=n, fsdp=True), 2, 2 * n, ac, "bf16",
            meas(tps=tps, mfu=mfu, basis="model", attn=None),
            ["parallel.vpp", "measured.attention_flops"],
            (f"Table 1 row {mname}: batch size 2, activation checkpoint '{ac_src}', "
             f"{'A100 80GB' if n == 128 else 'H100 80GB'} throughput {tps} tokens/sec/GPU, MFU {mfu}, HFU {hfu} | "
             f"cluster: '{'an A100 cluster with 128 GPUs and 400Gbps inter-node interconnect' if n == 128 else 'an H100 cluster with 96 GPUs and 800Gbps inter-node interconnect'}' "
             "| seq 4096: text 'batch sizes ... kept at 2 per GPU to mimic choices made in training models of 4k "
             "sequence length' (7B run: '1 million tokens per batch for 128 GPUs' = 128 x 2 x 4096) | batch size "
             "read as per-GPU micro batch, global = 2 x GPUs (no grad accumulation mentioned) | MFU per NanoGPT/PaLM "
             "method, HFU via PyTorch FLOP counter; peaks 312 (A100) / 989 (H100) TFLOP/s | "
             + ("'Selective' = fms-fsdp block-level selective checkpointing (checkpoint every n-th block; fraction "
                "not given), not Megatron selective | " if ac == "selective" else "")
             + ("full = every block checkpointed (table 'Yes') | " if ac == "full" else "")
             + f"H100 SXM vs PCIe not stated | other source values: HFU {hfu} | {ARCH_NOTE[anote]}"),
            stk("fsdp", "PyTorch nightlies post-2.2 (Nov 2023-Feb 2024)", "sdpa",
                "IBM foundation-model-stack/fms-fsdp, FSDP1 full sharding, SDPA FlashAttention-2, bf16 mixed precision, "
                "no torch.compile (blog: 'SDPA FlashAttention v2'; levers used '1, 3, and a variation of 4', not "
                "'(2) graph optimizations (e.g., fusing kernels, torch.compile)')", attention="flash2", compiled=False),
            f"{MAX_LOC}, row {mname}, {'A100' if n == 128 else 'H100'} columns",
            sweep=f"pt-maxfsdp-{'a100-128' if n == 128 else 'h100-96'}"))

# ====================================================================================
# 9. PyTorch blog "Supercharging Training using float8 and FSDP2" (2024-11-25), Table 3 (512 H100)
# ====================================================================================
F8_URL = "https://pytorch.org/blog/training-using-float8-fsdp2/"
F8_LOC = "pytorch/pytorch.github.io@1580429b6ff8 _posts/2024-11-25-training-using-float8-fsdp2.md, Table 3"
for mname, model, tp, bf, f8, anote in [("70B", L3_70B, 1, 960, 1448, "L3"), ("405B (TP4)", L31_405B, 4, 152, 217, "L3")]:
    for prec, tps in [("bf16", bf), ("fp8", f8)]:
        R.append(rec(
            f"pt-f8fsdp2-h100-512-{'70b' if tp == 1 else '405b-tp4'}-{prec}",
            "PyTorch blog: Supercharging Training using float8 and FSDP2 (IBM + Meta, 2024-11-25)", F8_URL,
            model, 8192, "h100-sxm-80gb", 512, 8, par(tp=tp, dp=512 // tp, sp=None if tp > 1 else False, fsdp=True),
            None, None, None, prec, meas(tps=tps, basis=None),
            ["batch.micro_batch", "batch.global_batch", "recompute", "parallel.vpp", "measured.flops_basis",
             "measured.attention_flops"] + (["parallel.sequence_parallel"] if tp > 1 else []),
            (f"Table 3 row {mname}: wps (bf16) {bf}, wps (float8) {f8} | wps = tokens/sec/GPU per text | text: "
             "'we scale our experiments to 512 H100 GPUs on the IBM Cloud cluster' (3.2Tbps RoCE), 'We use a "
             "sequence length of 8K for all our measurements', 'We explored the best batch size and activation "
             "checkpointing schemes' (values not given), 'For the 405B model, we leveraged DTensor for tensor "
             "parallel training with FSDP2' | dp = 512/TP | model named 'Meta Llama3 architecture'; 70B assumed "
             "Llama 3 70B dims | H100 variant not stated (SXM 80GB assumed) | Table 1 (128/256-GPU runs, GPU count "
             f"per row not given) not recorded | {ARCH_NOTE[anote]}"),
            stk("torchtitan", None, "sdpa",
                "torchtitan + FSDP2 + torch.compile (both bf16 and float8); float8 = torchao tensorwise scaling on "
                "linear layers + float8 all-gather; attention in bf16 SDPA; IBM deterministic data loader", compiled=True),
            f"{F8_LOC}, row {mname}, {'wps (bf16)' if prec == 'bf16' else 'wps (float8)'}",
            sweep="pt-f8fsdp2-h100-512"))

if __name__ == "__main__":
    ids = set()
    for r in R:
        # no pipeline parallelism -> one virtual stage per rank (not a guess)
        if r["parallel"]["pp"] == 1 and r["parallel"]["vpp"] is None:
            r["parallel"]["vpp"] = 1
            r["unknown"] = [u for u in r["unknown"] if u != "parallel.vpp"]
        # FSDP shards optimizer state by construction; no source here says more, so the flag stays null and listed
        if r["parallel"]["distributed_optimizer"] is None and "parallel.distributed_optimizer" not in r["unknown"]:
            r["unknown"].append("parallel.distributed_optimizer")
        assert r["id"] not in ids, r["id"]
        ids.add(r["id"])
        print(json.dumps(r))
