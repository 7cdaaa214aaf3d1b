#!/usr/bin/env python3
"""Rebuild the MLPerf-Training records (ids 'mlpt*') of records.jsonl from local git mirrors of
mlcommons/training_results_v3.0, v4.0, v4.1, v5.0, v5.1 (v3.1 is reserved for a blind check and is not read) (expects bare/non-bare git repos at
$MLPERF_MIRROR/mlcommons+training_results_vX.Y/repo, default MLPERF_MIRROR=/work/.mirror).

Measured value: every `train_step_time` (v5.x) / `train_step_timing in s` (v4.x) / `train_step_timing` (v3.0) value in the
MLLOG `tracked_stats` events of all result_*.txt files of a submission; we report the median.
Where a log has no per-step timing (v4.0 NVIDIA GPT-3), the step time is
(block_stop - block_start) / (epoch_count / (global_batch * seq_len)) per block (epoch_count is
in tokens for gpt3), median over blocks.  tokens/s/GPU = global_batch*seq_len/step_time/num_gpus.
The layout (TP/PP/VPP/CP/MBS, precision recipe) is copied from the submission's config_*.sh
(resolved by sourcing it in a clean shell; values written below with the file they came from).
Writes records.jsonl beside this script."""
import json, os, re, statistics, subprocess, sys

MIRROR = os.environ.get('MLPERF_MIRROR', '/work/.mirror')
def repo(v): return f'{MIRROR}/mlcommons+training_results_v{v}/repo'
def git(v, *a): return subprocess.run(['git', '-C', repo(v), *a], capture_output=True, text=True).stdout
def commit(v): return git(v, 'rev-parse', 'HEAD').strip()

GPT3 = {"name": "GPT-3 175B (MLPerf gpt3 benchmark)", "layers": 96, "hidden": 12288, "heads": 96, "kv_heads": 96,
        "head_dim": 128, "ffn_hidden": 49152, "ffn_act": "gelu", "vocab": 50257, "tied_embeddings": True, "moe": None, "mla": None}
L405 = {"name": "Llama 3.1 405B (MLPerf llama31_405b)", "layers": 126, "hidden": 16384, "heads": 128, "kv_heads": 8,
        "head_dim": 128, "ffn_hidden": 53248, "ffn_act": "swiglu", "vocab": 128256, "tied_embeddings": False, "moe": None, "mla": None}
L8 = {"name": "Llama 3.1 8B (MLPerf llama31_8b)", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8,
      "head_dim": 128, "ffn_hidden": 14336, "ffn_act": "swiglu", "vocab": 128256, "tied_embeddings": False, "moe": None, "mla": None}
MODELS = {'gpt3': GPT3, 'llama31_405b': L405, 'llama31_8b': L8}
ARCH_NOTE = {
 'gpt3': "arch: MLPerf gpt3 = GPT-3 175B; layers/hidden/heads/ffn(=4h) from the submission's conf/custom.yaml (num_layers 96, hidden_size 12288, num_attention_heads 96, ffn_hidden_size 4*hidden; v3.0: config_common.sh NUM_LAYERS/HIDDEN_SIZE/FFN_HIDDEN_SIZE/NUM_ATTENTION_HEADS); gelu per GPT-3; vocab 50257 = the benchmark's C4 SentencePiece model c4_en_301_5Mexp2_spm (the reference PAX config declares PassThroughVocabulary(size=50257) for it and MaxText's gpt3-175b.yml pads it to 50304); NeMo pads the embedding to a multiple of 128*TP (make_vocab_size_divisible_by 128, v3.0 conf/megatron_gpt_config.yaml), i.e. 50688 at TP4; tied embeddings: share_embeddings_and_output_weights True in the v3.0 conf and logits_via_embedding true in MaxText's gpt3 reference config",
 'llama31_405b': "arch: Llama 3.1 405B per HF meta-llama/Llama-3.1-405B config.json (126 layers, 16384 hidden, 128 heads, 8 KV heads, ffn 53248, vocab 128256, untied); conf/custom.yaml num_layers 126, encoder_seq_length 8192",
 'llama31_8b': "arch: Llama 3.1 8B per HF meta-llama/Llama-3.1-8B config.json (32 layers, 4096 hidden, 32 heads, 8 KV heads, ffn 14336, vocab 128256, untied); config OVERWRITTEN_NUM_LAYERS=32",
}
# gpu profile, gpus per node
HW = {'H100': ('h100-sxm-80gb', 8), 'H200': ('h200-sxm-141gb', 8), 'B200': ('b200-sxm-180gb', 8),
      'B300': ('b300-sxm-288gb', 8), 'GB200': ('gb200-nvl72', 4), 'GB300': ('gb300-nvl72', 4)}

