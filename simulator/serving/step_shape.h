#pragma once
/// The adapters between the scheduler and the step cost model: what one engine step computes
/// (scheduler.h's IterationBatch) as the shape the cost model prices (step_cost.h's StepShape),
/// and a deployment's engine settings as the simulator's configuration.

#include "simulator/serving/scheduler.h"
#include "simulator/serving/serve_sim.h"
#include "simulator/serving/step_cost.h"

namespace parallax::serving {

/// Each prefill chunk with the context before it; each decode as one token attending to its
/// context and to itself (context_before + 1 tokens); the samplers of the batch.
StepShape step_shape(const IterationBatch& b);

/// The serving simulation of `d`: its dp replicas, each with the engine limits of `d` and
/// `num_gpu_blocks` KV blocks (kv_budget's).
ServeConfig engine_config(const Deployment& d, int64_t num_gpu_blocks, bool chunked_prefill = true,
                          int64_t long_prefill_token_threshold = 0);

}  // namespace parallax::serving
