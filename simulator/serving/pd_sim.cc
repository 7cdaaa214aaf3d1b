#include "simulator/serving/pd_sim.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "core/text.h"
#include "simulator/cost/collective_cost.h"

namespace parallax::serving {
namespace {

/// The requests as the prefill pool sees them: one output token each.
std::vector<Request> prefill_only(const std::vector<Request>& requests) {
  std::vector<Request> out = requests;
  for (Request& r : out) r.output_len = 1;
  return out;
}

Diagnostics validate_inputs(const std::vector<Request>& requests, const PdConfig& config,
                            const SloSpec& slo) {
  Diagnostics out = validate_scheduler_config(config.prefill, "pd.prefill");
  Diagnostics more = validate_scheduler_config(config.decode, "pd.decode");
  out.insert(out.end(), more.begin(), more.end());
  auto at_least_one = [&](const char* where, int n) {
    if (n < 1) out.push_back({where, "must be >= 1, got " + std::to_string(n), ""});
  };
  at_least_one("pd.prefill_replicas", config.prefill_replicas);
  at_least_one("pd.decode_replicas", config.decode_replicas);
  at_least_one("pd.pipeline_stages", config.pipeline_stages);
  more = validate_requests(requests, slo);
  out.insert(out.end(), more.begin(), more.end());
  if (!out.empty()) return out;
  out = check_requests_fit(prefill_only(requests), config.prefill, "requests (prefill pool)");
  std::vector<Request> decoded;
  for (const Request& r : requests) {
    if (r.output_len >= 2) decoded.push_back(r);
  }
  more = check_requests_fit(decoded, config.decode, "requests (decode pool)");
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

/// When each request's KV lands on its decode replica (first token + transfer); -1 for those
/// that finish at their first token.
Result<std::vector<double>> kv_ready_times(const std::vector<Request>& requests,
                                           const EngineTimeline& tl,
                                           const KvTransferTime& kv_transfer_s) {
  std::vector<double> ready(requests.size(), -1);
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].output_len < 2) continue;
    const double dt = kv_transfer_s(requests[i].prompt_len);
    if (!std::isfinite(dt) || dt < 0) {
      return Diagnostic{"kv transfer time",
                        "must be finite and >= 0 seconds, got " + format_number("%g", dt) +
                            " for a prompt of " + std::to_string(requests[i].prompt_len) +
                            " tokens",
                        "request " + std::to_string(requests[i].id)};
    }
    ready[i] = tl.clock[i].first_token + dt;
  }
  return ready;
}

}  // namespace

KvTransferTime kv_transfer_time(const HwProfile& hw, double kv_bytes_per_token_per_gpu) {
  return [comm = CollectiveCost(hw), kv_bytes_per_token_per_gpu](int64_t tokens) {
    const double bytes = kv_bytes_per_token_per_gpu * static_cast<double>(tokens);
    return comm.time(CollectiveOp::kSendRecv, bytes, GroupShape{2, 1, 2}).time_s;
  };
}

