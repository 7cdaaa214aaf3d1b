#pragma once
/// The request-level serving simulator (in the manner of Vidur): requests arrive, a vLLM-style
/// continuous-batching scheduler (scheduler.h) forms one batch a step, and a caller-supplied
/// cost function prices each step, so the same loop serves any hardware cost model.
///
/// Replicas: the requests, in arrival order (ties by input position), go round-robin to
/// `replicas` independent engines (request k to replica k % replicas), each with its own clock,
/// scheduler and KV cache; there is no load balancing on queue length and nothing is shared.
///
/// One engine: the clock starts at 0. When the engine has nothing running or waiting, it jumps to
/// the next arrival. Before each step every request that has arrived by the current time joins
/// WAITING; the step lasts cost(batch) seconds and its sampled tokens appear at its end. So:
/// - first scheduled = start of the first step that computes any of its tokens;
/// - first token = end of the step that completes its prefill;
/// - TTFT = first token - arrival; queueing = first scheduled - arrival; e2e = finish - arrival;
/// - TPOT = (finish - first token) / (output_len - 1), undefined for output_len = 1 (excluded);
/// - ITL = every gap between consecutive tokens of a request (a preemption's stall included).

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "core/result.h"
#include "simulator/serving/scheduler.h"
#include "simulator/serving/workload.h"

