#pragma once
/// The adapters between the scheduler and the step cost model: what one engine step computes
/// (scheduler.h's IterationBatch) as the shape the cost model prices (step_cost.h's StepShape),
/// and a deployment's engine settings as the simulator's configuration.

#include "simulator/serving/pd_sim.h"
#include "simulator/serving/scheduler.h"
#include "simulator/serving/serve_sim.h"
#include "simulator/serving/step_cost.h"

namespace parallax::serving {

/// Each prefill chunk with the context before it; each decode as one token attending to its
/// context and to itself (context_before + 1 tokens); the samplers of the batch.
StepShape step_shape(const IterationBatch& b);

/// `cost` pricing each step stage by stage (StepCost::stage_times); keeps a reference to `cost`.
StageCost stage_cost(const StepCost& cost);

/// `cost` (of a wide-ep deployment) pricing the replicas' steps together
/// (StepCost::lockstep_time_s); keeps a reference to `cost`.
LockstepCost lockstep_cost(const StepCost& cost);

/// The serving simulation of `d`: its dp replicas, each with the engine limits of `d` and
/// `num_gpu_blocks` KV blocks (kv_budget's), d.pp pipeline stages (price it with stage_cost).
ServeConfig engine_config(const Deployment& d, int64_t num_gpu_blocks, bool chunked_prefill = true,
                          int64_t long_prefill_token_threshold = 0);

/// The disaggregated simulation of `d`: its dp replicas split into `prefill_replicas` prefill and
/// `decode_replicas` decode engines (their sum is d.dp), both pools with the engine limits of `d`
/// (chunked prefill on) and `num_gpu_blocks` KV blocks (kv_budget's). A prefill pool with its own
/// step budget has its own blocks: build that pool from its own Deployment with engine_config.
PdConfig pd_config(const Deployment& d, int64_t num_gpu_blocks, int prefill_replicas,
                   int decode_replicas);

}  // namespace parallax::serving
