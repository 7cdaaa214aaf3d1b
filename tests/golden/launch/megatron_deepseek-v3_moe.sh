# Megatron-LM pretrain_gpt.py arguments (they follow `pretrain_gpt.py \` in a launcher): deepseek-v3 on 256 x h100-sxm-80gb: tp=2 pp=1 vpp=1 dp=128 cp=1 ep=64 etp=1, mbs=1 gbs=1024 seq=4096
# Data, tokenizer (vocabulary 129280), optimizer, learning-rate and checkpoint arguments are not part of the plan: add your own.
# The model spec has no rotary base or scaling, norm epsilon or initialisation: add the model's own (Megatron-LM's defaults otherwise apply).
# Router settings (load-balancing loss, score function, capacity factor) are not part of the plan: add the model's own.
# Set CUDA_DEVICE_MAX_CONNECTIONS=1: Megatron-LM requires it with tp > 1 or cp > 1 (before Blackwell).
--num-layers 61 \
--hidden-size 7168 \
--ffn-hidden-size 18432 \
--num-attention-heads 128 \
--multi-latent-attention \
--q-lora-rank 1536 \
--kv-lora-rank 512 \
--qk-head-dim 128 \
--qk-pos-emb-head-dim 64 \
--v-head-dim 128 \
--seq-length 4096 \
--max-position-embeddings 4096 \
--swiglu \
--normalization RMSNorm \
--position-embedding-type rope \
--disable-bias-linear \
--untie-embeddings-and-output-weights \
--attention-dropout 0 \
--hidden-dropout 0 \
--num-experts 256 \
--moe-router-topk 8 \
--moe-ffn-hidden-size 2048 \
--moe-shared-expert-intermediate-size 2048 \
--moe-layer-freq '([0]*3+[1]*58)' \
--moe-grouped-gemm \
--moe-token-dispatcher-type alltoall \
--tensor-model-parallel-size 2 \
--pipeline-model-parallel-size 1 \
--context-parallel-size 1 \
--sequence-parallel \
--expert-model-parallel-size 64 \
--expert-tensor-parallel-size 1 \
--micro-batch-size 1 \
--global-batch-size 1024 \
--recompute-granularity full \
--recompute-method uniform \
--recompute-num-layers 1 \
--use-distributed-optimizer \
--overlap-grad-reduce \
--overlap-param-gather \
--bf16 \
--fp8-format hybrid \
--fp8-amax-history-len 1024 \
--fp8-amax-compute-algo max \
--attention-backend fused
