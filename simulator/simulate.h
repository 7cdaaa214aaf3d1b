#pragma once
/// simulate(): one training step of a model on a cluster under a plan -> step time, throughput,
/// FLOP/s, memory per stage and a breakdown of where the time goes.

#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/parallel_plan.h"
#include "core/result.h"
#include "simulator/cost/memory_cost.h"
#include "simulator/engine.h"

namespace parallax {

struct SimulationOptions {
  FieldLocator locate = flag_locator();  ///< how plan errors name their fields
  bool full_ranks = false;               ///< simulate every rank instead of one per pipeline stage
  bool record_trace = false;             ///< keep per-op spans for a Chrome trace
};

struct StageReport {
  int pipeline_rank = 0;
  MemoryBreakdown memory;
  double busy_by_category[kNumCategories] = {};
};

struct StepReport {
  std::string model, hardware;
  ParallelPlan plan;
  int gpus = 0;
  double step_time_s = 0;
  double tokens_per_s = 0;
  double tokens_per_s_per_gpu = 0;
  double model_tflops_per_gpu = 0;     ///< fwd+bwd FLOPs with causal attention, no recompute
  double hardware_tflops_per_gpu = 0;  ///< what the GPUs execute, recompute included
  double mfu = 0, hfu = 0;             ///< over the dense peak of the plan's precision
  double peak_memory_gib = 0;          ///< the largest over pipeline stages
  double hbm_gib = 0;
  bool fits = false;
  double breakdown_s[kNumCategories] = {};  ///< of the busiest pipeline stage
  int critical_stage = 0;
  std::vector<StageReport> stages;
  std::vector<std::string> notes;
  EngineResult engine;
};

/// Validates inputs (every problem reported) and runs the simulation.
Result<StepReport> simulate(const ModelSpec& m, const Cluster& c, const ParallelPlan& p,
                            const SimulationOptions& opt = {});

/// What the planner learns about a plan without running the engine, from the same lowering,
/// setup and schedule order as simulate():
/// - peak_memory_gib equals simulate()'s (the activation peak depends on the order of passes
///   only, replayed with the engine's ActivationLedger);
/// - step_time_lower_s <= simulate()'s step time. For pipeline rank r with F_s, B_s the forward
///   and backward (zero-bubble: input-gradient) pass of virtual stage s, p the p2p time, W_r its
///   passes in schedule order and O_r its optimizer step:
///     head_r = sum_{s<r} (F_s + p)  (any forward on r follows virtual stages 0..r-1),
///     tail_r = sum_{s<r} (B_s + p)  (its last backward flows back through them),
///     bound  = max_r max(head_r + W_r + O_r, head_r + W_r[..last backward] + tail_r + O_0).
///   Communication, contention and data-parallel sync only add to it.
struct StepBounds {
  double step_time_lower_s = 0;
  double peak_memory_gib = 0;
};
Result<StepBounds> step_bounds(const ModelSpec& m, const Cluster& c, const ParallelPlan& p);

/// How many microbatches step_bounds replays: min(microbatches, 2 * pp); the rest run in the
/// steady state and only add their passes.
int64_t bounds_replay_microbatches(const ParallelPlan& p);
/// step_bounds with the replayed schedule built by the caller, so that a search can share one
/// among many plans: build_pipeline_schedule(p.schedule, p.pp, p.vpp,
/// bounds_replay_microbatches(p)).
Result<StepBounds> step_bounds(const ModelSpec& m, const Cluster& c, const ParallelPlan& p,
                               const std::vector<std::vector<PipelineOp>>& replay);

/// Parameter state (weights, gradients, optimizer, gathered-parameter buffers) plus the runtime
/// reserve on the fullest pipeline rank, in GiB: what no micro batch, recompute or schedule
/// setting changes, and a lower bound of the peak memory. The plan must be valid.
double state_memory_gib(const ModelSpec& m, const Cluster& c, const ParallelPlan& p);

}  // namespace parallax