namespace {

/// One pool's step prices: a one-stage cost, or stage by stage.
struct PoolCost {
  const IterationCost* step = nullptr;
  const StageCost* stages = nullptr;
  const LockstepCost* lockstep = nullptr;  ///< the pool's replicas step together (wide ep)
};

/// Runs a pool's engines: each alone, or all together when the pool steps in lockstep.
Result<bool> run_pool(std::vector<EngineWork>& works, const PoolCost& cost, bool keep_iterations,
                      EngineTimeline* tl) {
  if (cost.lockstep != nullptr) return run_lockstep(works, *cost.lockstep, keep_iterations, tl);
  for (EngineWork& w : works) {
    w.cost = cost.step;
    w.stages = cost.stages;
    Result<bool> ran = run_engine(w, keep_iterations, tl);
    if (!ran.ok()) return ran.errors();
  }
  return true;
}

Result<ServeResult> simulate_pools(const std::vector<Request>& requests, const PdConfig& config,
                                   PoolCost prefill_cost, PoolCost decode_cost,
                                   const KvTransferTime& kv_transfer_s, const SloSpec& slo,
                                   bool keep_iterations) {
  PX_CHECK(kv_transfer_s, "simulate_disaggregated: no transfer function");
  Diagnostics errors = validate_inputs(requests, config, slo);
  if (!errors.empty()) return errors;
  if (requests.empty()) return ServeResult{};
  const std::vector<size_t> order = arrival_order(requests);
  EngineTimeline tl(requests.size());
  const auto prefills = static_cast<size_t>(config.prefill_replicas);
  const auto decodes = static_cast<size_t>(config.decode_replicas);
  for (size_t k = 0; k < order.size(); ++k) {
    tl.clock[order[k]].prefill_replica = static_cast<int>(k % prefills);
    tl.clock[order[k]].replica = static_cast<int>(k % decodes);
  }

  // Prefill pool: independent of the decode pool (nothing flows back).
  std::vector<EngineWork> pool(prefills);
  for (size_t rep = 0; rep < prefills; ++rep) {
    EngineWork& work = pool[rep];
    work.replica = static_cast<int>(rep);
    work.pool = 0;
    work.config = &config.prefill;
    work.pipeline_stages = config.pipeline_stages;
    for (size_t k = rep; k < order.size(); k += prefills) {
      work.mine.push_back(order[k]);
      work.ready_s.push_back(requests[order[k]].arrival_s);
    }
    work.admit = [&requests](Scheduler& sched, size_t pos) {
      Request r = requests[pos];
      r.id = static_cast<int64_t>(pos);
      r.output_len = 1;
      sched.add(r);
    };
  }
  if (Result<bool> ran = run_pool(pool, prefill_cost, keep_iterations, &tl); !ran.ok())
    return ran.errors();

  Result<std::vector<double>> ready = kv_ready_times(requests, tl, kv_transfer_s);
  if (!ready.ok()) return ready.errors();
  const std::vector<double>& ready_s = ready.value();

  // Decode pool: each engine takes its requests in the order their KV lands (ties by arrival).
  std::vector<std::vector<size_t>> mine(decodes);
  for (size_t pos : order) {
    if (ready_s[pos] >= 0) mine[static_cast<size_t>(tl.clock[pos].replica)].push_back(pos);
  }
  pool.assign(decodes, EngineWork{});
  for (size_t rep = 0; rep < decodes; ++rep) {
    EngineWork& work = pool[rep];
    work.replica = static_cast<int>(rep);
    work.pool = 1;
    work.config = &config.decode;
    work.pipeline_stages = config.pipeline_stages;
    work.mine = std::move(mine[rep]);
    std::stable_sort(work.mine.begin(), work.mine.end(),
                     [&](size_t a, size_t b) { return ready_s[a] < ready_s[b]; });
    for (size_t pos : work.mine) work.ready_s.push_back(ready_s[pos]);
    work.admit = [&requests](Scheduler& sched, size_t pos) {
      Request r = requests[pos];
      r.id = static_cast<int64_t>(pos);
      sched.add_prefilled(r);
    };
  }
  if (Result<bool> ran = run_pool(pool, decode_cost, keep_iterations, &tl); !ran.ok())
    return ran.errors();
  return summarize_timeline(requests, slo, tl);
}

}  // namespace

Result<ServeResult> simulate_disaggregated(const std::vector<Request>& requests,
                                           const PdConfig& config,
                                           const IterationCost& prefill_cost,
                                           const IterationCost& decode_cost,
                                           const KvTransferTime& kv_transfer_s, const SloSpec& slo,
                                           bool keep_iterations) {
  PX_CHECK(prefill_cost && decode_cost, "simulate_disaggregated: missing a cost function");
  if (config.pipeline_stages != 1) {
    return Diagnostic{"pd.pipeline_stages",
                      "a one-stage step cost prices " + std::to_string(config.pipeline_stages) +
                          " stages, want 1",
                      "give StageCosts for pipelined engines"};
  }
  return simulate_pools(requests, config, {&prefill_cost, nullptr}, {&decode_cost, nullptr},
                        kv_transfer_s, slo, keep_iterations);
}

Result<ServeResult> simulate_disaggregated(const std::vector<Request>& requests,
                                           const PdConfig& config, const StageCost& prefill_cost,
                                           const StageCost& decode_cost,
                                           const KvTransferTime& kv_transfer_s, const SloSpec& slo,
                                           bool keep_iterations) {
  PX_CHECK(prefill_cost && decode_cost, "simulate_disaggregated: missing a cost function");
  return simulate_pools(requests, config, {nullptr, &prefill_cost}, {nullptr, &decode_cost},
                        kv_transfer_s, slo, keep_iterations);
}

Result<ServeResult> simulate_disaggregated(const std::vector<Request>& requests,
                                           const PdConfig& config, const LockstepCost& prefill_cost,
                                           const LockstepCost& decode_cost,
                                           const KvTransferTime& kv_transfer_s, const SloSpec& slo,
                                           bool keep_iterations) {
  PX_CHECK(prefill_cost && decode_cost, "simulate_disaggregated: missing a cost function");
  if (config.pipeline_stages != 1) {
    return Diagnostic{
        "pd.pipeline_stages",
        "pools stepping together run one stage, got " + std::to_string(config.pipeline_stages),
        "pp 1"};
  }
  return simulate_pools(requests, config, {nullptr, nullptr, &prefill_cost},
                        {nullptr, nullptr, &decode_cost}, kv_transfer_s, slo, keep_iterations);
}

}  // namespace parallax::serving
