// Which MoE and pipeline settings of a plan each launch target runs: one row per framework.
//
// Megatron-LM core_v0.15 (megatron/training/arguments.py, transformer_config.py) runs the three
// token dispatchers (--moe-token-dispatcher-type allgather | alltoall | flex, flex with
// --moe-enable-deepep), token dropping (--moe-expert-capacity-factor), group-limited routing
// (--moe-router-num-groups / --moe-router-group-topk), the EP-overlapping combined 1F1B
// (--overlap-moe-expert-parallel-comm) and multi-token prediction (--mtp-num-layers). TorchTitan
// v0.2.2 runs all-to-all or DeepEP (parallelism.expert_parallel_comm_backend), main all-to-all
// only (its JobConfig has no such key), and neither drops tokens, limits nodes, overlaps that
// way nor has MTP. DeepSpeed's config holds no MoE setting.
// No target runs DualPipe: it is DeepSeek's own schedule (deepseek-ai/DualPipe is a reference
// implementation); torch.distributed.pipelining has DualPipeV, a different (V-shaped) schedule.

#include "planner/launch/emitters.h"

namespace parallax::launch {
namespace {

struct MoeSupport {
  LaunchTarget target;
  const char* name;
  bool allgather, flex, capacity, node_limit, overlap, mtp;
};

constexpr MoeSupport kSupport[] = {
    {LaunchTarget::kMegatron, "Megatron-LM", true, true, true, true, true, true},
    {LaunchTarget::kTorchrun, "Megatron-LM", true, true, true, true, true, true},
    {LaunchTarget::kSlurm, "Megatron-LM", true, true, true, true, true, true},
    {LaunchTarget::kTorchTitan, "TorchTitan", false, true, false, false, false, false},
    {LaunchTarget::kTorchTitanMain, "TorchTitan main", false, false, false, false, false, false},
    {LaunchTarget::kDeepSpeed, "DeepSpeed", false, false, false, false, false, false},
};

}  // namespace

void check_moe_support(LaunchTarget target, const LaunchRequest& r, RuleSink& sink) {
  const MoeSupport* s = nullptr;
  for (const MoeSupport& row : kSupport)
    if (row.target == target) s = &row;
  PX_CHECK(s, "no MoE support row for launch target " << to_string(target));
  const ParallelPlan& p = r.plan;
  const std::string name = s->name;
  if (p.schedule == ScheduleKind::kDualPipe)
    sink.refuse("schedule", name + " has no DualPipe schedule (DeepSeek's own pipeline schedule)",
                "use --schedule 1f1b, interleaved or zb-h1 to launch it");
  if (r.model.mtp_layers > 0 && !s->mtp)
    sink.refuse_at("model/mtp_layers",
                   name + " has no multi-token-prediction module, and the model has " +
                       std::to_string(r.model.mtp_layers),
                   "plan the main model (mtp_layers 0), or --target megatron");
  if (!r.model.moe || p.ep == 1) return;
  if (p.moe_dispatcher == MoeDispatcher::kAllGather && !s->allgather)
    sink.refuse("moe-dispatcher", name + " has no all-gather token dispatcher",
                "use --moe-dispatcher alltoall");
  if (p.moe_dispatcher == MoeDispatcher::kFlex && !s->flex)
    sink.refuse("moe-dispatcher", name + " has no DeepEP (flex) token dispatcher",
                "use --moe-dispatcher alltoall");
  if (p.moe_capacity_factor > 0 && !s->capacity)
    sink.refuse("moe-capacity-factor", name + " runs MoE layers without token dropping",
                "leave --moe-capacity-factor out (dropless)");
  if (p.moe_max_nodes > 0 && !s->node_limit)
    sink.refuse("moe-max-nodes", name + " has no node-limited routing flag",
                "leave --moe-max-nodes out");
  if (p.overlap_moe_comm && !s->overlap)
    sink.refuse("overlap-moe-comm",
                name +
                    " does not overlap expert-parallel communication with another "
                    "microbatch's compute",
                "leave --overlap-moe-comm out");
}

}  // namespace parallax::launch