namespace parallax::serving {

struct ServeConfig {
  SchedulerConfig scheduler;  ///< of every replica
  int replicas = 1;           ///< independent engines, fed round-robin
  /// Pipeline stages of a replica. With more than one the engine keeps that many steps in
  /// flight (vLLM V1's batch queue for pipeline parallelism), priced stage by stage (StageCost).
  int pipeline_stages = 1;
};

/// Seconds one engine step takes on one replica (finite, >= 0), from the hardware cost model.
/// In the batches simulate_serving passes, ScheduledSeq::request is the request's position in the
/// input vector (not its id), so a callback can index its own per-request data.
using IterationCost = std::function<double(const IterationBatch&)>;

/// The seconds each pipeline stage of one replica spends on a step, stage 0 first (a stage's
/// time includes sending its activations to the next), written into `stage_s`, one entry a
/// stage (finite, >= 0). Same ScheduledSeq::request convention as IterationCost.
using StageCost = std::function<void(const IterationBatch&, std::vector<double>* stage_s)>;

/// Latency targets for goodput; 0 = no limit.
struct SloSpec {
  double ttft_s = 0;  ///< time to first token at most this
  double tpot_s = 0;  ///< time per output token at most this (output_len 1: always met)
};

/// Summary of a sample. Percentiles interpolate linearly between the sorted values (numpy's
/// default): p-th = v[lo] + (pos - lo) * (v[lo + 1] - v[lo]) with pos = p * (count - 1),
/// lo = floor(pos). All zero when empty.
struct Stats {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
  int64_t count = 0;
};

/// Stats of `values` in O(n) (selection, not a full sort).
Stats summarize(std::vector<double> values);

/// A sample stored as runs (value, how many times it occurs); a run of count 0 is empty. In a
/// decode step every request that sampled at the previous step's end sees the same gap, so one
/// run a step holds most inter-token latencies.
using Runs = std::vector<std::pair<double, int64_t>>;

/// Stats of the sample the runs expand to, as summarize() would give; O(r log r) in runs.
Stats summarize_runs(Runs runs);

/// What happened to one request; times in seconds on the simulation clock.
struct RequestRecord {
  int64_t id = 0;   ///< Request::id
  int replica = 0;  ///< the engine that produced its last token (disaggregated: decode replica)
  /// The engine that computed its prompt and first token: replica when colocated, the prefill
  /// replica when disaggregated (pd_sim.h).
  int prefill_replica = 0;
  int64_t prompt_len = 0, output_len = 0;
  double arrival_s = 0, first_scheduled_s = 0, first_token_s = 0, finish_s = 0;
  int64_t preemptions = 0;  ///< times its KV was dropped and recomputed
};

/// One engine step, for a Chrome trace.
struct IterationRecord {
  int replica = 0;  ///< within its pool
  int pool = 0;     ///< 0: a colocated engine or a disaggregated prefill engine; 1: decode engine
  int lane = 0;     ///< pipelined engines: the step's slot among those in flight (steps % stages)
  double start_s = 0, duration_s = 0;  ///< from its first stage's start to its last stage's end
  int64_t prefill_tokens = 0, decode_tokens = 0;
  int64_t num_seqs = 0;        ///< requests computing tokens in the step
  int64_t running_seqs = 0;    ///< requests in the running list after planning
  int64_t kv_blocks_used = 0;  ///< after the step's allocation
};

struct ServeResult {
  std::vector<RequestRecord> requests;  ///< in the order of the input vector
  double duration_s = 0;                ///< first arrival to last finish
  double requests_per_s = 0;            ///< finished requests / duration (0 when duration is 0)
  double output_tokens_per_s = 0;
  double total_tokens_per_s = 0;  ///< (prompt + output tokens) / duration
  Stats ttft_s, tpot_s, itl_s, e2e_s, queue_s;
  /// KV blocks used / num_gpu_blocks: mean weighted by step duration (a pipelined step: its mean
  /// stage time) over every step of every replica (a plain mean when all steps cost 0), and the
  /// maximum over steps.
  double kv_utilization_mean = 0, kv_utilization_max = 0;
  int64_t preemptions = 0;  ///< total over requests
  int64_t iterations = 0;   ///< steps, all replicas
  /// Prefix caching, over every engine: tokens found in the cache at admission and their share
  /// of the tokens looked up (vLLM's prefix cache hit rate); 0 without prefix caching.
  int64_t prefix_hit_tokens = 0;
  double prefix_cache_hit_rate = 0;
  /// Requests meeting every SLO given, per second of duration.
  double goodput_requests_per_s = 0;
  /// With keep_iterations; by start, then pool, then replica.
  std::vector<IterationRecord> iteration_records;
};

// The building blocks the serving simulations share (simulate_serving below, and
// simulate_disaggregated in pd_sim.h): one engine's loop and the statistics over all engines.

/// Every problem of the requests' fields (arrival finite and >= 0, lengths >= 1) and of `slo`.
Diagnostics validate_requests(const std::vector<Request>& requests, const SloSpec& slo);

/// One request's clocks on the simulation clock, seconds; -1 = not yet.
struct RequestClock {
  double first_scheduled = -1, first_token = -1, last_token = -1;
  int64_t preemptions = 0;               ///< over every engine it ran on
  int replica = 0, prefill_replica = 0;  ///< as RequestRecord's; the caller sets them
};

/// What the engines of one simulation record, over all their steps.
struct EngineTimeline {
  std::vector<RequestClock> clock;  ///< by position in the input vector
  Runs itl;                         ///< every inter-token gap, all requests
  double kv_weighted = 0, kv_plain = 0, busy_s = 0, kv_max = 0;
  int64_t iterations = 0;
  int64_t prefix_query_tokens = 0, prefix_hit_tokens = 0;
  std::vector<IterationRecord> records;  ///< with keep_iterations, in each engine's order

