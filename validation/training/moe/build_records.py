#!/usr/bin/env python3
"""Rebuild records.jsonl for validation/training/moe/ (MoE training runs).

Sources (hand-transcribed; none is machine-readable):
  1. Liu et al., "MoE Parallel Folding: Heterogeneous Parallelism Mappings for Efficient Large-Scale MoE Model
     Training with Megatron Core" (arXiv 2504.14960): Tables 1/3 (layouts and MFU at GBS 256), Table 4 (GPU-count
     scaling at GBS 1024), Table 5 (context scaling, Mixtral rows), Table 2 (FP8 TFLOPS).
     Read in stored transcriptions of the PDF (find_string ids 62107520083 = body, 62089996986 = appendix tables).
  2. DeepSeek-AI, "DeepSeek-V3 Technical Report" (arXiv 2412.19437): Sec 1 / Table 1 cost, Sec 3.1-3.3, 4.2.
     Read in a stored transcription (id 60572378208) and verbatim excerpts (ids 58643289650, 55265511778).
Run:  python3 build_records.py   (writes records.jsonl next to this file)
"""
import json
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "records.jsonl")
KEYS = ["id", "source", "source_url", "model", "seq_len", "cluster", "parallel", "batch", "recompute", "precision",
        "measured", "unknown", "notes", "stack", "sweep", "pipeline_split", "source_locator"]
R = []


def add(**kw):
    assert set(kw) == set(KEYS), set(KEYS) ^ set(kw)
    R.append({k: kw[k] for k in KEYS})


def moe(experts, top_k, shared, ffn, dense=0):
    return {"experts": experts, "top_k": top_k, "shared_experts": shared, "expert_ffn_hidden": ffn, "dense_layers": dense}


# ---------------------------------------------------------------------------------------------- 1. MoE Parallel Folding
PF_URL = "https://arxiv.org/abs/2504.14960"
PF_SRC = "Liu et al., MoE Parallel Folding (arXiv 2504.14960), "
MIXTRAL = dict(name="Mixtral-8x22B", layers=56, hidden=6144, heads=48, kv_heads=8, head_dim=128, ffn_hidden=None,
               ffn_act="swiglu", vocab=32768, tied_embeddings=False, moe=moe(8, 2, 0, 16384), mla=None)
G8T8 = dict(MIXTRAL, name="Mixtral-8x22B-G8T8 (fine-grained upcycle: 64 experts of 1/8 size, top-8)",
            moe=moe(64, 8, 0, 2048))
QWEN2 = dict(name="Qwen2-57B-A14B", layers=28, hidden=3584, heads=28, kv_heads=4, head_dim=128, ffn_hidden=None,
             ffn_act="swiglu", vocab=151936, tied_embeddings=False, moe=moe(64, 8, 8, 2560), mla=None)
LLAMA8X70 = dict(name="Llama3-8x70B (Llama 3 70B upcycled to 8 experts)", layers=80, hidden=8192, heads=64, kv_heads=8,
                 head_dim=128, ffn_hidden=None, ffn_act="swiglu", vocab=128256, tied_embeddings=False,
                 moe=moe(8, None, 0, 28672), mla=None)