# (version, org, system dir, benchmark, hw, nodes, config path, tp, pp, vpp, cp, mbs, sp, prec, recipe note, asym_pp, sweep)
F8G = "fp8: Transformer Engine delayed scaling, FP8 HYBRID format (E4M3 fwd / E5M2 bwd), amax history 1024, algo max, FP8_PARAMS (fp8 weights); config_fp8.sh"
F8G30 = "fp8: Transformer Engine (release_v0.8) delayed scaling, FP8 HYBRID format (E4M3 fwd / E5M2 bwd), amax history 1024, algo max, FP8_REDUCE_AMAX (no fp8 params in this round); config_fp8.sh; TP_COMM_OVERLAP (config_tp_h100.sh)"
F8_405_E4 = "fp8: Transformer Engine delayed scaling (FP8=True, FP8_HYBRID unset -> e4m3 per pretrain.py), FP8_PARAMS/fp8 param gather; config_common.sh"
F8_TW = "fp8: Transformer Engine current (tensorwise) scaling, FP8_RECIPE=tensorwise, FP8_HYBRID=True, fp8 param gather"
NVFP4 = "nvfp4: FP4=True, FP4_RECIPE=nvfp4 (Transformer Engine NVFP4 GEMMs), FP8=False; config_common_fp4.sh"
NVFP4_8B = NVFP4 + "; FP8_DPA=True (fp8 dot-product attention)"
SUBS = [
 # v3.0 GPT-3 175B (NeMo 1.17 + TE 0.8, Megatron-based; implementation dir 'pytorch')
 ('3.0','NVIDIA','dgxh100_n64_nemo','gpt3','H100',64,'NVIDIA/benchmarks/gpt3/implementations/pytorch/config_DGXH100_64x8x128x4x8_mbs1.sh',4,8,12,1,1,True,'fp8',F8G30,False,'mlperf-v3.0-gpt3-h100'),
 ('3.0','NVIDIA','dgxh100_n96_nemo','gpt3','H100',96,'NVIDIA/benchmarks/gpt3/implementations/pytorch/config_DGXH100_96x8x128x4x8_mbs1.sh',4,8,12,1,1,True,'fp8',F8G30,False,'mlperf-v3.0-gpt3-h100'),
 ('3.0','NVIDIA_CoreWeave','coreweave_hgxh100_n96_ngc23.04_pytorch','gpt3','H100',96,'NVIDIA_CoreWeave/benchmarks/gpt3/implementations/pytorch/config_DGXH100_96x8x128x4x8_mbs1.sh',4,8,12,1,1,True,'fp8',F8G30,False,'mlperf-v3.0-gpt3-h100-coreweave'),
 ('3.0','NVIDIA_CoreWeave','coreweave_hgxh100_n192_ngc23.04_pytorch','gpt3','H100',192,'NVIDIA_CoreWeave/benchmarks/gpt3/implementations/pytorch/config_DGXH100_192x8x64x4x8_mbs1.sh',4,8,12,1,1,True,'fp8',F8G30,False,'mlperf-v3.0-gpt3-h100-coreweave'),
 ('3.0','NVIDIA_CoreWeave','coreweave_hgxh100_n448_ngc23.04_pytorch','gpt3','H100',448,'NVIDIA_CoreWeave/benchmarks/gpt3/implementations/pytorch/config_DGXH100_448x8x24x4x8_mbs1.sh',4,8,12,1,1,True,'fp8',F8G30,False,'mlperf-v3.0-gpt3-h100-coreweave'),
 ('4.0','NVIDIA','eos_n64_ngc24.04_nemo','gpt3','H100',64,'NVIDIA/benchmarks/gpt3/implementations/nemo/config_DGXH100_64x8x128x4x8_mbs2.sh',4,8,4,1,2,True,'fp8',F8G,False,'mlperf-gpt3-h100-eos'),
 ('4.0','NVIDIA','eos-dfw_n1344_ngc24.04_nemo','gpt3','H100',1344,'NVIDIA/benchmarks/gpt3/implementations/nemo/config_DGXH100_1344x8x6x4x6_mbs1_cg.sh',4,6,8,1,1,True,'fp8',F8G+"; LAYER_CUDA_GRAPH=1",False,'mlperf-gpt3-h100-eos'),
 ('4.0','NVIDIA','eos-dfw_n1452_ngc24.04_nemo','gpt3','H100',1452,'NVIDIA/benchmarks/gpt3/implementations/nemo/config_DGXH100_1452x8x6x4x6_mbs1_cg.sh',4,6,8,1,1,True,'fp8',F8G+"; LAYER_CUDA_GRAPH=1",False,'mlperf-gpt3-h100-eos'),
 ('4.0','smc','64xSMC-H100-SXM-80GB','gpt3','H100',64,'smc/benchmarks/gpt3/implementations/nemo/config_SMCH100_64x8x128x4x8.sh',4,8,12,1,2,True,'fp8',F8G+"; INTERLEAVED_PIPELINE not set in the config chain, so conf/custom.yaml's default virtual_pipeline_model_parallel_size 12 applies",False,None),
 ('4.1','NVIDIA','b200_n8_preview_nemo','gpt3','B200',8,'NVIDIA/benchmarks/gpt3/implementations/b200_n8_preview_nemo/config_DGXB200_8x8x1024x4x8_mbs2_cg.sh',4,8,6,1,2,True,'fp8',F8G+"; LAYER_CUDA_GRAPH=1",False,None),
 ('4.1','NVIDIA','eos_n32_ngc24.09_nemo','gpt3','H100',32,'NVIDIA/benchmarks/gpt3/implementations/eos_n32_ngc24.09_nemo/config_DGXH100_32x8x256x4x8_mbs2.sh',4,8,6,1,2,True,'fp8',F8G,False,'mlperf-v4.1-gpt3-h100-eos'),
 ('4.1','NVIDIA','eos_n64_ngc24.09_nemo','gpt3','H100',64,'NVIDIA/benchmarks/gpt3/implementations/eos_n64_ngc24.09_nemo/config_DGXH100_64x8x128x4x8_mbs2.sh',4,8,6,1,2,True,'fp8',F8G,False,'mlperf-v4.1-gpt3-h100-eos'),
 ('4.1','Oracle','1536xBM.GPU.H100.8','gpt3','H100',192,'Oracle/benchmarks/gpt3/DGXH100_128x8x64x4x8_mbs2/config_DGXH100_192x8x64x4x8_mbs2.sh',4,8,4,1,2,True,'fp8',F8G,False,'mlperf-v4.1-gpt3-h100-oracle'),
 ('4.1','Oracle','3072xBM.GPU.H100.8','gpt3','H100',384,'Oracle/benchmarks/gpt3/DGXH100_384x8x32x4x8_mbs2/config_DGXH100_384x8x32x4x8_mbs2.sh',4,8,4,1,2,True,'fp8',F8G,False,'mlperf-v4.1-gpt3-h100-oracle'),
 ('5.0','NVIDIA','eos-dfw_n64_ngc25.01_nemo','llama31_405b','H100',64,'NVIDIA/benchmarks/llama31_405b/implementations/eos-dfw_n64_ngc25.01_nemo/config_DGXH100_64x8x288xtp8pp8cp2.sh',8,8,8,2,1,True,'fp8',F8_405_E4,True,'mlperf-v5.0-l405b-h100-eos'),
 ('5.0','NVIDIA','eos-dfw_n256_ngc25.01_nemo','llama31_405b','H100',256,'NVIDIA/benchmarks/llama31_405b/implementations/eos-dfw_n256_ngc25.01_nemo/config_DGXH100_256x8x72xtp8pp8cp2.sh',8,8,8,2,1,True,'fp8',F8_405_E4,True,'mlperf-v5.0-l405b-h100-eos'),
 ('5.0','NVIDIA','eos-dfw_n304_ngc25.01_nemo','llama31_405b','H100',304,'NVIDIA/benchmarks/llama31_405b/implementations/eos-dfw_n304_ngc25.01_nemo/config_DGXH100_304x8x64xtp8pp8cp2.sh',8,8,8,2,1,True,'fp8',F8_405_E4,True,'mlperf-v5.0-l405b-h100-eos'),
 ('5.0','NVIDIA','eos-dfw_n320_ngc25.01_nemo','llama31_405b','H100',320,'NVIDIA/benchmarks/llama31_405b/implementations/eos-dfw_n320_ngc25.01_nemo/config_DGXH100_320x8x56xtp8pp8cp2.sh',8,8,8,2,1,True,'fp8',F8_405_E4,True,'mlperf-v5.0-l405b-h100-eos'),
 ('5.0','NVIDIA','eos-dfw_n1024_ngc25.01_nemo','llama31_405b','H100',1024,'NVIDIA/benchmarks/llama31_405b/implementations/eos-dfw_n1024_ngc25.01_nemo/config_DGXH100_1024x8x24xtp8pp8cp2.sh',8,8,8,2,1,True,'fp8',F8_405_E4,True,'mlperf-v5.0-l405b-h100-eos'),
 ('5.0','NVIDIA','tyche_ngpu256_ngc25.04_nemo','llama31_405b','GB200',64,'NVIDIA/benchmarks/llama31_405b/implementations/tyche_ngpu256_ngc25.04_nemo/config_GB200_64x4x112xtp4pp8cp2_cg.sh',4,8,8,2,1,True,'fp8',F8_405_E4+"; FP8_PARAM_GATHER",True,'mlperf-v5.0-l405b-gb200-tyche'),
 ('5.0','NVIDIA','tyche_ngpu512_ngc25.04_nemo','llama31_405b','GB200',128,'NVIDIA/benchmarks/llama31_405b/implementations/tyche_ngpu512_ngc25.04_nemo/config_GB200_128x4x112xtp4pp8cp2_cg_dplast.sh',4,8,8,2,1,True,'fp8',F8_405_E4+"; FP8_PARAM_GATHER; FULL_CUDA_GRAPH",True,'mlperf-v5.0-l405b-gb200-tyche'),
 ('5.0','IBM+CoreWeave+NVIDIA','carina_ngpu512_ngc25.04_nemo','llama31_405b','GB200',128,'IBM+CoreWeave+NVIDIA/benchmarks/llama31_405b/implementations/carina_ngpu512_ngc25.04_nemo/config_GB200_128x4x112xtp4pp8cp2.sh',4,8,8,2,1,True,'fp8',F8_405_E4+"; FP8_PARAM_GATHER; FULL_CUDA_GRAPH",True,'mlperf-v5.0-l405b-gb200-carina'),
 ('5.0','IBM+CoreWeave+NVIDIA','carina_ngpu1024_ngc25.04_nemo','llama31_405b','GB200',256,'IBM+CoreWeave+NVIDIA/benchmarks/llama31_405b/implementations/carina_ngpu1024_ngc25.04_nemo/config_GB200_256x4x48xtp4pp8cp2.sh',4,8,8,2,1,True,'fp8',F8_405_E4+"; FP8_PARAM_GATHER; FULL_CUDA_GRAPH",True,'mlperf-v5.0-l405b-gb200-carina'),
 ('5.0','IBM+CoreWeave+NVIDIA','carina_ngpu1536_ngc25.04_nemo','llama31_405b','GB200',384,'IBM+CoreWeave+NVIDIA/benchmarks/llama31_405b/implementations/carina_ngpu1536_ngc25.04_nemo/config_GB200_384x4x48xtp4pp8cp2.sh',4,8,8,2,1,True,'fp8',F8_405_E4+"; FP8_PARAM_GATHER; FULL_CUDA_GRAPH",True,'mlperf-v5.0-l405b-gb200-carina'),
 ('5.0','IBM+CoreWeave+NVIDIA','carina_ngpu2048_ngc25.04_nemo','llama31_405b','GB200',512,'IBM+CoreWeave+NVIDIA/benchmarks/llama31_405b/implementations/carina_ngpu2048_ngc25.04_nemo/config_GB200_512x4x40xtp4pp8cp2.sh',4,8,8,2,1,True,'fp8',F8_405_E4+"; FP8_PARAM_GATHER; FULL_CUDA_GRAPH",True,'mlperf-v5.0-l405b-gb200-carina'),
 ('5.0','IBM+CoreWeave+NVIDIA','carina_ngpu2496_ngc25.04_nemo','llama31_405b','GB200',624,'IBM+CoreWeave+NVIDIA/benchmarks/llama31_405b/implementations/carina_ngpu2496_ngc25.04_nemo/config_GB200_624x4x32xtp4pp8cp2.sh',4,8,8,2,1,True,'fp8',F8_405_E4+"; FP8_PARAM_GATHER; FULL_CUDA_GRAPH",True,'mlperf-v5.0-l405b-gb200-carina'),
 ('5.0','Nebius','nebius_soperator_8xH200_n64_ngc25.01_nemo','llama31_405b','H200',64,'Nebius/benchmarks/llama31_405b/implementations/nebius_soperator_8xH200_n64_ngc25.01_nemo/config_DGXH200_64x8x144xtp4pp8cp2.sh',4,8,8,2,1,True,'fp8',F8_405_E4,True,'mlperf-v5.0-l405b-h200-nebius'),
 ('5.0','Nebius','nebius_soperator_8xH200_n128_ngc25.01_nemo','llama31_405b','H200',128,'Nebius/benchmarks/llama31_405b/implementations/nebius_soperator_8xH200_n128_ngc25.01_nemo/config_DGXH200_128x8x72xtp4pp8cp2.sh',4,8,8,2,1,True,'fp8',F8_405_E4,True,'mlperf-v5.0-l405b-h200-nebius'),
 ('5.1','NVIDIA','hsg_ngpu2560_ngc25.09_nemo','llama31_405b','GB200',640,'NVIDIA/benchmarks/llama31_405b/implementations/hsg_ngpu2560_ngc25.09_nemo/config_GB200_640x4x24xtp4pp8cp2_cg_fp4.sh',4,8,8,2,1,True,'nvfp4',NVFP4,True,'mlperf-v5.1-l405b-gb200-nvfp4'),
 ('5.1','NVIDIA','hsg_ngpu5120_ngc25.09_nemo','llama31_405b','GB200',1280,'NVIDIA/benchmarks/llama31_405b/implementations/hsg_ngpu5120_ngc25.09_nemo/config_GB200_1280x4x16xtp4pp8cp2_cg_fp4.sh',4,8,8,2,1,True,'nvfp4',NVFP4,True,'mlperf-v5.1-l405b-gb200-nvfp4'),
 ('5.1','NVIDIA','tyche_ngpu512_ngc25.09_nemo','llama31_405b','GB200',128,'NVIDIA/benchmarks/llama31_405b/implementations/tyche_ngpu512_ngc25.09_nemo/config_GB200_128x4x144xtp4pp8cp2_cg_fp4.sh',4,8,8,2,1,True,'nvfp4',NVFP4,True,'mlperf-v5.1-l405b-gb200-nvfp4'),
 ('5.1','NVIDIA','theia_ngpu512_ngc25.09_nemo','llama31_405b','GB300',128,'NVIDIA/benchmarks/llama31_405b/implementations/theia_ngpu512_ngc25.09_nemo/config_GB300_128x4x72xtp2pp8cp2_cg_fp4.sh',2,8,8,2,1,True,'nvfp4',NVFP4,True,None),
 ('5.1','University-of-Florida','hpg.dgxb200x8.n32','llama31_405b','B200',32,'University-of-Florida/benchmarks/llama31_405b/implementations/hpg.dgxb200x8/config_DGXB200_32x8x144xtp4pp8cp2_cg.sh',4,8,8,2,1,True,'fp8',"fp8: Transformer Engine current (tensorwise) scaling, FP8_RECIPE=tensorwise (FP8_HYBRID not set), fp8 param gather; config_common*.sh not shipped in hpg.dgxb200x8/, taken from the same submission's b200_nemo/ dir",True,'mlperf-v5.1-l405b-b200-uf'),
 ('5.1','University-of-Florida','hpg.dgxb200x8.n56','llama31_405b','B200',56,'University-of-Florida/benchmarks/llama31_405b/implementations/hpg.dgxb200x8/config_DGXB200_56x8x144xtp4pp8cp2_cg.sh',4,8,8,2,1,True,'fp8',"fp8: Transformer Engine current (tensorwise) scaling, FP8_RECIPE=tensorwise (FP8_HYBRID not set), fp8 param gather; config_common*.sh not shipped in hpg.dgxb200x8/, taken from the same submission's b200_nemo/ dir",True,'mlperf-v5.1-l405b-b200-uf'),
 # Llama 3.1 8B (v5.1)
 ('5.1','NVIDIA','tyche_ngpu8_ngc25.09_nemo','llama31_8b','GB200',2,'NVIDIA/benchmarks/llama31_8b/implementations/nemo/config_GB200_2x4x2xtp1pp1cp1_8b_fp4.sh',1,1,None,1,2,False,'nvfp4',NVFP4_8B,False,'mlperf-v5.1-l8b-gb200-nvidia'),
 ('5.1','NVIDIA','tyche_ngpu72_ngc25.09_nemo','llama31_8b','GB200',18,'NVIDIA/benchmarks/llama31_8b/implementations/nemo/config_GB200_18x4x1xtp1pp1cp2_8b.sh',1,1,None,2,1,False,'fp8',F8_TW,False,'mlperf-v5.1-l8b-gb200-nvidia'),
 ('5.1','NVIDIA','tyche_ngpu512_ngc25.09_nemo','llama31_8b','GB200',128,'NVIDIA/benchmarks/llama31_8b/implementations/nemo/config_GB200_128x4x1xtp2pp1cp4_8b.sh',2,1,None,4,1,True,'fp8',F8_TW+"; TP_COMM_OVERLAP",False,'mlperf-v5.1-l8b-gb200-nvidia'),
 ('5.1','NVIDIA','theia_ngpu8_ngc25.09_nemo','llama31_8b','GB300',2,'NVIDIA/benchmarks/llama31_8b/implementations/nemo/config_GB300_2x4x2xtp1pp1cp1_8b_fp4.sh',1,1,None,1,2,False,'nvfp4',NVFP4_8B,False,'mlperf-v5.1-l8b-gb300-nvidia'),
 ('5.1','NVIDIA','theia_ngpu72_ngc25.09_nemo','llama31_8b','GB300',18,'NVIDIA/benchmarks/llama31_8b/implementations/nemo/config_GB300_18x4x1xtp1pp1cp2_8b.sh',1,1,None,2,1,False,'fp8',F8_TW,False,'mlperf-v5.1-l8b-gb300-nvidia'),
 ('5.1','NVIDIA','theia_ngpu512_ngc25.09_nemo','llama31_8b','GB300',128,'NVIDIA/benchmarks/llama31_8b/implementations/nemo/config_GB300_128x4x1xtp2pp1cp4_8b.sh',2,1,None,4,1,True,'fp8',F8_TW+"; TP_COMM_OVERLAP",False,'mlperf-v5.1-l8b-gb300-nvidia'),
 ('5.1','Lambda','gb300_n18_ngc25.04_nemo','llama31_8b','GB300',18,'Lambda/benchmarks/llama31_8b/implementations/gb300_0922/config_GB300_18x4x1xtp1pp1cp2_8b.sh',1,1,None,2,1,False,'fp8',F8_TW+"; DOUBT: Lambda's config only sources config_GB200_18x4x1xtp1pp1cp2_8b.sh, which Lambda did not ship; values from NVIDIA's file of that name in the same round",False,None),
 ('5.1','Dell','1xXE9680Lx8B200-SXM-180GB','llama31_8b','B200',1,'Dell/benchmarks/llama31_8b/implementations/nemo/config_1xXE9680Lx8B200-SXM-180GB.sh',1,1,None,1,2,False,'nvfp4',NVFP4_8B,False,'mlperf-v5.1-l8b-b200-1node'),
 ('5.1','Dell','2xXE9680Lx8B200-SXM-180GB','llama31_8b','B200',2,'Dell/benchmarks/llama31_8b/implementations/nemo/config_2xXE9680Lx8B200-SXM-180GB_2x8x2xtp1pp1cp1_8b.sh',1,1,None,1,2,False,'fp8',F8_TW,False,None),
 ('5.1','Dell','2xXE9685Lx8B200-SXM-180GB','llama31_8b','B200',2,'Dell/benchmarks/llama31_8b/implementations/nemo/config_XE9685Lx8B200-SXM-180GB_2x8x2xtp1pp1cp1.sh',1,1,None,1,2,False,'fp8',F8_TW,False,None),
 ('5.1','Dell','1xXE9780x8B300-SXM-270GB','llama31_8b','B300',1,'Dell/benchmarks/llama31_8b/implementations/nemo/config_XE9780x8B300-SXM-270GB_1x8x2xtp1pp1cp1_8b.sh',1,1,None,1,2,False,'fp8',F8_TW,False,'mlperf-v5.1-l8b-b300-1node'),
 ('5.1','Lenovo','SR680aV3-8xB200_SXM_180GB','llama31_8b','B200',1,'Lenovo/benchmarks/llama31_8b/config_SR780aV3_SR680aV3_SR680aV4.sh',1,1,None,1,2,False,'nvfp4',NVFP4_8B,False,'mlperf-v5.1-l8b-b200-1node'),
 ('5.1','Lenovo','SR780aV3-8xB200_SXM_180GB','llama31_8b','B200',1,'Lenovo/benchmarks/llama31_8b/config_SR780aV3_SR680aV3_SR680aV4.sh',1,1,None,1,2,False,'nvfp4',NVFP4_8B,False,'mlperf-v5.1-l8b-b200-1node'),
 ('5.1','Lenovo','SR680aV4-8xB300_SXM','llama31_8b','B300',1,'Lenovo/benchmarks/llama31_8b/config_SR780aV3_SR680aV3_SR680aV4.sh',1,1,None,1,2,False,'nvfp4',NVFP4_8B+"; DOUBT: the log's submission_platform string reads 1xSR780aV3-8xB200_SXM_180GB although the result dir and systems JSON are the B300 system",False,'mlperf-v5.1-l8b-b300-1node'),
 ('5.1','Nebius','nebius_b200_n1','llama31_8b','B200',1,'Nebius/benchmarks/llama31_8b/configs/nebius_b200_n1/config_DGXB200_1x8x2xtp1pp1cp1_8b_fp4.sh',1,1,None,1,2,False,'nvfp4',NVFP4_8B,False,'mlperf-v5.1-l8b-b200-nebius'),
 ('5.1','Nebius','nebius_b200_n2','llama31_8b','B200',2,'Nebius/benchmarks/llama31_8b/configs/nebius_b200_n2/config_DGXB200_2x8x2xtp1pp1cp1_8b_fp4.sh',1,1,None,1,1,False,'nvfp4',NVFP4_8B,False,'mlperf-v5.1-l8b-b200-nebius'),
 ('5.1','Nebius','nebius_b200_n4','llama31_8b','B200',4,'Nebius/benchmarks/llama31_8b/configs/nebius_b200_n4/config_DGXB200_4x8x1xtp1pp1cp1_8b_fp4.sh',1,1,None,1,1,False,'nvfp4',NVFP4_8B,False,'mlperf-v5.1-l8b-b200-nebius'),
 ('5.1','Nebius','nebius_b300_n1','llama31_8b','B300',1,'Nebius/benchmarks/llama31_8b/configs/nebius_b300_n1/config_DGXB200_1x8x2xtp1pp1cp1_8b.sh',1,1,None,1,2,False,'nvfp4',NVFP4_8B+" (file name lacks _fp4 but it sets FP4=True)",False,'mlperf-v5.1-l8b-b300-1node'),
 ('5.1','Oracle','8xBM.GPU.B200.8','llama31_8b','B200',8,'Oracle/benchmarks/llama31_8b/config_DGXB200_8x8x1xtp1pp1cp2_8b.sh',1,1,None,2,1,False,'fp8',F8_TW,False,None),
 ('5.1','Supermicro','AS-4126GS-NBR-LCC','llama31_8b','B200',1,'Supermicro/benchmarks/llama31_8b/implementations/AS-4126GS-NBR-LCC/config_AS-4126GS-NBR-LCC_1x8x2xtp1pp1cp1_8b_fp4.sh',1,1,None,1,2,False,'nvfp4',NVFP4_8B,False,'mlperf-v5.1-l8b-b200-1node'),
 ('5.1','Supermicro','SYS-422GS-NBRT-LCC','llama31_8b','B200',1,'Supermicro/benchmarks/llama31_8b/implementations/SYS-422GS-NBRT-LCC/config_SYS-422GS-NBRT-LCC_1x8x2xtp1pp1cp1_8b_fp4.sh',1,1,None,1,2,False,'nvfp4',NVFP4_8B,False,'mlperf-v5.1-l8b-b200-1node'),
 ('5.1','Supermicro','AS-8126GS-NB3RT','llama31_8b','B300',1,'Supermicro/benchmarks/llama31_8b/implementations/AS-8126GS-NB3RT/config_DGXB200_1x8x2xtp1pp1cp1_8b.sh',1,1,None,1,2,False,'fp8',F8_TW+"; DOUBT: config chosen as the only 1-node 8-GPU config in this implementation dir (no README names it)",False,'mlperf-v5.1-l8b-b300-1node'),
 ('5.1','University-of-Florida','hpg.dgxb200x8.n1','llama31_8b','B200',1,'University-of-Florida/benchmarks/llama31_8b/implementations/hpg.dgxb200x8/config_DGXB200_1x8x2xtp1pp1cp1_8b.sh',1,1,None,1,2,False,'fp8',F8_TW+"; commons from b200_nemo dir",False,'mlperf-v5.1-l8b-b200-uf'),
 ('5.1','University-of-Florida','hpg.dgxb200x8.n2','llama31_8b','B200',2,'University-of-Florida/benchmarks/llama31_8b/implementations/hpg.dgxb200x8/config_DGXB200_2x8x2xtp1pp1cp1_8b.sh',1,1,None,1,2,False,'fp8',F8_TW+"; commons from b200_nemo dir",False,'mlperf-v5.1-l8b-b200-uf'),
 ('5.1','University-of-Florida','hpg.dgxb200x8.n4','llama31_8b','B200',4,'University-of-Florida/benchmarks/llama31_8b/implementations/hpg.dgxb200x8/config_DGXB200_4x8x1xtp1pp1cp2_8b.sh',1,1,None,2,1,False,'fp8',F8_TW+"; commons from b200_nemo dir",False,'mlperf-v5.1-l8b-b200-uf'),
 ('5.1','University-of-Florida','hpg.dgxb200x8.n8','llama31_8b','B200',8,'University-of-Florida/benchmarks/llama31_8b/implementations/hpg.dgxb200x8/config_DGXB200_8x8x1xtp1pp1cp2_8b.sh',1,1,None,2,1,False,'fp8',F8_TW+"; commons from b200_nemo dir",False,'mlperf-v5.1-l8b-b200-uf'),
 ('5.1','University-of-Florida','hpg.dgxb200x8.n16','llama31_8b','B200',16,'University-of-Florida/benchmarks/llama31_8b/implementations/hpg.dgxb200x8/config_DGXB200_16x8x1xtp1pp1cp2_8b.sh',1,1,None,2,1,False,'fp8',F8_TW+"; commons from b200_nemo dir",False,'mlperf-v5.1-l8b-b200-uf'),
 ('5.1','University-of-Florida','hpg.dgxb200x8.n32','llama31_8b','B200',32,'University-of-Florida/benchmarks/llama31_8b/implementations/hpg.dgxb200x8/config_DGXB200_32x8x1xtp1pp1cp2_8b.sh',1,1,None,2,1,False,'fp8',F8_TW+"; commons from b200_nemo dir",False,'mlperf-v5.1-l8b-b200-uf'),
 ('5.1','Verda','b200_8x8_ngc25.09','llama31_8b','B200',8,'Verda/benchmarks/llama31_8b/implementations/b200_8x8_ngc25.09/config_DGXB200_8x8x1xtp1pp1cp2_8b.sh',1,1,None,2,1,False,'fp8',F8_TW,False,None),
 ('5.1','Cisco','hpf_n8','llama31_8b','H100',8,'Cisco/benchmarks/llama31_8b/implementations/nemo/config_DGXH100_8x8x1xtp1pp1cp1.sh',1,1,None,1,1,None,'fp8',"fp8: FP8=True, FP8_PARAMS=True (recipe not set in the file: NeMo default)",False,'mlperf-v5.1-l8b-h100-cisco'),
 ('5.1','Cisco','hpf_n16','llama31_8b','H100',16,'Cisco/benchmarks/llama31_8b/implementations/nemo/config_DGXH100_16x8x1xtp2pp1cp1.sh',2,1,None,1,1,None,'fp8',"fp8: FP8=True, FP8_PARAMS=True (recipe not set in the file: NeMo default); TP_COMM_OVERLAP",False,'mlperf-v5.1-l8b-h100-cisco'),
]

