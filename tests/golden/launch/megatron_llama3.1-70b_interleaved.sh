# Megatron-LM pretrain_gpt.py arguments (they follow `pretrain_gpt.py \` in a launcher): llama3.1-70b on 64 x h100-sxm-80gb: tp=8 pp=4 vpp=5 dp=2 cp=1 ep=1 etp=1, mbs=1 gbs=128 seq=8192
# Data, tokenizer (vocabulary 128256), optimizer, learning-rate and checkpoint arguments are not part of the plan: add your own.
# The model spec has no rotary base or scaling, norm epsilon or initialisation: add the model's own (Megatron-LM's defaults otherwise apply).
# Set CUDA_DEVICE_MAX_CONNECTIONS=1: Megatron-LM requires it with tp > 1 or cp > 1 (before Blackwell).
--num-layers 80 \
--hidden-size 8192 \
--ffn-hidden-size 28672 \
--num-attention-heads 64 \
--group-query-attention \
--num-query-groups 8 \
--seq-length 8192 \
--max-position-embeddings 8192 \
--swiglu \
--normalization RMSNorm \
--position-embedding-type rope \
--disable-bias-linear \
--untie-embeddings-and-output-weights \
--attention-dropout 0 \
--hidden-dropout 0 \
--tensor-model-parallel-size 8 \
--pipeline-model-parallel-size 4 \
--num-layers-per-virtual-pipeline-stage 4 \
--context-parallel-size 1 \
--sequence-parallel \
--micro-batch-size 1 \
--global-batch-size 128 \
--recompute-granularity selective \
--use-distributed-optimizer \
--overlap-grad-reduce \
--overlap-param-gather \
--bf16 \
--attention-backend flash
