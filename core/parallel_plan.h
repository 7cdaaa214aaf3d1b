#pragma once
/// ParallelPlan: a layout (tp, pp, dp, cp, ep, etp, vpp) and the training settings that go with it.
/// Cluster: a hardware profile and a GPU count.

#include <compare>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>

#include "core/hw_profile.h"
#include "core/model_spec.h"
#include "core/result.h"

namespace parallax {

/// Activation recomputation: none; selective (Megatron: only the attention core is recomputed);
/// selective-op (PyTorch's per-op selective checkpointing as TorchTitan runs it, `mode =
/// "selective"`, `selective_ac_option = "op"`: the outputs of every other matmul and of attention
/// are saved, everything else is recomputed); full (only each layer's input is kept).
enum class Recompute { kNone, kSelective, kSelectiveOp, kFull };
/// Pipeline schedules: 1F1B (PipeDream-Flush), interleaved 1F1B (Megatron virtual stages),
/// ZB-H1 (Qi et al. 2024: backward split into input-gradient B and weight-gradient W), and
/// DualPipe (DeepSeek-V3, arXiv 2412.19437 Sec. 3.2.1: microbatches fed from both ends of the
/// pipeline, each rank holding two stages, forward and backward chunks of two microbatches
/// overlapped).
enum class ScheduleKind { k1F1B, kInterleaved1F1B, kZeroBubbleH1, kDualPipe };
/// How tokens reach their experts, Megatron-LM's --moe-token-dispatcher-type: an all-to-all over
/// the expert-parallel group (NCCL, one copy per routed expert); an all-gather of every token over
/// the expert tensor x expert parallel ranks and a reduce-scatter back; or flex, DeepEP's fused
/// kernels (one copy per destination rank, sent once per destination node over RDMA and forwarded
/// over NVLink inside it).
enum class MoeDispatcher { kAllToAll, kAllGather, kFlex };
/// How context-parallel ranks exchange K and V: a ring of point-to-point transfers hidden behind
/// attention (Megatron's default), or one all-gather before attention (and a reduce-scatter of
/// their gradients after backward).
enum class CpComm { kRing, kAllGather };
/// The attention kernel: fused flash attention (no s x s matrix) at the best the part runs it
/// (FlashAttention-3 or cuDNN on Hopper, as Transformer Engine picks); FlashAttention-2, which
/// PyTorch's scaled_dot_product_attention runs on Hopper (no WGMMA/TMA, so slower there, the
/// same kernel as `flash` on Ampere), called as TorchTitan calls it, with K and V repeated to the
/// query heads first; or the unfused path of older stacks (batched QK^T GEMM,
/// softmax over the materialised s x s scores, batched PV GEMM); or FlashAttention-1 (the
/// fused kernel of 2022-mid 2023 stacks), at half FlashAttention-2's rate.
enum class AttentionImpl { kFlash, kFlash2, kUnfused, kFlash1 };

struct ParallelPlan {
  int tp = 1, pp = 1, dp = 1, cp = 1;
  int ep = 1;           ///< expert parallel, laid over dp x cp x tp (Megatron MoE parallel folding)
  int etp = 1;          ///< expert tensor parallel
  int vpp = 1;          ///< virtual stages (model chunks) per pipeline rank
  int micro_batch = 1;  ///< sequences per microbatch
  int64_t global_batch = 0;  ///< sequences per optimizer step
  int64_t seq_len = 0;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
  int zero_stage = 0;  ///< 0: none, 1: distributed optimizer, 2: + gradients, 3: + parameters
  bool fsdp = false;   ///< PyTorch FSDP2 (ZeRO-3, parameters regathered for backward)
  ScheduleKind schedule = ScheduleKind::k1F1B;
  Precision precision = Precision::kBf16;
  CpComm cp_comm = CpComm::kRing;
  AttentionImpl attention = AttentionImpl::kFlash;
  bool overlap_grad_reduce = true;   ///< DP gradient reduction overlapped with backward
  bool overlap_param_gather = true;  ///< ZeRO/FSDP parameter all-gather overlapped with compute
  bool overlap_tp_comm = false;      ///< TP communication overlapped with GEMMs (TE comm overlap)
  /// The input gradient's TP reduce-scatter (all-reduce without SP) launched asynchronously
  /// beside the weight-gradient GEMM, as Megatron runs it; false: it blocks (the CPU executor).
  bool async_tp_grad = true;
  /// Pipeline sends split over the TP ranks without SP (Megatron-LM's scatter/gather, its
  /// default before Megatron-Core): each rank sends 1/tp of the activation between stages and
  /// the receiving ranks all-gather it over their scale-up links.
  bool pp_scatter_gather = false;
  /// Elementwise ops as PyTorch eager runs them: one kernel per ATen op, RMSNorm and rotary
  /// embeddings upcast to fp32 (TorchTitan without torch.compile). Otherwise fused kernels, as
  /// Megatron with Transformer Engine or torch.compile run them.
  bool eager = false;
  /// Routed token copies on the busiest expert-parallel rank over the mean (1: even routing).
  /// Every rank waits for that one at the combine all-to-all, so its expert GEMMs and received
  /// tokens set the layer's time and activation memory; at most ep (all on one rank).
  double moe_imbalance = 1.0;
  MoeDispatcher moe_dispatcher = MoeDispatcher::kAllToAll;
  /// Node-limited routing (DeepSeek-V3: each token to experts on at most 4 nodes): the most
  /// scale-up domains of the expert-parallel group one token's copies reach; 0 = as the model's
  /// own group-limited routing (RouterSpec groups) allows, or unlimited.
  int moe_max_nodes = 0;
  /// Expert capacity over the mean load (--moe-expert-capacity-factor): copies beyond it are
  /// dropped, so it bounds the busiest rank; 0 = dropless.
  double moe_capacity_factor = 0;
  /// Expert-parallel communication of one microbatch overlapped with another's compute (Megatron's
  /// --overlap-moe-expert-parallel-comm: its combined 1F1B pairs a forward with a backward).
  bool overlap_moe_comm = false;

