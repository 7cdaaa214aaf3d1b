#pragma once
/// PlanSpace: every layout of a model on a cluster for one batch and sequence length, with the
/// rules real frameworks enforce applied during enumeration, each counting what it rejected.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/parallel_plan.h"
#include "planner/launch/launch.h"

namespace parallax {

/// The training frameworks the planner checks a plan against (check_launch): Megatron-LM,
/// TorchTitan and DeepSpeed. torchrun and Slurm launch Megatron-LM and add no rule of their own.
const std::vector<LaunchTarget>& training_frameworks();

/// HBM the planner leaves free beyond the simulated peak, which already holds the profile's
/// runtime reserve (reserved_gib: CUDA context, library workspaces, NCCL buffers): PyTorch's
/// caching allocator reserves more than it hands out. 10%: a logged PyTorch OOM held 15.5 GiB
/// reserved but unallocated beside 124 GiB allocated (11%, NovaSky-AI/SkyRL PR 1470); GMLake
/// (ASPLOS'24, arXiv 2401.08156) measured 15% fragmentation on average over 8 LLMs without
/// expandable segments, which remove only part of it; each extra NCCL communicator holds
/// 0.5-0.7 GB more (NVIDIA/nccl issue 964, A100). vLLM reserves the same 10% by default
/// (gpu_memory_utilization 0.9).
inline constexpr double kDefaultMemoryHeadroom = 0.10;

/// What the user pins or bounds. 0 (or nullopt) leaves a dimension free.
struct PlanConstraints {
  int tp = 0, pp = 0, dp = 0, cp = 0, ep = 0, etp = 0, vpp = 0, mbs = 0;
  std::optional<int> zero;
  std::optional<bool> fsdp, sequence_parallel;
  std::optional<Recompute> recompute;
  std::optional<ScheduleKind> schedule;
  std::optional<CpComm> cp_comm;
  /// The software stack, pinned by the user; otherwise each framework's own (framework_stack).
  std::optional<AttentionImpl> attention;
  std::optional<bool> eager, overlap_tp_comm, overlap_grad_reduce, overlap_param_gather;
  int max_tp = 0, max_pp = 0, max_cp = 0, max_vpp = 0, max_mbs = 0;  ///< 0: no limit
  bool tp_across_domains = false;  ///< allow tp beyond one NVLink (scale-up) domain
  double memory_headroom = kDefaultMemoryHeadroom;  ///< fraction of HBM to leave free, 0..0.9
  /// Keep only plans that one of these frameworks runs (check_launch), each simulated with
  /// that framework's stack and with every switch it has searched. Empty: every layout, at the
  /// settings' stack (the theoretical best, which no framework may run).
  std::vector<LaunchTarget> frameworks = training_frameworks();
};

/// `settings` as framework `f` runs them, for what the user has not pinned: its attention kernel
/// (Megatron-LM: Transformer Engine's fused kernel, the part's fastest; TorchTitan and DeepSpeed's
/// Hugging Face models: PyTorch SDPA, FlashAttention-2 on Hopper), eager or fused elementwise ops
/// (DeepSpeed runs the model's eager PyTorch; TorchTitan's config enables torch.compile), and the
/// overlap switches it does not have (TorchTitan's FSDP2 and DDP always overlap the gradient
/// reduction and the parameter gather).
ParallelPlan framework_stack(LaunchTarget f, const PlanConstraints& c, ParallelPlan settings);

/// The frameworks of `c.frameworks` (all training frameworks when it is empty) that run `p`
/// exactly as it is simulated: check_launch accepts it and `p` has the framework's stack.
std::vector<LaunchTarget> frameworks_running(const ModelSpec& m, const Cluster& cluster,
                                             const ParallelPlan& p, const PlanConstraints& c);

/// The question: train `model` on `cluster` with this batch and sequence. `settings` carries
/// what is not searched (precision, attention kernel, overlap switches); its layout fields are
/// ignored.
struct PlanRequest {
  ModelSpec model;
  Cluster cluster;
  int64_t global_batch = 0;  ///< sequences per step
  int64_t seq_len = 0;
  ParallelPlan settings;
  PlanConstraints constraints;
};

/// Why a layout or a candidate was left out; `count` of them. Structural rules reject degree
/// combinations (tp x cp x pp x dp x ep x etp); setting rules reject full candidates.
struct PruneCount {
  std::string rule;
  int64_t count = 0;
};

struct PlanSpaceResult {
  std::vector<ParallelPlan> candidates;  ///< in a fixed order (deterministic)
  int64_t layouts_considered = 0;        ///< degree combinations before the structural rules
  int64_t layouts_kept = 0;
  std::vector<PruneCount> pruned;  ///< rules in the order they are applied, zero counts omitted
};

/// Checks the request itself (GPU count, batch, sequence, constraint ranges); every problem.
Diagnostics validate_request(const PlanRequest& r);

/// Enumerates the space. The request and its model must be valid (validate_request,
/// validate_model).
PlanSpaceResult enumerate_plans(const PlanRequest& r);

}  // namespace parallax