def mllog(txt):
    for line in txt.splitlines():
        if ':::MLLOG' not in line: continue
        try: yield json.loads(line.split(':::MLLOG', 1)[1])
        except Exception: pass

def dockerinfo(v, cfg):
    d = os.path.dirname(cfg)
    for _ in range(4):
        t = git(v, 'show', f'HEAD:{d}/Dockerfile')
        if t:
            a = dict(re.findall(r'^ARG (\w+)=(\S+)', t, re.M))
            return d + '/Dockerfile', a
        d = os.path.dirname(d)
    return None, {}

def kernels(v, cfg):
    """stack.attention / stack.compiled as the submission's own files say (None where they say nothing), with the evidence.
    v3.0 (NeMo 1.17 + Transformer Engine release_v0.8): TE 0.8's DotProductAttention runs flash_attn_unpadded_func from the
    flash-attn package for causal bf16/fp16 attention on sm80+ unless NVTE_FLASH_ATTN=0, and the submission pins
    flash_attn==1.0.5 (FlashAttention-1, not modelled); its conf/megatron_gpt_config.yaml turns the elementwise fusions on.
    v4.0 on: the config chain keeps Transformer Engine's cuDNN fused attention on (the 'Disable cuDNN fused attention'
    line is commented out, or NVTE_FUSED_ATTN=1 is set) -> the part's best fused kernel."""
    d = os.path.dirname(cfg)
    if v == '3.0':
        req = git(v, 'show', f'HEAD:{d}/requirements.txt')
        dock = git(v, 'show', f'HEAD:{d}/Dockerfile')
        conf = git(v, 'show', f'HEAD:{d}/conf/megatron_gpt_config.yaml')
        fa = re.search(r'^flash_attn==(\S+)', req, re.M)
        te = re.search(r'^ARG TE_REVISION=(\S+)', dock, re.M)
        assert fa and fa.group(1).startswith('1.') and te and te.group(1) == 'release_v0.8', (cfg, fa, te)
        fus = [k for k in ('bias_activation_fusion', 'bias_dropout_add_fusion', 'masked_softmax_fusion', 'persist_layer_norm')
               if re.search(rf'^\s*{k}: True', conf, re.M)]
        assert len(fus) == 4, (cfg, fus)
        scripts = [f for f in git(v, 'ls-tree', '--name-only', 'HEAD', d + '/').split('\n') if f.endswith(('.sh', '.sub'))]
        assert not any('NVTE_FLASH_ATTN' in git(v, 'show', f'HEAD:{f}') for f in scripts), d
        return 'flash1', True, (f"attention: FlashAttention-1 ({d}/requirements.txt flash_attn=={fa.group(1)}; Dockerfile "
                                f"TE_REVISION={te.group(1)}, whose DotProductAttention calls flash-attn's flash_attn_unpadded_func "
                                f"for causal bf16 attention on sm80+; NVTE_FLASH_ATTN not set); fused elementwise ops "
                                f"(conf/megatron_gpt_config.yaml: {', '.join(k + ' True' for k in fus)})")
    for cand in (d, os.path.join(os.path.dirname(d), 'b200_nemo')):
        files = [f for f in git(v, 'ls-tree', '--name-only', 'HEAD', cand + '/').split('\n') if f.endswith('.sh')]
        txt = {f: git(v, 'show', f'HEAD:{f}') for f in files}
        assert not any(re.search(r'^\s*export NVTE_FUSED_ATTN=0', t, re.M) for t in txt.values()), cand
        on = [f for f, t in txt.items() if re.search(r'^\s*export NVTE_FUSED_ATTN=1', t, re.M)]
        kept = [f for f, t in txt.items() if re.search(r'^\s*#\s*export NVTE_FUSED_ATTN=0\s*# Disable cuDNN fused attention', t, re.M)]
        if on or kept:
            ev = (f"{on[0]} sets NVTE_FUSED_ATTN=1" if on else
                  f"{kept[0]} keeps '#export NVTE_FUSED_ATTN=0 # Disable cuDNN fused attention' commented out")
            return 'flash', None, f"attention: Transformer Engine's cuDNN fused attention ({ev})"
    return None, None, None

