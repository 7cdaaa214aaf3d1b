// Google Benchmark: exhaustive layout search at cluster scale (the planner issue's targets:
// Llama-3.1 405B on 16,384 H100s in under 10 s, a 70B model on 1,024 GPUs in under 2 s, on the
// 2-core development machine).
#include <benchmark/benchmark.h>

#include "core/json_io.h"
#include "core/model_zoo.h"
#include "planner/search.h"

namespace parallax {
namespace {

void run_search(benchmark::State& state, const char* model, int gpus, int64_t gbs, int64_t seq) {
  PlanRequest r;
  r.model = find_zoo_model(model, "bench").value();
  r.cluster = {find_profile(builtin_profiles().value(), "h100-sxm-80gb", "bench").value(), gpus};
  r.global_batch = gbs;
  r.seq_len = seq;
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

}  // namespace
}  // namespace parallax
