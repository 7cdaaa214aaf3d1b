// Google Benchmark: exhaustive layout search at cluster scale (the planner issues' targets:
// Llama-3.1 405B on 16,384 H100s in under 10 s, a 70B model on 1,024 GPUs in under 2 s, and
// every zoo model on its flagship cluster in under 10 s, on the 2-core development machine).
//   build/release/bench/parallax_bench --benchmark_filter=BM_PlanZooFlagship
#include <benchmark/benchmark.h>

#include <iterator>
#include <string>

#include "core/json_io.h"
#include "core/model_zoo.h"
#include "planner/search.h"

namespace parallax {
namespace {

void run_search(benchmark::State& state, const char* model, int gpus, int64_t gbs, int64_t seq,
                const char* gpu = "h100-sxm-80gb", Precision precision = Precision::kBf16) {
  PlanRequest r;
  r.model = find_zoo_model(model, "bench").value();
  r.cluster = {find_profile(builtin_profiles().value(), gpu, "bench").value(), gpus};
  r.global_batch = gbs;
  r.seq_len = seq;
  r.settings.precision = precision;
  SearchOptions opt;
  opt.top_k = 5;
  Result<SearchResult> last = Diagnostic{"bench", "not run", ""};
  for (auto _ : state) {
    last = search_plans(r, opt);
    benchmark::DoNotOptimize(last);
  }
  if (!last) {
    state.SkipWithError(last.error_text().c_str());
    return;
  }
  state.counters["candidates"] = static_cast<double>(last->stats.candidates);
  state.counters["simulated"] = static_cast<double>(last->stats.simulated);
  state.counters["best_step_s"] = last->top.front().report.step_time_s;
}

// 16M tokens per step: 2048 sequences of 8192.
void BM_Plan405BOn16384H100(benchmark::State& state) {
  run_search(state, "llama3.1-405b", 16384, 2048, 8192);
}
BENCHMARK(BM_Plan405BOn16384H100)->Unit(benchmark::kSecond)->Iterations(1);

// 4M tokens per step: 512 sequences of 8192.
void BM_Plan70BOn1024H100(benchmark::State& state) {
  run_search(state, "llama3.1-70b", 1024, 512, 8192);
}
BENCHMARK(BM_Plan70BOn1024H100)->Unit(benchmark::kSecond)->Iterations(1);

/// A model's flagship cluster: the largest published run of it (or of its family) in
/// validation/ where there is one, else a cluster of the size its class trains on.
struct Flagship {
  const char* model;
  const char* gpu;
  int gpus;
  int64_t gbs, seq;
};

constexpr Flagship kFlagships[] = {
    // MLPerf Training GPT-3 175B: 1,344-3,584 H100 (validation/training/mlperf), gbs 1536 x 2048.
    {"gpt3-175b", "h100-sxm-80gb", 1024, 1536, 2048},
    // SC'21 Table 1 (validation/public-training.jsonl): the weak-scaling family on A100.
    {"megatron-gpt-1.7b", "a100-sxm-80gb", 32, 512, 2048},
    {"megatron-gpt-3.6b", "a100-sxm-80gb", 64, 512, 2048},
    {"megatron-gpt-7.5b", "a100-sxm-80gb", 128, 512, 2048},
    {"megatron-gpt-18b", "a100-sxm-80gb", 256, 1024, 2048},
    {"megatron-gpt-39b", "a100-sxm-80gb", 512, 1536, 2048},
    {"megatron-gpt-76b", "a100-sxm-80gb", 1024, 1792, 2048},
    {"megatron-gpt-145b", "a100-sxm-80gb", 1536, 2304, 2048},
    {"megatron-gpt-310b", "a100-sxm-80gb", 1920, 2160, 2048},
    {"megatron-gpt-530b", "a100-sxm-80gb", 2520, 2520, 2048},
    {"megatron-gpt-1t", "a100-sxm-80gb", 3072, 3072, 2048},
    // Korthikanti et al. (arXiv 2205.05198), public set: 175B on 64 A100, 22B on 8.
    {"megatron-gpt-175b", "a100-sxm-80gb", 64, 64, 2048},
    {"gpt-22b", "a100-sxm-80gb", 8, 4, 2048},
    // Megatron-LM's H100 weak-scaling family (public set).
    {"gpt-h100-1.7b", "h100-sxm-80gb", 48, 192, 4096},
    {"gpt-h100-7.1b", "h100-sxm-80gb", 96, 192, 4096},
    {"gpt-h100-16b", "h100-sxm-80gb", 192, 192, 4096},
    {"gpt-h100-32b", "h100-sxm-80gb", 384, 192, 4096},
    {"gpt-h100-70b", "h100-sxm-80gb", 768, 384, 4096},
    {"gpt-h100-119b", "h100-sxm-80gb", 1536, 768, 4096},
    {"gpt-h100-177b", "h100-sxm-80gb", 2304, 1152, 4096},
    {"gpt-h100-314b", "h100-sxm-80gb", 3072, 1536, 4096},
    {"gpt-h100-462b", "h100-sxm-80gb", 6144, 3072, 4096},
    // Llama 2 (arXiv 2307.09288): 4M-token batches of 4,096 on A100 clusters.
    {"llama2-7b", "a100-sxm-80gb", 256, 1024, 4096},
    {"llama2-70b", "a100-sxm-80gb", 2048, 1024, 4096},
    // Llama 3.1: 16M-token batches of 8,192 on H100 (the 405B on 16,384 GPUs).
    {"llama3.1-8b", "h100-sxm-80gb", 1024, 2048, 8192},
    {"llama3.1-70b", "h100-sxm-80gb", 4096, 2048, 8192},
    {"llama3.1-405b", "h100-sxm-80gb", 16384, 2048, 8192},
    // MoE: MoE Parallel Folding's Mixtral runs (validation/training/moe) and Qwen3's class.
    {"mixtral-8x7b", "h100-sxm-80gb", 256, 1024, 4096},
    {"mixtral-8x22b", "h100-sxm-80gb", 1024, 1024, 4096},
    {"qwen3-30b-a3b", "h100-sxm-80gb", 256, 1024, 4096},
    {"qwen3-235b-a22b", "h100-sxm-80gb", 2048, 2048, 4096},
    // DeepSeek-V3 (arXiv 2412.19437): 2,048 H800, 15,360 sequences of 4,096, fp8.
    {"deepseek-v3", "h800-sxm-80gb", 2048, 15360, 4096},
};

void BM_PlanZooFlagship(benchmark::State& state) {
  const Flagship& f = kFlagships[state.range(0)];
  state.SetLabel(std::string(f.model) + " on " + std::to_string(f.gpus) + " x " + f.gpu);
  // DeepSeek-V3 trained in fp8 (arXiv 2412.19437); the others in bf16.
  const Precision p = std::string(f.model) == "deepseek-v3" ? Precision::kFp8 : Precision::kBf16;
  run_search(state, f.model, f.gpus, f.gbs, f.seq, f.gpu, p);
}
BENCHMARK(BM_PlanZooFlagship)
    ->DenseRange(0, static_cast<int>(std::size(kFlagships)) - 1)
    ->Unit(benchmark::kSecond)
    ->Iterations(1);

}  // namespace
}  // namespace parallax