MODELS = {"mixtral8x22b": MIXTRAL, "qwen2-57b-a14b": QWEN2, "mixtral8x22b-g8t8": G8T8, "llama3-8x70b": LLAMA8X70}
ARCH = {
    "mixtral8x22b": "arch: mistralai/Mixtral-8x22B-v0.1 config.json (56 layers, hidden 6144, 48 heads, 8 KV heads, "
                    "intermediate 16384 per expert, 8 experts top-2, vocab 32768, untied); values from the public config, "
                    "not re-read here",
    "qwen2-57b-a14b": "arch: Qwen/Qwen2-57B-A14B config.json (28 layers, hidden 3584, 28 heads, 4 KV heads, 64 experts of "
                      "moe_intermediate_size 2560, top-8, one shared expert of shared_expert_intermediate_size 20480 with a "
                      "sigmoid gate, vocab 151936, untied; read in a stored copy of the config). The single shared expert "
                      "of width 20480 = 8 x 2560 is written as shared_experts 8 of the routed width (same FLOPs and "
                      "parameters; its gate is not represented)",
    "mixtral8x22b-g8t8": "arch: the paper's fine-grained reparameterisation of Mixtral 8x22B: 64 experts, 8 active per token, "
                         "each of one-eighth of Mixtral's expert hidden size (16384/8 = 2048); other dims as Mixtral-8x22B",
    "llama3-8x70b": "arch: Llama 3 70B (80 layers, hidden 8192, 64 heads, 8 KV heads, ffn 28672, vocab 128256) upcycled to "
                    "8 experts; the paper does not give top-k, so top_k is null and the record is skipped by validate",
}
METHOD = {
    "fsdp": ("FSDP", "FSDP baseline (PyTorch FSDP, ref [39]) inside Megatron-Core, with the TP degree of the table"),
    "fsdp-ep": ("FSDP + EP", "FSDP with expert parallelism, inside Megatron-Core"),
    "tp-ep-dp": ("TP + EP + DP", "TP + EP with ZeRO-1 data parallelism (DeepSpeed-TED style, ref [32]) inside Megatron-Core"),
    "mcore": ("MCore", "Megatron-Core 5D parallelism (v0.9-era) without folding: the EP group lies inside DP x CP and "
                       "expert layers use the attention TP group (etp = tp)"),
    "fold": ("MCore w/ Folding", "Megatron-Core with MoE Parallel Folding: the MoE layers get their own TP x EP x DP x PP "
                                 "mapping (ETP, EP) folded over the attention's TP x CP x DP"),
}
# Table 3 (optimal layouts, GBS 256, seq 4096): method -> (GPUs, CP, TP, EP, PP, ETP, MFU % or None for OOM)
T3 = {
    "mixtral8x22b": {"fsdp": (128, 1, 8, 1, 1, None, 4.3), "fsdp-ep": (128, 1, 2, 8, 1, None, 23.4),
                     "tp-ep-dp": (128, 1, 4, 8, 1, None, 36.6), "mcore": (128, 1, 2, 4, 8, None, 46.3),
                     "fold": (128, 1, 2, 8, 8, 1, 49.3)},
    "qwen2-57b-a14b": {"fsdp": (64, 1, 2, 1, 1, None, 9.9), "fsdp-ep": (64, 1, 1, 8, 1, None, 25.4),
                       "tp-ep-dp": (64, 1, 4, 4, 1, None, 23.1), "mcore": (64, 1, 2, 4, 4, None, 35.3),
                       "fold": (64, 1, 2, 4, 4, 1, 39.0)},
    "mixtral8x22b-g8t8": {"fsdp": (128, 1, 8, 1, 1, None, 2.2), "fsdp-ep": (128, 1, 4, 8, 1, None, 9.0),
                          "tp-ep-dp": (128, 1, 8, 8, 1, None, 8.7), "mcore": (128, 1, 2, 8, 8, None, 17.1),
                          "fold": (128, 1, 4, 8, 8, 1, 28.8)},
    "llama3-8x70b": {"fsdp": (256, 8, 8, 1, 1, None, None), "fsdp-ep": (256, 1, 8, 8, 1, None, 19.6),
                     "tp-ep-dp": (256, 1, 8, 8, 1, None, None), "mcore": (256, 1, 8, 4, 8, None, 38.8),
                     "fold": (256, 1, 8, 8, 16, None, 41.6)},
}
# Table 4 (GPU-count scaling, GBS 1024, layouts as Table 3): method -> {GPUs: MFU %}
T4 = {
    "mixtral8x22b": {"mcore": {128: 49.4, 256: 48.0, 512: 45.5, 1024: 42.3},
                     "fold": {128: 52.2, 256: 50.7, 512: 48.9, 1024: 44.9},
                     "fsdp-ep": {128: 23.9, 256: 25.5, 512: 24.4, 1024: 23.8},
                     "tp-ep-dp": {128: 40.4, 256: 39.1, 512: 36.0, 1024: 36.2}},
    "qwen2-57b-a14b": {"mcore": {64: 36.2, 128: 36.0, 256: 34.8, 512: 32.5, 1024: 29.8},
                       "fold": {64: 39.9, 128: 39.7, 256: 38.1, 512: 36.6, 1024: 33.4},
                       "fsdp-ep": {64: 26.3, 128: 25.6, 256: 23.4, 512: 22.8, 1024: 21.6},
                       "tp-ep-dp": {64: 22.4, 128: 20.9, 256: 19.8, 512: 19.7, 1024: 17.9}},
    "mixtral8x22b-g8t8": {"mcore": {128: 19.8, 256: 18.4, 512: 16.3, 1024: 13.4},
                          "fold": {128: 30.0, 256: 29.3, 512: 26.7, 1024: 25.5},
                          "fsdp-ep": {128: 9.0, 256: 8.5, 512: 8.9, 1024: 8.6},
                          "tp-ep-dp": {128: 8.6, 256: 8.5, 512: 8.5, 1024: 8.1}},
    "llama3-8x70b": {"mcore": {256: 40.1, 512: 39.5, 1024: 39.1},
                     "fold": {128: 43.7, 512: 42.7, 1024: 41.5},
                     "fsdp-ep": {128: 18.9, 512: 17.3, 1024: 17.1}},
}
# Table 5 (context scaling, Mixtral-8x22B rows): (method, GPUs, seq, CP, TP, EP, PP, ETP, GBS, MFU %)
T5 = [("mcore", 128, 16384, 4, 2, 4, 8, None, 1024, 45.3), ("mcore", 256, 32768, 8, 2, 4, 8, None, 512, 43.2),
      ("mcore", 512, 65536, 16, 2, 4, 8, None, 256, 42.6), ("mcore", 1024, 131072, 16, 4, 8, 8, None, 128, 38.2),
      ("fold", 128, 16384, 4, 2, 8, 8, 1, 1024, 47.6), ("fold", 256, 32768, 8, 2, 8, 8, 1, 512, 45.1),
      ("fold", 512, 65536, 8, 4, 8, 8, 1, 256, 44.5), ("fold", 1024, 131072, 8, 8, 8, 8, 1, 128, 42.9)]
