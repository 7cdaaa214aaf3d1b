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

}  // namespace parallax