  int gpus() const { return tp * pp * dp * cp; }
  int64_t num_microbatches() const {
    return global_batch / (static_cast<int64_t>(dp) * micro_batch);
  }
  /// Parameter (and gradient) sharding degree under ZeRO-3/FSDP, or 1.
  bool shards_params() const { return fsdp || zero_stage >= 3; }
  bool shards_grads() const { return fsdp || zero_stage >= 2; }
  bool shards_optimizer() const { return fsdp || zero_stage >= 1; }
  /// Field by field, in declaration order (plans as set keys).
  auto operator<=>(const ParallelPlan&) const = default;
};

struct Cluster {
  HwProfile hw;
  int num_gpus = 0;
};

/// Bounds of a layout, far above any run (the largest clusters hold about 10^5 GPUs, Llama 3
/// trained 16M-token batches and 128K contexts): a value beyond them is a typo, and simulating it
/// would exhaust memory or minutes instead of answering.
inline constexpr int kMaxGpus = 1 << 20;
inline constexpr int64_t kMaxSeqLen = int64_t{1} << 25;
inline constexpr int64_t kMaxGlobalBatch = int64_t{1} << 24;
/// The schedule holds each micro-batch's forward and backward on every stage.
inline constexpr int64_t kMaxMicrobatches = int64_t{1} << 16;
/// Whether the product of positive degrees stays within kMaxGpus (computed without overflow). The
/// simulator and planner count ranks in `int`; under this bound a rank index times a small factor
/// (2*cp, a group's stride times its size) stays inside it.
bool within_max_gpus(std::initializer_list<int> factors);

/// Names where a plan field came from, for diagnostics: a flag ("--tp") or a JSON path.
/// Fields: tp pp dp cp ep etp vpp mbs gbs seq sp zero schedule precision gpus.
using FieldLocator = std::function<std::string(const char* field)>;
/// "--tp", "--gbs", ...
FieldLocator flag_locator();
/// Paths of the scenario / measured-run format: prefix + "/parallel/tp", "/batch/global_batch",
/// "/seq_len", "/cluster/num_gpus", ...
FieldLocator json_locator(std::string prefix);

/// Checks that the plan fits the model and cluster; reports every problem, each located by `loc`.
Diagnostics validate_plan(const ModelSpec& m, const Cluster& c, const ParallelPlan& p,
                          const FieldLocator& loc = flag_locator());

/// Layers of each virtual stage: stage s (of pp*vpp, in model order) gets layers_of_stage(s).
/// Uneven counts put the `layers % stages` extra layers on the stages just before the last one,
/// which already runs the output layer and the loss; the first stage (embedding) gets one only
/// when every stage but the last does. (Megatron needs an even split unless told otherwise;
/// TorchTitan weighs the embedding and output as layers. Neither is modelled exactly.)
int layers_in_virtual_stage(const ModelSpec& m, const ParallelPlan& p, int virtual_stage);
int first_layer_of_virtual_stage(const ModelSpec& m, const ParallelPlan& p, int virtual_stage);

const char* to_string(Recompute r);
const char* to_string(ScheduleKind s);
const char* to_string(CpComm c);
const char* to_string(AttentionImpl a);
const char* to_string(MoeDispatcher d);

}  // namespace parallax
