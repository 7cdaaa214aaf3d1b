#include "simulator/cost/memory_cost.h"

#include <algorithm>

#include "core/units.h"
#include "simulator/cost/compute_cost.h"

namespace parallax {

MemoryBreakdown parameter_memory(const ParallelPlan& p, double dense_params, double expert_params,
                                 int expert_dp, double largest_layer_params) {
  MemoryBreakdown m;
  const double dense_shard = static_cast<double>(p.dp) * p.cp;
  const double edp = std::max(1, expert_dp);
  auto sharded = [&](double bytes_per_param, bool shard) {
    return bytes_per_param * (shard ? dense_params / dense_shard + expert_params / edp
                                    : dense_params + expert_params);
  };
  if (p.fsdp) {
    m.weights_bytes = sharded(4, true);
    m.grads_bytes = sharded(4, true);
    m.optimizer_bytes = sharded(8, true);
    m.buffers_bytes = 2 * 2 * largest_layer_params;
    // With pipeline parallelism FSDP2 keeps the stage's parameters gathered between
    // microbatches (no reshard after forward) and accumulates unsharded bf16 gradients until the
    // last microbatch: 2 + 2 bytes per parameter of the stage.
    if (p.pp > 1) m.buffers_bytes += 4 * (dense_params + expert_params);
  } else {
    // Gradients are reduced once per step (simulate's data-parallel sync), so with several
    // microbatches they accumulate in a full fp32 buffer until then, whatever the stage (as
    // Megatron's grad buffer does); likewise ZeRO-3 under pipelining keeps the stage's bf16
    // weights gathered across microbatches (its per-layer gathers run only without pipelining).
    const bool accumulates = p.num_microbatches() > 1;
    const bool gathered_stage = p.zero_stage >= 3 && p.pp > 1;
    // Mixed precision: bf16 weights, fp32 gradients, and an fp32 master copy beside Adam's two
    // moments (12 bytes). An fp32 plan trains the fp32 weights themselves: 4 + 4 + 8.
    const bool fp32 = p.precision == Precision::kFp32;
    const double weight = fp32 ? 4 : 2;
    m.weights_bytes = sharded(weight, p.zero_stage >= 3 && !gathered_stage);
    m.grads_bytes = sharded(4, p.zero_stage >= 2 && !accumulates);
    m.optimizer_bytes = sharded(fp32 ? 8 : 12, p.zero_stage >= 1);
    if (p.zero_stage >= 3 && !gathered_stage) m.buffers_bytes = 2 * weight * largest_layer_params;
  }
  if (is_block_scaled(p.precision)) {
    // The quantized weight copies the block-scaled GEMMs read, row-wise and column-wise, kept
    // across a step's microbatches (of every weight a rank holds unsharded, or of the gathered
    // layers under FSDP / ZeRO-3); the stage's embedding and norms are counted too.
    const bool per_layer = (p.fsdp || p.zero_stage >= 3) && p.pp == 1;
    const double params = per_layer ? 2 * largest_layer_params : dense_params + expert_params;
    m.buffers_bytes += 2 * operand_bytes(p.precision, true) * params;
  }
  return m;
}

double optimizer_step_time_s(const HwProfile& hw, double params_in_shard, Precision p) {
  // See the header; an fp32 plan has no bf16 copy to write: 32.
  const double bytes = p == Precision::kFp32 ? 32.0 : 34.0;
  return bytes * params_in_shard / (hw.hbm_bw_gbps * kGB * hw.hbm_efficiency);
}

}  // namespace parallax