# Table 2 (Mixtral-8x22B on 128 H100, model TFLOPS): (method, precision, TFLOPS)
T2 = [("mcore", "fp8", 575.1), ("fold", "fp8", 631.7)]

PF_COMMON = ("Setup (Sec 4.1): NVIDIA Eos, DGX H100 nodes (8 x H100 SXM, NVLink4 450 GB/s per direction, 400 Gb/s "
             "InfiniBand per GPU), PyTorch 2.5.0, CUDA 12.6, BF16 unless stated. MFU = model FLOPs / 989.5 TFLOP/s (the "
             "paper's BF16 peak); how attention FLOPs are counted is not stated. Benchmarks use token-dropping with "
             "capacity factor 1 and sub-sequence dropping (Sec 4.2: 'to alleviate the performance jitter caused by load "
             "imbalance in dropless training'), so expert load is capped. Not stated in the paper (null): micro batch, "
             "virtual pipeline size, recompute, sequence parallelism, distributed optimizer for the MCore rows. dp is "
             "the attention data-parallel size GPUs/(TP*CP*PP); with folding the expert data-parallel size is "
             "GPUs/(EP*ETP*PP).")


def pf_record(tab, mkey, meth, gpus, seq, cp, tp, ep, pp, etp, gbs, value, precision, locator, sweep, extra=""):
    dp = gpus // (tp * cp * pp)
    fsdp = meth in ("fsdp", "fsdp-ep")
    etp_v = etp if meth == "fold" else tp
    unknown = ["batch.micro_batch", "parallel.vpp", "recompute", "parallel.sequence_parallel"]
    dopt = True if meth == "tp-ep-dp" else None
    if dopt is None:
        unknown.append("parallel.distributed_optimizer")
    if etp_v is None:
        unknown.append("parallel.etp")
    m = dict(MODELS[mkey])
    if m["moe"]["top_k"] is None:
        unknown.append("model.moe.top_k")
    if m is LLAMA8X70:
        pass
    meas = {"tflops_per_gpu": value if tab == "2" else None, "flops_basis": "model",
            "mfu": round(value / 100.0, 4) if tab != "2" else None, "tokens_per_s_per_gpu": None,
            "step_time_s": None, "attention_flops": None}
    name, desc = METHOD[meth]
    vtxt = f"{value} TFLOPS (model)" if tab == "2" else f"MFU {value}%"
    rid = f"pf-t{tab}-{mkey}-{meth}-{gpus}" + (f"-s{seq // 1024}k" if tab == "5" else "") + ("-fp8" if tab == "2" else "")
    add(id=rid, source=PF_SRC + f"Table {tab}", source_url=PF_URL, model=m, seq_len=seq,
        cluster={"gpu": "h100-sxm-80gb", "num_gpus": gpus, "gpus_per_node": 8},
        parallel={"tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep, "etp": etp_v, "vpp": None if pp > 1 else 1,
                  "sequence_parallel": None, "fsdp": fsdp, "distributed_optimizer": dopt},
        batch={"micro_batch": None, "global_batch": gbs}, recompute=None, precision=precision,
        measured=meas, unknown=sorted(set(unknown) - ({"parallel.vpp"} if pp == 1 else set())),
        notes=(f"{locator}: {m['name']}, method '{name}' ({desc}), {gpus} GPUs, CP {cp}, TP {tp}, EP {ep}, PP {pp}"
               + (f", ETP {etp}" if meth == "fold" else "") + f", global batch {gbs}, seq {seq}: {vtxt}. "
               + PF_COMMON + " " + ARCH[mkey] + ". " + extra),
        stack={"framework": "megatron-lm", "version": "Megatron-Core with MoE Parallel Folding (paper, Apr 2025; baseline "
                                                      "'MCore' = MCore v0.9-era), PyTorch 2.5.0, CUDA 12.6",
               "kernels": None, "notes": f"{name}: {desc}; token dispatcher with capacity factor 1, sub-sequence dropping"
                                         + ("; FP8 delayed scaling (Transformer Engine recipe, ref [25])" if precision == "fp8" else "")},
        sweep=sweep, pipeline_split=None, source_locator=locator)


