#include "simulator/cost/compute_cost.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/units.h"

namespace parallax {
namespace {

// Fraction of a tile grid doing useful work for an m x n output with tm x tn tiles on `sms`
// processors, over `batch` problems.
double tile_wave_utilisation(int64_t m, int64_t n, int64_t batch, int tm, int tn, int sms) {
  const int64_t tiles_m = ceil_div(m, tm), tiles_n = ceil_div(n, tn);
  const double u_tile =
      static_cast<double>(m) * n / (static_cast<double>(tiles_m) * tm * tiles_n * tn);
  const int64_t tiles = tiles_m * tiles_n * batch;
  const int64_t waves = ceil_div(tiles, sms);
  const double u_wave = static_cast<double>(tiles) / (static_cast<double>(waves) * sms);
  return u_tile * u_wave;
}

}  // namespace

double ComputeCost::gemm_efficiency(const GemmShape& s, Precision p, CostSource* src) const {
  // Measured table: the nearest sample in log-shape space, if within a factor ~2 per dimension.
  double best = std::numeric_limits<double>::infinity();
  const GemmSample* hit = nullptr;
  for (const auto& g : hw_.gemm_samples) {
    if (g.precision != p) continue;
    const double d = std::abs(std::log2(static_cast<double>(s.m) / g.m)) +
                     std::abs(std::log2(static_cast<double>(s.n) / g.n)) +
                     std::abs(std::log2(static_cast<double>(s.k) / g.k));
    if (d < best) {
      best = d;
      hit = &g;
    }
  }
  if (hit && best <= 1.5) {
    *src = CostSource::kMeasured;
    return std::min(1.0, hit->tflops / hw_.peak_tflops(p));
  }
  *src = CostSource::kAnalytical;
  const double base = p == Precision::kFp8 ? hw_.fp8_gemm_efficiency : hw_.gemm_efficiency;
  const double u = std::max(
      tile_wave_utilisation(s.m, s.n, s.batch, hw_.gemm_tile_m, hw_.gemm_tile_n, hw_.sm_count),
      tile_wave_utilisation(s.m, s.n, s.batch, hw_.gemm_tile_n, hw_.gemm_tile_m, hw_.sm_count));
  const double u_k = static_cast<double>(s.k) / static_cast<double>(s.k + hw_.gemm_k_overhead);
  return base * u * u_k;
}

KernelTime ComputeCost::gemm(const GemmShape& s, Precision p) const {
  KernelTime t;
  if (s.m <= 0 || s.n <= 0 || s.k <= 0 || s.batch <= 0) return t;
  const bool fp8 = p == Precision::kFp8 && hw_.fp8_tflops > 0;
  const Precision eff_p = fp8 ? Precision::kFp8 : Precision::kBf16;
  const double elem = fp8 ? 1.0 : 2.0;
  t.flops = s.flops();
  t.bytes = s.batch * (elem * (s.m * s.k + s.k * s.n) + 2.0 * s.m * s.n);
  const double eff = gemm_efficiency(s, eff_p, &t.source);
  const double compute_s = t.flops / (hw_.peak_tflops(eff_p) * kTera * eff);
  const double memory_s = t.bytes / (hw_.hbm_bw_gbps * kGB * hw_.hbm_efficiency);
  t.time_s = std::max(compute_s, memory_s) + hw_.kernel_overhead_us * kUs;
  return t;
}

KernelTime ComputeCost::fp8_casts(const GemmShape& fwd, GemmPass pass, int64_t weight_reuse) const {
  const double a = static_cast<double>(fwd.batch) * fwd.m * fwd.k;  // activation elements
  const double w = static_cast<double>(fwd.batch) * fwd.k * fwd.n;  // weight elements
  const double c = static_cast<double>(fwd.batch) * fwd.m * fwd.n;  // output (gradient) elements
  switch (pass) {
    case GemmPass::kForward:
      return memory_bound(5.0 * a + 5.0 * w / std::max<int64_t>(1, weight_reuse));
    case GemmPass::kDataGradient:
      return memory_bound(5.0 * c);
    case GemmPass::kWeightGradient:
      return memory_bound(2.0 * (a + c));
  }
  return {};
}

KernelTime ComputeCost::attention(int64_t batch_heads, int64_t s_q, int64_t s_kv, int64_t d_qk,
                                  int64_t d_v, bool causal, bool backward) const {
  KernelTime t;
  const double fwd =
      2.0 * batch_heads * s_q * s_kv * static_cast<double>(d_qk + d_v) * (causal ? 0.5 : 1.0);
  t.flops = backward ? 2.5 * fwd : fwd;
  // Q, K, V, O (and dO, dQ, dK, dV in backward) in bf16; KV heads counted as query heads (upper
  // bound).
  t.bytes = 2.0 * batch_heads * (s_q * (d_qk + d_v) + s_kv * (d_qk + d_v)) * (backward ? 2.0 : 1.0);
  const double eff = backward ? hw_.attention_bwd_efficiency : hw_.attention_fwd_efficiency;
  const double compute_s = t.flops / (hw_.bf16_tflops * kTera * eff);
  const double memory_s = t.bytes / (hw_.hbm_bw_gbps * kGB * hw_.hbm_efficiency);
  t.time_s = std::max(compute_s, memory_s) + hw_.kernel_overhead_us * kUs;
  return t;
}

KernelTime ComputeCost::memory_bound(double bytes, double flops) const {
  KernelTime t;
  t.bytes = bytes;
  t.flops = flops;
  t.time_s = bytes / (hw_.hbm_bw_gbps * kGB * hw_.hbm_efficiency) + hw_.kernel_overhead_us * kUs;
  return t;
}

}  // namespace parallax