  explicit EngineTimeline(size_t n) : clock(n) {}
};

/// One engine and its work: requests[mine[k]] may join its WAITING queue from ready_s[k]
/// (non-decreasing in k); `admit(scheduler, position)` queues it, with Request::id = position.
struct EngineWork {
  int replica = 0, pool = 0;  ///< stamped on IterationRecords
  const SchedulerConfig* config = nullptr;
  const IterationCost* cost = nullptr;  ///< one stage; or:
  const StageCost* stages = nullptr;    ///< `pipeline_stages` stages (takes precedence)
  int pipeline_stages = 1;
  std::vector<size_t> mine;
  std::vector<double> ready_s;
  std::function<void(Scheduler&, size_t)> admit;
};

/// Runs one engine as the header comment describes (the clock starts at 0, jumps to the next
/// ready request when idle; each step lasts cost(batch) and its tokens appear at its end),
/// stamping the requests' clocks in `tl`: first scheduled and first token only when not yet set
/// (-1), every later token as an inter-token gap from the last one. Error: a cost that is
/// negative or not finite.
///
/// Pipelined (pipeline_stages = S > 1), as vLLM V1's engine core runs its batch queue: while
/// fewer than S steps are in flight and the scheduler plans a non-empty step, the step is
/// launched at the current time; otherwise the engine waits for the oldest step in flight,
/// applies it at its end (its tokens appear then) and moves the clock there. A step enters
/// stage s when it has left stage s - 1 and the previous step has left stage s. With S = 1 this
/// is the loop above.
Result<bool> run_engine(const EngineWork& work, bool keep_iterations, EngineTimeline* tl);

/// The result of a finished timeline: per-request records from the clocks, the statistics
/// defined above, goodput against `slo`; moves the ITL runs and iteration records out of `tl`.
/// `requests` must be non-empty, each with its clocks stamped.
ServeResult summarize_timeline(const std::vector<Request>& requests, const SloSpec& slo,
                               EngineTimeline& tl);

/// Positions of `requests` in arrival order, ties by position.
std::vector<size_t> arrival_order(const std::vector<Request>& requests);

/// Simulates serving `requests` (any order) on `config.replicas` engines, pricing each step with
/// `cost`. Errors, all at once, before simulating: an invalid config, a request with bad fields,
/// a request that can never fit one replica's KV cache (naming it, its block need and the
/// capacity). During the simulation: a cost that is negative or not finite.
/// The loop costs O(scheduled seqs) a step besides `cost`; with 10k requests it runs in
/// milliseconds.
Result<ServeResult> simulate_serving(const std::vector<Request>& requests,
                                     const ServeConfig& config, const IterationCost& cost,
                                     const SloSpec& slo = {}, bool keep_iterations = false);

/// The seconds of one step that every replica takes at once (wide expert parallelism):
/// batches[r] is replica r's step, null when it has nothing to run. Same ScheduledSeq::request
/// convention as IterationCost.
using LockstepCost = std::function<double(const std::vector<const IterationBatch*>& batches)>;

/// Runs engines that step together on one clock (the replicas of a wide-ep deployment or pool):
/// works[r] is replica r with its requests, ready times and admit (as run_engine's); before each
/// step every replica takes what is ready, every replica with work plans a step and the others
/// join empty (null in `cost`'s batches); the step lasts cost(batches). Error: a cost that is
/// negative or not finite. Every work must have pipeline_stages 1.
Result<bool> run_lockstep(const std::vector<EngineWork>& works, const LockstepCost& cost,
                          bool keep_iterations, EngineTimeline* tl);

/// Serving on replicas that step together (wide expert parallelism: every MoE layer's
/// all-to-alls join all of them). Requests go round-robin to the replicas as in
/// simulate_serving, each replica has its own scheduler and KV cache, and one clock drives
/// them all: before each step every replica takes the requests that have arrived; every
/// replica with work plans a step, the others join empty; the step lasts cost(batches) and its
/// tokens appear at its end. When no replica has work the clock jumps to the next arrival.
/// Iterations and KV statistics count each replica's non-empty steps. Errors as
/// simulate_serving's; config.pipeline_stages must be 1.
Result<ServeResult> simulate_lockstep(const std::vector<Request>& requests,
                                      const ServeConfig& config, const LockstepCost& cost,
                                      const SloSpec& slo = {}, bool keep_iterations = false);

/// The same with each step priced stage by stage on config.pipeline_stages stages (which may
/// be 1). Also an error: a cost giving another number of stages.
Result<ServeResult> simulate_serving(const std::vector<Request>& requests,
                                     const ServeConfig& config, const StageCost& cost,
                                     const SloSpec& slo = {}, bool keep_iterations = false);

}  // namespace parallax::serving
