#pragma once
/// Lowering: a model and a plan become, for each virtual pipeline stage, the operators one rank
/// runs for one microbatch in forward, backward and recompute, with their FLOPs, bytes and times
/// (priced by cost/), plus the per-stage numbers the engine and the memory model need.

#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/parallel_plan.h"
#include "core/rank_map.h"
#include "simulator/cost/collective_cost.h"
#include "simulator/cost/compute_cost.h"

namespace parallax {

/// What a span of time on a rank is spent on; the breakdown of a step uses these.
enum class CostCategory {
  kCompute,
  kTpComm,
  kCpComm,
  kEpComm,
  kDpComm,
  kPpComm,
  kOptimizer,
  kBubble
};
const char* to_string(CostCategory c);
inline constexpr int kNumCategories = 8;

/// One operator instance on one rank for one microbatch. `time_s` is what it adds to the
/// compute stream: for communication that is the exposed part (after overlap).
struct OpCost {
  std::string name;
  CostCategory category = CostCategory::kCompute;
  double time_s = 0;  ///< exposed time on the compute stream
  double busy_s = 0;  ///< full duration on its own stream (== time_s for compute)
  double flops = 0;   ///< FLOPs executed
};

/// One pass (forward, backward, ...) of one microbatch through one virtual stage.
struct PassCost {
  std::vector<OpCost> ops;
  double time_s = 0;
  double flops = 0;
  double by_category[kNumCategories] = {};
  void add(OpCost op);
  /// Adds another pass's totals, and its ops when `keep_ops`.
  void merge(const PassCost& other, bool keep_ops);
};

struct StageCost {
  int virtual_stage = 0;
  int first_layer = 0, layers = 0;
  bool has_embedding = false, has_output = false;
  PassCost forward;
  PassCost backward;         ///< full backward, including recompute
  PassCost backward_input;   ///< zero-bubble B: recompute + input gradients
  PassCost backward_weight;  ///< zero-bubble W: weight gradients
  double dense_params =
      0;  ///< parameters on this rank for this chunk (dense part, incl. embedding)
  double expert_params = 0;             ///< routed-expert parameters on this rank for this chunk
  double act_bytes_per_microbatch = 0;  ///< stored for backward while a microbatch is in flight
  /// The part of it the weight-gradient GEMMs read (kept until W in zero-bubble schedules).
  double weight_input_bytes_per_microbatch = 0;
  double transient_bytes = 0;  ///< working memory beyond stored activations
  double p2p_bytes = 0;        ///< activation message to the next stage per microbatch
};

/// Per-layer activation bytes stored for backward per microbatch on one rank (for tests and
/// reports): Korthikanti et al. 2022 generalised to GQA/SwiGLU/MoE and flash attention; in an
/// MXFP8 or NVFP4 layer the linear layers keep quantized copies of their inputs instead.
double layer_activation_bytes(const ModelSpec& m, const ParallelPlan& p, int layer);

/// The part of layer_activation_bytes that the weight-gradient GEMMs read: the inputs of the
/// linear layers (both norm outputs, the attention output, the MLP activation output, MLA's
/// latents); all of it under full recompute, where the layer input is all that is stored.
double layer_weight_input_bytes(const ModelSpec& m, const ParallelPlan& p, int layer);

/// Lowers every virtual stage (pp * vpp of them, in model order). Each kind of layer (dense,
/// MoE; and under NVFP4 the bf16 layers its recipe keeps at the model's ends apart) is lowered
/// once and repeated. Without `keep_ops` the passes carry totals only (the
/// planner's bounds and untraced simulations need nothing else). `use`, when given, counts where
/// the costs came from (measured tables or the analytical model).
std::vector<StageCost> lower_stages(const ModelSpec& m, const ParallelPlan& p, const HwProfile& hw,
                                    const RankMap& ranks, bool keep_ops = true,
                                    TableUse* use = nullptr);

/// FLOPs of one training step of the whole model under a counting convention:
/// attention `causal` halves the score/value products; `with_recompute` adds recomputed work.
double step_flops(const ModelSpec& m, const ParallelPlan& p, bool causal, bool with_recompute);

}  // namespace parallax
