#pragma once
/// Memory costs: bytes held per rank for weights, gradients and optimizer states under each
/// sharding, and the optimizer step's time. Activation bytes per layer live in lower.h
/// (layer_activation_bytes); their peak comes from the simulated timeline.

#include "core/hw_profile.h"
#include "core/parallel_plan.h"

namespace parallax {

struct MemoryBreakdown {
  double weights_bytes = 0;
  double grads_bytes = 0;
  double optimizer_bytes = 0;
  double activations_bytes = 0;  ///< peak stored activations + transient working memory
  double buffers_bytes = 0;      ///< communication buffers, gathered FSDP layers
  double reserved_bytes = 0;     ///< runtime context and fragmentation (from the profile)
  double total() const {
    return weights_bytes + grads_bytes + optimizer_bytes + activations_bytes + buffers_bytes +
           reserved_bytes;
  }
};

/// Parameter-state bytes of one rank holding `dense_params` (replicated over dp x cp) and
/// `expert_params` (replicated over the expert-data-parallel group `expert_dp`).
///   Megatron-style (bf16 params, fp32 grads, fp32 master + Adam m, v):
///     2 + 4 + 12 bytes/param; ZeRO-1 shards the 12, ZeRO-2 also the 4 (only with one
///     microbatch: gradients accumulate unsharded until the step's reduce-scatter), ZeRO-3 also
///     the 2 (only without pipelining: a pipeline stage stays gathered across microbatches).
///   FSDP2 (fp32 sharded params, fp32 sharded grads, Adam m, v): 4 + 4 + 8 bytes/param, all
///     sharded, plus two gathered bf16 layers (current and prefetched) in buffers; with pp > 1
///     the stage stays gathered (2) and accumulates unsharded bf16 gradients (2) across
///     microbatches.
///   MXFP8 / NVFP4 plans add the quantized weights' row-wise and column-wise copies to
///     buffers: 2 operand_bytes(p, weight) per parameter held (2.06 MXFP8, 1.01 NVFP4).
MemoryBreakdown parameter_memory(const ParallelPlan& p, double dense_params, double expert_params,
                                 int expert_dp, double largest_layer_params);

/// AdamW step over the local optimizer shard: memory-bound, reading param, grad, m, v (fp32) and
/// writing param, m, v and the bf16 copy, plus a gradient-norm pass:
///   bytes = 34 per parameter (16 read + 12 written + 2 bf16 copy + 4 for the norm); an fp32
///   plan trains its fp32 weights directly: 32.
double optimizer_step_time_s(const HwProfile& hw, double params_in_shard,
                             Precision p = Precision::kBf16);

}  // namespace parallax
