#pragma once
/// The deployment planner: every way to serve a model on N GPUs of one profile (tensor and
/// pipeline degrees of a replica, replicas, expert parallelism, engine limits), each simulated
/// request by request (simulator/serving) on the same synthetic workload and ranked by what it
/// delivers under latency targets on the 90th percentile.
///
/// Search space: tp over the divisors of N within one scale-up domain, pp in pp_grid, dp =
/// N / (tp * pp) (tp * pp must divide N), ep in {1, tp} for a MoE model and, with pp 1 and
/// dp >= 2, tp * dp (wide: the experts over every GPU, the replicas stepping together; split into
/// P/D pools, each pool's experts over its own GPUs, where both pools' ep divide the experts and
/// their KV caches hold a request), max_num_seqs x
/// max_num_batched_tokens over their grids (max_num_batched_tokens >= max_num_seqs), chunked
/// prefill on. Candidates failing serving::check_deployment, serving::kv_budget or whose KV cache
/// cannot hold one request are pruned and counted by reason.
///
/// Prefill/decode disaggregation (search_pd): every layout (tp, pp, dp, ep) with dp >= 2 is also
/// run as each split P + D = dp (P, D >= 1) of its replicas into P prefill and D decode engines
/// with the same engine limits in both pools, as `parallax serve --pd P:D` simulates it
/// (serving::simulate_disaggregated, the KV moved in serving::kv_transfer_time), and scored and
/// ranked exactly as the colocated candidates. To keep the search time within ~1.5x of the
/// colocated one (a disaggregated simulation costs about twice a colocated one), the splits are
/// not crossed with the whole engine grid: each layout keeps the max_num_seqs of its first-ranked
/// colocated candidate (the decode pool's batch), and every max_num_batched_tokens of the grid
/// (the prefill pool's step, whose trade-off disaggregation changes) is tried with it.
///
/// Ranking: candidates meeting the SLO (p90 TTFT <= ttft_p90_s and p90 TPOT <= tpot_p90_s; 0 = no
/// limit) first, by output tokens/s per GPU, then lower p90 TTFT, then the layout; the others
/// after them by how far they miss. Max-load mode then runs every candidate saturated (all
/// requests at once), bisects for a few (the best-saturating engine limits of each layout, P/D
/// split included, first) the highest Poisson rate that still meets the SLO, and ranks those
/// first by it. Deterministic: candidates are simulated independently (in parallel) and sorted by
/// total keys (the layout, the split, the engine limits).

#include <cstdint>
#include <string>
#include <vector>

#include "core/hw_profile.h"
#include "core/model_spec.h"
#include "core/result.h"
#include "planner/launch/serve_launch.h"
#include "planner/plan_space.h"
#include "simulator/serving/step_cost.h"

