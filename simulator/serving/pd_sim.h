#pragma once
/// Disaggregated prefill/decode serving (vLLM's P/D disaggregation with a KV connector, as
/// SGLang, Dynamo and Mooncake also run it): one pool of engines computes prompts, another
/// decodes, and each request's KV cache moves from the first to the second.
///
/// Routing, as vLLM's disaggregation proxy does it: the requests, in arrival order (ties by
/// input position), go round-robin to the prefill replicas (request k to k % prefill_replicas)
/// and, independently, round-robin to the decode replicas (k % decode_replicas), both chosen at
/// arrival; there is no load balancing on queue length.
///
/// A prefill engine is the colocated engine of serve_sim.h (vLLM's scheduler, chunked prefill as
/// configured) with each request's output_len treated as 1: it computes the prompt and samples
/// the FIRST token, so first token = end of that step and TTFT = first token - arrival. The
/// request then leaves the prefill engine, its blocks freed at once (vLLM's connector keeps them
/// until the decode side has pulled them: not modelled).
///
/// Its KV then travels to its decode replica for kv_transfer_s(prompt_len) seconds, starting at
/// the first token. Transfers of different requests overlap freely: no link contention is
/// modelled. A request with output_len 1 is finished at its first token and never transferred.
///
/// A decode engine runs the same scheduler over the requests whose KV has arrived (in the order
/// of arrival there): each joins WAITING when its KV lands and is admitted first come first
/// served, with its prompt and first token already computed (Scheduler::add_prefilled): it
/// needs blocks for prompt_len + 1 tokens at admission and decodes output_len - 1 more tokens;
/// when the cache is full it waits. A preemption in the decode pool drops the KV as in vLLM, and
/// the decode engine recomputes prompt + outputs, a prefill priced by decode_cost.
///
/// Every RequestRecord field keeps serve_sim.h's meaning: first scheduled and first token from
/// the prefill engine, finish from the decode engine; replica = the decode replica,
/// prefill_replica = the prefill replica; preemptions over both pools. So TPOT =
/// (finish - first token) / (output_len - 1) includes the transfer and the decode queueing, as
/// users measure it, and the first inter-token gap holds them too. Iteration records carry
/// pool 0 (prefill) or 1 (decode); the KV utilization statistics are over the steps of both
/// pools, each as a fraction of its own engine's blocks.

#include <cstdint>
#include <functional>
#include <vector>

#include "core/hw_profile.h"
#include "core/result.h"
#include "simulator/serving/scheduler.h"
#include "simulator/serving/serve_sim.h"
#include "simulator/serving/workload.h"

namespace parallax::serving {

/// The two pools of a disaggregated deployment.
struct PdConfig {
  SchedulerConfig prefill;  ///< of every prefill replica
  SchedulerConfig decode;   ///< of every decode replica
  int prefill_replicas = 1;
  int decode_replicas = 1;
  /// Pipeline stages of every engine of both pools: with more than one each engine keeps that
  /// many steps in flight (serve_sim.h's run_engine), priced by a StageCost.
  int pipeline_stages = 1;
};

/// Seconds to move the KV cache of a prompt of `prompt_tokens` tokens from a prefill replica to
/// a decode replica (finite, >= 0).
using KvTransferTime = std::function<double(int64_t prompt_tokens)>;

/// The KV transfer of a deployment on `hw`: each of a replica's tp * pp GPUs sends its own shard,
/// kv_bytes_per_token_per_gpu (kv_budget's KvBudget::kv_bytes_per_token, per GPU over its layers)
/// x prompt tokens, to its peer GPU in the decode replica over the scale-out network, all GPUs at
/// once: t = sendrecv(bytes per GPU) on a pair of GPUs in two scale-up domains (CollectiveCost).
KvTransferTime kv_transfer_time(const HwProfile& hw, double kv_bytes_per_token_per_gpu);

/// Simulates serving `requests` (any order) disaggregated as the header comment describes,
/// pricing prefill steps with `prefill_cost` and decode steps with `decode_cost` (their
/// ScheduledSeq::request is the request's position in the input vector). Errors, all at once,
/// before simulating: an invalid config (where = "pd.prefill.<field>", "pd.decode.<field>",
/// "pd.prefill_replicas", "pd.decode_replicas"), a request with bad fields or an SLO below 0, a
/// request whose prompt can never fit a prefill replica or whose whole sequence can never fit a
/// decode replica. During the simulation: a step cost or a transfer time that is negative or not
/// finite.
Result<ServeResult> simulate_disaggregated(const std::vector<Request>& requests,
                                           const PdConfig& config,
                                           const IterationCost& prefill_cost,
                                           const IterationCost& decode_cost,
                                           const KvTransferTime& kv_transfer_s,
                                           const SloSpec& slo = {}, bool keep_iterations = false);

/// With each pool's replicas stepping together (wide expert parallelism inside each pool, as
/// simulate_lockstep runs one deployment): every prefill replica steps with the other prefill
/// replicas, every decode replica with the decode replicas. config.pipeline_stages must be 1.
Result<ServeResult> simulate_disaggregated(const std::vector<Request>& requests,
                                           const PdConfig& config, const LockstepCost& prefill_cost,
                                           const LockstepCost& decode_cost,
                                           const KvTransferTime& kv_transfer_s,
                                           const SloSpec& slo = {}, bool keep_iterations = false);

/// The same with every step priced stage by stage on config.pipeline_stages stages (which may be
/// 1; the IterationCost form needs 1). Also an error: a cost giving another number of stages.
Result<ServeResult> simulate_disaggregated(const std::vector<Request>& requests,
                                           const PdConfig& config, const StageCost& prefill_cost,
                                           const StageCost& decode_cost,
                                           const KvTransferTime& kv_transfer_s,
                                           const SloSpec& slo = {}, bool keep_iterations = false);

}  // namespace parallax::serving
