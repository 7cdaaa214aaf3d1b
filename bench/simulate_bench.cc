// Google Benchmark: simulating one training step at cluster scale.
#include <benchmark/benchmark.h>

#include "core/json_io.h"
#include "core/model_zoo.h"
#include "simulator/simulate.h"

namespace parallax {
namespace {

// Llama-3.1 405B on 16,384 H100s: TP8 PP16 DP128, 8K sequences, 16M-token batch (2048 sequences),
// the layout of the Llama 3 paper's 16K-GPU runs. Target: under 20 ms per step on one core.
void BM_Simulate405BOn16kH100(benchmark::State& state) {
  const ModelSpec m = find_zoo_model("llama3.1-405b", "bench").value();
  const HwProfile hw = find_profile(builtin_profiles().value(), "h100-sxm-80gb", "bench").value();
  ParallelPlan p;
  p.tp = 8;
  p.pp = 16;
  p.dp = 128;
  p.micro_batch = 1;
  p.global_batch = 2048;
  p.seq_len = 8192;
  p.sequence_parallel = true;
  p.recompute = Recompute::kNone;
  p.zero_stage = 1;
  p.schedule = state.range(0) > 1 ? ScheduleKind::kInterleaved1F1B : ScheduleKind::k1F1B;
  p.vpp = static_cast<int>(state.range(0));
  const Cluster c{hw, 16384};
  auto check = simulate(m, c, p);
  if (!check) {
    state.SkipWithError(check.error_text().c_str());
    return;
  }
  for (auto _ : state) {
    auto r = simulate(m, c, p);
    benchmark::DoNotOptimize(r);
  }
  state.counters["step_time_s"] = check->step_time_s;
  state.counters["events"] = static_cast<double>(check->engine.events);
}
BENCHMARK(BM_Simulate405BOn16kH100)->Arg(1)->Arg(4)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace parallax