namespace parallax {

/// The synthetic load every candidate serves: `requests` Poisson arrivals at `rate_per_s`
/// (serving::poisson_requests with `seed`), each `prompt_len` tokens in, `output_len` out.
struct ServeWorkload {
  int64_t requests = 2000;
  double rate_per_s = 4;  ///< requests/s; 0: all at once
  int64_t prompt_len = 1024, output_len = 256;
  uint64_t seed = 1;
  /// Shared prompt prefix (serving::assign_shared_prefixes): tokens, and how many distinct ones.
  int64_t prefix_len = 0, prefix_groups = 1;
};

/// Latency targets on the 90th percentile, seconds; 0 = no limit.
struct ServeSlo {
  double ttft_p90_s = 0;
  double tpot_p90_s = 0;
  bool any() const { return ttft_p90_s > 0 || tpot_p90_s > 0; }
};

/// The question: serve `model` on `gpus` x `hw` under `workload` and `slo`.
struct ServePlanRequest {
  ModelSpec model;
  HwProfile hw;
  int gpus = 8;
  ServeWorkload workload;
  ServeSlo slo;
  Precision precision = Precision::kBf16;
  double gpu_memory_utilization = 0.9;  ///< of every candidate (vLLM's default)
  int block_size = 16;                  ///< KV-cache block, tokens
  int tp = 0, pp = 0;                   ///< pinned degrees; 0: searched
  std::vector<int> pp_grid = {1, 2, 4, 8};
  std::vector<int64_t> max_num_seqs_grid = {64, 128, 256, 512};
  std::vector<int64_t> max_num_batched_tokens_grid = {2048, 8192, 16384};
  bool search_pd = true;  ///< also the prefill/decode splits of the dp >= 2 layouts
};

struct ServePlanOptions {
  bool max_load = false;  ///< also bisect the highest rate meeting the SLO
  /// How many candidates to bisect, by saturation rate (every request at once, which bounds the
  /// rate each can sustain): the best of each layout (tp, pp, dp, ep, P/D split) first, then the
  /// others.
  int max_load_top = 8;
  int bisection_steps = 8;
  int threads = 0;  ///< 0: TBB's default
};

/// One simulated deployment.
struct ServeCandidate {
  serving::Deployment deployment;  ///< layout and engine limits
  /// Chunked prefill, GPU count, and the P/D split: engine.prefill_replicas prefill and
  /// deployment.dp - engine.prefill_replicas decode replicas (0: colocated).
  ServeEngineSettings engine;
  /// Disaggregated only: the mean KV transfer of the requests that reach the decode pool, s.
  double kv_transfer_mean_s = 0;
  int64_t kv_tokens = 0;           ///< KV-cache capacity of one replica, tokens
  double output_tokens_per_s = 0;  ///< all replicas
  double output_tokens_per_s_per_gpu = 0;
  double ttft_p90_s = 0, tpot_p90_s = 0;
  double goodput_requests_per_s = 0;  ///< requests meeting both limits, per second
  bool meets = false;                 ///< p90 TTFT and p90 TPOT within the SLO
  /// How far the worse p90 is from its limit: max(p90 / limit) - 1 over the limits given
  /// (<= 0 when met).
  double miss = 0;
  /// Max-load mode, bisected candidates only (load_searched): the highest rate found to meet the
  /// SLO (0 when even the lowest rate tried misses) and the lowest found to miss it (0 when
  /// capped).
  bool load_searched = false;
  double max_rate_per_s = 0, failing_rate_per_s = 0;
  bool max_rate_capped = false;      ///< the upper bound itself met the SLO
  double saturation_rate_per_s = 0;  ///< max-load: requests/s with every request at once
};

struct ServePlanResult {
  std::vector<ServeCandidate> ranked;  ///< best first
  /// Enumerated: layout x ep x engine limits, plus the P/D splits (pd_candidates).
  int64_t candidates = 0;
  int64_t pd_candidates = 0;       ///< of `candidates`, disaggregated (each simulated)
  std::vector<PruneCount> pruned;  ///< by reason, in the order the rules apply
  int64_t simulated = 0;           ///< simulations run, bisection included
  int64_t load_simulations = 0;    ///< of those, max-load's (saturation and bisection)
};

/// Searches and ranks. Errors: an invalid request (GPU count, workload, SLO, grids, pinned
/// degrees that do not divide the GPUs), --max-load without an SLO, or (where "serve-plan")
/// no candidate surviving the pruning, with the counts by reason.
Result<ServePlanResult> search_deployments(const ServePlanRequest& r,
                                           const ServePlanOptions& opt = {});

/// Simulates one deployment on the request's workload at `rate_per_s` and scores it, colocated
/// (prefill_replicas = 0) or disaggregated into prefill_replicas prefill and dp - prefill_replicas
/// decode replicas; the deployment must pass check_deployment and kv_budget, and the split must
/// leave each pool a replica (errors otherwise).
Result<ServeCandidate> simulate_deployment(const ServePlanRequest& r, const serving::Deployment& d,
                                           double rate_per_s, int prefill_replicas = 0);

/// "tp4 pp1 dp2" (" ep4" for expert parallelism, " pd1:1" for prefill_replicas = 1 of dp 2).
std::string deployment_label(const serving::Deployment& d, int prefill_replicas = 0);

/// What was searched and pruned by reason, the winner against the runner-up and why.
std::string explain_serve_plan(const ServePlanRequest& r, const ServePlanResult& s);

}  // namespace parallax