for mkey, rows in T3.items():
    for meth, (g, cp, tp, ep, pp, etp, v) in rows.items():
        if v is None:
            continue  # OOM
        pf_record("3", mkey, meth, g, 4096, cp, tp, ep, pp, etp, 256, v, "bf16",
                  f"Table 3 (Appendix 6.4, optimal layouts; MFU also in Table 1), row {mkey}/{METHOD[meth][0]}",
                  f"pf-t3-{mkey}",
                  "The paper's Table 3 header is GPUs | CP | TP | EP | PP | ETP; blank cells read as 1 (no EP/PP) or, for ETP, "
                  "as not folded." + (" DOUBT: the ETP cell of this folded row is blank (other folded rows give 1); etp left "
                                      "null." if (meth == "fold" and etp is None) else ""))
for mkey, meths in T4.items():
    for meth, pts in meths.items():
        g0, cp, tp, ep, pp, etp, _ = T3[mkey][meth]
        for g, v in pts.items():
            extra = ("Table 4 gives only GPUs and MFU; the paper: 'we fixed the parallel configuration [of Table 3] and "
                     "increased the number of GPUs', global batch 1024 in the scaling experiments (Sec 4.3).")
            if mkey == "llama3-8x70b" and meth == "fold" and g == 128:
                extra += (" DOUBT: the transcription lists this first folded Llama3-8x70B point at 128 GPUs (Table 3 used 256); "
                          "TP8 x PP16 = 128 makes it possible, but it may be a misread 256.")
            pf_record("4", mkey, meth, g, 4096, cp, tp, ep, pp, etp, 1024, v, "bf16",
                      f"Table 4 (Appendix 6.4, scaling with the number of GPUs), {mkey}/{METHOD[meth][0]}, {g} GPUs",
                      f"pf-t4-{mkey}", extra)
for meth, g, seq, cp, tp, ep, pp, etp, gbs, v in T5:
    pf_record("5", "mixtral8x22b", meth, g, seq, cp, tp, ep, pp, etp, gbs, v, "bf16",
              f"Table 5 (Appendix 6.4, context scaling), Mixtral-8x22B/{METHOD[meth][0]}, {g} GPUs, seq {seq}",
              "pf-t5-mixtral8x22b",
              "Tokens per global batch held constant (GBS x seq = 16.8M). The Qwen2-57B-A14B block of the same table repeats "
              "the Mixtral values cell for cell and disagrees with the text (38.7% -> 35.9%), so it is not recorded.")
for meth, prec, tfl in T2:
    g, cp, tp, ep, pp, etp, _ = T3["mixtral8x22b"][meth]
    pf_record("2", "mixtral8x22b", meth, g, 4096, cp, tp, ep, pp, etp, 256, tfl, prec,
              f"Table 2 (Sec 4.5, Mixtral 8x22B performance comparison), row {METHOD[meth][0]} / FP8",
              "pf-t2-mixtral8x22b-fp8",
              "The section says only 'FP8 delayed scaling with the Mixtral 8x22B model on 128 H100 GPUs'; the layout and "
              "global batch are ASSUMED to be Table 3's, because Table 2's BF16 rows (458.3 and 487.7 TFLOPS) equal Table 3's "
              "46.3% and 49.3% MFU at 989.5 TFLOP/s.")

