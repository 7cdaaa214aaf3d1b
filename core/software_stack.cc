#include "core/software_stack.h"

#include <array>

namespace parallax {
namespace {

constexpr StackKernels kMegatron{
    "megatron-lm",
    AttentionImpl::kFlash,
    false,
    true,
    false,
    CpComm::kRing,
    false,
    0.1,
    "Megatron-LM with Transformer Engine: TE's fused attention (cuDNN / FlashAttention-3 on "
    "Hopper) and fused norms; --recompute-granularity selective recomputes the attention core; "
    "--scatter-gather-tensors-in-pipeline on by default; context parallelism as TE's P2P ring"};

constexpr StackKernels kTorchTitan{
    "torchtitan",
    AttentionImpl::kFlash2,
    true,
    false,
    true,
    CpComm::kAllGather,
    true,
    0.0,
    "TorchTitan: SDPA (FlashAttention-2 kernel), torch.compile off unless asked (eager), "
    "activation_checkpoint.mode selective as per-op SAC, context_parallel_rotate_method "
    "'allgather' by default, pipeline microbatches = local batch / stages by default"};

/// Every framework a record may name but `other`.
constexpr std::array kStacks = {
    kMegatron,
    StackKernels{"nemo", AttentionImpl::kFlash, false, true, false, CpComm::kRing, false, 0.1,
                 "NeMo trains through Megatron-Core with Transformer Engine: Megatron-LM's stack"},
    StackKernels{"megatron-deepspeed", AttentionImpl::kFlash, false, true, false, CpComm::kRing,
                 false, 0.1,
                 "Megatron-DeepSpeed keeps Megatron-LM's model code and pipeline sends"},
    kTorchTitan,
    StackKernels{"fsdp", AttentionImpl::kFlash2, true, false, true, CpComm::kAllGather, true, 0.0,
                 "plain PyTorch FSDP training loops: SDPA, eager PyTorch ops, PyTorch's "
                 "checkpointing, as TorchTitan"},
    StackKernels{"deepspeed", AttentionImpl::kFlash2, true, false, true, CpComm::kAllGather, false,
                 0.0,
                 "DeepSpeed runs the model's own PyTorch code (Hugging Face models: SDPA or "
                 "flash-attn 2, eager elementwise ops); its pipeline engine sends whole tensors"},
    StackKernels{"nanotron", AttentionImpl::kFlash2, false, false, true, CpComm::kRing, false, 0.0,
                 "nanotron: flash-attn 2 kernels (flash_attn_varlen_func), fused RMSNorm and "
                 "rotary from flash-attn's Triton/CUDA ops; its pipeline engine sends whole "
                 "tensors"},
    StackKernels{"picotron", AttentionImpl::kFlash2, true, false, true, CpComm::kRing, false, 0.0,
                 "picotron: flash-attn 2 attention around plain PyTorch modules (eager)"},
    StackKernels{"colossalai", AttentionImpl::kFlash2, false, false, true, CpComm::kRing, false,
                 0.0, "Colossal-AI: flash-attn 2 and its own fused kernels (fused norms, rotary)"},
    StackKernels{"maxtext", AttentionImpl::kFlash, false, false, true, CpComm::kAllGather, false,
                 0.0,
                 "MaxText on GPU: cuDNN flash attention through Transformer Engine's JAX "
                 "bindings, elementwise ops fused by XLA, remat policies per op, context "
                 "parallelism by all-gathering K and V"},
};

}  // namespace

const StackKernels* find_stack_kernels(const std::string& framework) {
  for (const auto& s : kStacks)
    if (framework == s.framework) return &s;
  return nullptr;
}

const StackKernels& pytorch_fsdp_stack() { return kTorchTitan; }
const StackKernels& megatron_stack() { return kMegatron; }

}  // namespace parallax