def build():
    out = []
    for (v, org, sysd, bm, hw, nodes, cfg, tp, pp, vpp, cp, mbs, sp, prec, recipe, asym, sweep) in SUBS:
        files = [p for p in git(v, 'ls-tree', '-r', '--name-only', 'HEAD', f'{org}/results/{sysd}/{bm}/').split('\n')
                 if re.search(r'/result_[^/]*\.txt$', p)]
        steps, blocks, runs, info = [], [], [], {}
        for p in sorted(files):
            ev = list(mllog(git(v, 'show', f'HEAD:{p}')))
            rs = []; bstart = None
            for j in ev:
                k = j['key']
                if k in ('global_batch_size', 'max_sequence_length', 'gradient_accumulation_steps', 'submission_platform'):
                    info[k] = j['value']
                if k == 'tracked_stats':
                    val = j['value']
                    for kk in ('train_step_time', 'train_step_timing in s', 'train_step_timing'):
                        if kk in val: rs.append(val[kk])
                if k == 'block_start': bstart = j
                if k == 'block_stop' and bstart is not None and 'epoch_count' in j.get('metadata', {}):
                    blocks.append((j['time_ms'] - bstart['time_ms']) / 1000.0 / (j['metadata']['epoch_count']))
                    bstart = None
            if rs:
                steps += rs; runs.append(statistics.median(rs))
        gbs, seq = int(info['global_batch_size']), int(info['max_sequence_length'])
        ngpu = nodes * HW[hw][1]
        dp = ngpu // (tp * pp * cp)
        ga = float(info.get('gradient_accumulation_steps', 0))
        assert dp * mbs * ga == gbs, (sysd, dp, mbs, ga, gbs)
        if steps:
            st = statistics.median(steps)
            how = (f"step_time_s = median of {len(steps)} per-step MLLOG tracked_stats "
                   f"'{'train_step_time' if v.startswith('5') else ('train_step_timing' if v == '3.0' else 'train_step_timing in s')}' values over {len(runs)} result_*.txt runs "
                   f"(per-run medians {min(runs):.3f}-{max(runs):.3f} s)")
        else:
            st = statistics.median(blocks) * gbs * seq
            how = (f"no per-step timing in these logs: step_time_s = median over {len(blocks)} training blocks of "
                   f"(block_stop.time_ms - block_start.time_ms) / (epoch_count tokens / (global_batch*seq_len)) ; blocks exclude eval")
        tps = gbs * seq / st / ngpu
        dfile, da = dockerinfo(v, cfg)
        ver = '; '.join(f'{k}={da[k]}' for k in ('FROM_IMAGE_NAME', 'NEMO_REVISION', 'MCORE_REVISION', 'MEGATRON_REVISION', 'TE_REVISION') if k in da) or None
        attn, compiled, kev = kernels(v, cfg)
        unknown = []
        model = dict(MODELS[bm])
        if sp is None: unknown.append('parallel.sequence_parallel')
        if vpp is None and pp > 1: unknown.append('parallel.vpp')
        ps = None
        if asym:
            ps = {"first_stage_layers": None, "last_stage_layers": None, "embedding_as_layer": True, "loss_as_layer": True,
                  "layout": f"Megatron-Core account_for_embedding_in_pipeline_split + account_for_loss_in_pipeline_split (config ASYM_PP_EMBED=True, ASYM_PP_LOSS=True): {model['layers']} decoder layers + embedding + loss counted as {model['layers']+2} units split evenly over PP{pp} x VPP{vpp} chunks"}
        sid = re.sub(r'[^a-z0-9]+', '-', f"{org}-{sysd}".lower()).strip('-')
        rid = f"mlpt{v.replace('.', '')}-{bm.replace('llama31_', 'l')}-{sid}"
        bench_name = {'gpt3': 'GPT-3 175B', 'llama31_405b': 'Llama 3.1 405B', 'llama31_8b': 'Llama 3.1 8B'}[bm]
        rec = {
            "id": rid,
            "source": f"MLPerf Training v{v} results (closed division)",
            "source_url": f"https://github.com/mlcommons/training_results_v{v}/tree/main/{org}/results/{sysd}/{bm}",
            "model": model, "seq_len": seq,
            "cluster": {"gpu": HW[hw][0], "num_gpus": ngpu, "gpus_per_node": HW[hw][1]},
            "parallel": {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": 1, "etp": 1, "vpp": vpp if pp > 1 else 1,
                         "sequence_parallel": sp, "fsdp": False, "distributed_optimizer": True},
            "batch": {"micro_batch": mbs, "global_batch": gbs},
            "recompute": "none", "precision": prec,
            "measured": {"tflops_per_gpu": None, "flops_basis": "model", "mfu": None,
                         "tokens_per_s_per_gpu": round(tps, 1), "step_time_s": round(st, 4), "attention_flops": None},
            "unknown": unknown,
            "stack": {"framework": "nemo", "version": ver, "kernels": "transformer-engine",
                      "notes": (f"{recipe}; container/revisions from {dfile}" if dfile else recipe) + (f"; {kev}" if kev else "")},
            "sweep": sweep, "pipeline_split": ps,
            "source_locator": f"mlcommons/training_results_v{v}@{commit(v)[:12]}: {org}/results/{sysd}/{bm}/result_*.txt (MLLOG global_batch_size={gbs}, max_sequence_length={seq}, gradient_accumulation_steps={info.get('gradient_accumulation_steps')}, submission_platform='{info.get('submission_platform')}'); layout from {cfg}",
            "notes": (f"{how}. tokens_per_s_per_gpu = global_batch {gbs} x seq_len {seq} / step_time / {ngpu} GPUs (unit conversion). "
                      f"Layout: {nodes} nodes x {HW[hw][1]} GPUs; TP{tp} PP{pp} CP{cp} VPP{vpp} MBS{mbs} -> DP {dp}, grad-accum {ga:g} (matches the log). " +
                      (f"Recompute: ACT_CKPT_GRANULARITY=null in config_common.sh, passed to model.activations_checkpoint_granularity by run_and_time.sh. " if v == '3.0' else
                       f"Recompute: no ACT_CKPT_* set in the config chain and conf/custom.yaml defaults activations_checkpoint_granularity to null. ") +
                      f"Distributed optimizer: USE_DIST_OPTIMIZER=True. {ARCH_NOTE[bm]}. The benchmark trains from a checkpoint/initial state to a target quality; step time is for steady-state training steps, eval excluded.")
        }
        if attn is not None: rec["stack"]["attention"] = attn
        if compiled is not None: rec["stack"]["compiled"] = compiled
        out.append(rec)
    return out

if __name__ == '__main__':
    recs = build()
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'records.jsonl'), 'w') as f:
        for r in recs: f.write(json.dumps(r) + '\n')
    for r in recs: print(r['id'], r['cluster']['gpu'], r['cluster']['num_gpus'], r['precision'], r['measured']['step_time_s'], r['measured']['tokens_per_s_per_gpu'])