# ---------------------------------------------------------------------------------------------- 2. DeepSeek-V3
DSV3 = dict(name="DeepSeek-V3 (671B total, 37B active)", layers=61, hidden=7168, heads=128, kv_heads=128, head_dim=None,
            ffn_hidden=18432, ffn_act="swiglu", vocab=129280, tied_embeddings=False, moe=moe(256, 8, 1, 2048, dense=3),
            mla={"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                 "v_head_dim": 128})
tps = round(1e12 / (180e3 * 3600), 1)
add(id="dsv3-h800-2048-pretrain", source="DeepSeek-AI, DeepSeek-V3 Technical Report (arXiv 2412.19437)",
    source_url="https://arxiv.org/abs/2412.19437", model=DSV3, seq_len=4096,
    cluster={"gpu": "h800-sxm-80gb", "num_gpus": 2048, "gpus_per_node": 8},
    parallel={"tp": 1, "pp": 16, "dp": 128, "cp": 1, "ep": 64, "etp": 1, "vpp": None, "sequence_parallel": False,
              "fsdp": False, "distributed_optimizer": True},
    batch={"micro_batch": None, "global_batch": 15360}, recompute="selective", precision="fp8",
    measured={"tflops_per_gpu": None, "flops_basis": None, "mfu": None, "tokens_per_s_per_gpu": tps,
              "step_time_s": None, "attention_flops": None},
    unknown=["batch.micro_batch", "parallel.vpp", "measured.flops_basis"],
    notes=("Sec 1 / Table 1: 'training DeepSeek-V3 on each trillion tokens requires only 180K H800 GPU hours, i.e., 3.7 days "
           "on our cluster with 2048 H800 GPUs'; pre-training 14.8T tokens cost 2664K GPU hours (consistent). "
           f"tokens_per_s_per_gpu = 1e12 / (180e3 x 3600 s) = {tps} (unit conversion). This is the report's average cost "
           "over pre-training (it includes the batch-size ramp from 3072 to 15360 over the first 469B tokens), i.e. a "
           "sustained average, not a single-step measurement and not a peak. Layout (Sec 3.2): 16-way pipeline "
           "parallelism with DualPipe (bidirectional schedule, two model replicas' chunks per rank; no virtual-pipeline "
           "equivalent, vpp null), 64-way expert parallelism across 8 nodes, ZeRO-1 data parallelism, no tensor "
           "parallelism; dp = 2048/16 = 128 attention replicas. Node-limited routing (each token to at most 4 nodes), "
           "20 of 132 SMs reserved for all-to-all. Precision (Sec 3.3): FP8 mixed precision with fine-grained (1x128 "
           "tile / 128x128 block) scaling for most GEMMs, embedding, output head, gating, norms and attention in "
           "BF16/FP32; MoE dispatch in FP8, combine in BF16. Recompute (Sec 3.2.3): all RMSNorm and MLA up-projections "
           "are recomputed in backward -- recorded as 'selective', but it is not Megatron's selective (attention core) "
           "recompute. Seq 4K and batch 15360 from Sec 4.2. Also trained: one multi-token-prediction module (depth 1, "
           "one extra transformer block sharing embedding and head), which this record cannot represent. Arch from the "
           "released config (config_671B.json: 61 layers, dim 7168, 128 heads, MLA ranks 1536/512, rope 64, nope 128, "
           "v 128, 3 dense layers of 18432, 256 routed experts of 2048, 1 shared, top-8, vocab 129280; untied)."),
    stack={"framework": "other", "version": "HAI-LLM (DeepSeek in-house, 2024)",
           "kernels": "custom FP8 GEMMs and all-to-all kernels",
           "notes": "DualPipe PP schedule, custom cross-node all-to-all (IB + NVLink forwarding), FP8 fine-grained "
                    "quantisation, ZeRO-1, EMA on CPU"},
    sweep=None, pipeline_split=None,
    source_locator=("arXiv 2412.19437 Sec 1 and Table 1 (180K H800 GPU hours per trillion tokens), Sec 3.1 (2048 H800), "
                    "Sec 3.2 (PP16 DualPipe, EP64 over 8 nodes, ZeRO-1 DP), Sec 3.2.3 (recompute), Sec 4.2 (seq 4K, "
                    "batch 3072 -> 15360)"))

ids = [r["id"] for r in R]
assert len(ids) == len(set(ids)), "duplicate ids"
with open(OUT, "w") as f:
    for r in R:
        f.write(json.dumps(r) + "\n")
print("wrote", len(R), "records to", OUT)
