#include "simulator/cost/compute_cost.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "core/units.h"

namespace parallax {
namespace {

/// Query (and key) rows of one block of the flash kernels at head dim 128: FlashAttention-2's
/// and -3's forward tile (kBlockM = 128), which the causal mask's diagonal falls on.
constexpr double kAttentionBlock = 128;

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

double measured_gemm_tflops(const std::vector<GemmSample>& samples, Precision p, int64_t m,
                            int64_t n, int64_t k, bool* has_table) {
  // Priced once per GEMM of every lowering (the planner's hot path): plain scans over the
  // samples, nothing allocated.
  const int64_t x[3] = {m, n, k};
  auto dims = [](const GemmSample& g) { return std::array<int64_t, 3>{g.m, g.n, g.k}; };
  // Per axis: the measured range, and the measured sizes around x (held at an edge beyond it).
  int64_t lo_min[3], hi_max[3], lo[3], hi[3];
  bool any = false;
  for (const auto& g : samples) {
    if (g.precision != p) continue;
    const auto v = dims(g);
    for (int a = 0; a < 3; ++a) {
      if (!any) lo_min[a] = hi_max[a] = v[a], lo[a] = INT64_MIN, hi[a] = INT64_MAX;
      lo_min[a] = std::min(lo_min[a], v[a]);
      hi_max[a] = std::max(hi_max[a], v[a]);
      if (v[a] <= x[a]) lo[a] = std::max(lo[a], v[a]);
      if (v[a] >= x[a]) hi[a] = std::min(hi[a], v[a]);
    }
    any = true;
  }
  *has_table = any;
  if (!any) return 0;
  double w[3];
  for (int a = 0; a < 3; ++a) {
    // Within the measured range, or at most a factor 2 beyond its edge.
    if (x[a] * 2 < lo_min[a] || x[a] > 2 * hi_max[a]) return 0;
    if (hi[a] == INT64_MAX) hi[a] = hi_max[a];  // beyond the top: the edge
    if (lo[a] == INT64_MIN) lo[a] = lo_min[a];  // below the bottom: the edge
    w[a] = hi[a] == lo[a] ? 0.0
                          : std::log(static_cast<double>(x[a]) / lo[a]) /
                                std::log(static_cast<double>(hi[a]) / lo[a]);
  }
  // Trilinear in log(m), log(n), log(k) over the corners measured (the FLOP cap of a grid can
  // leave out the largest corner: the others are reweighted). Corner c takes hi on the axes of
  // its set bits; a repeated shape counts once, its last sample.
  double corner[8];
  bool measured[8] = {};
  for (const auto& g : samples) {
    if (g.precision != p) continue;
    const auto v = dims(g);
    int c = 0;
    bool on = true;
    for (int a = 0; a < 3 && on; ++a) {
      if (v[a] == lo[a]) continue;  // lo == hi: the lower corner (the upper weighs 0)
      if (v[a] == hi[a])
        c |= 1 << a;
      else
        on = false;
    }
    if (!on) continue;
    corner[c] = g.tflops;
    measured[c] = true;
  }
  double sum = 0, wsum = 0;
  for (int c = 0; c < 8; ++c) {
    double wc = 1;
    for (int a = 0; a < 3; ++a) wc *= (c >> a) & 1 ? w[a] : 1 - w[a];
    if (wc <= 0 || !measured[c]) continue;
    sum += wc * corner[c];
    wsum += wc;
  }
  if (wsum > 1e-6) return sum / wsum;
  // No corner measured: the nearest sample in log-shape space (on a tie, the smaller shape; a
  // repeated shape, its last sample).
  double best = std::numeric_limits<double>::infinity(), tflops = 0;
  std::array<int64_t, 3> best_dims{};
  for (const auto& g : samples) {
    if (g.precision != p) continue;
    const auto v = dims(g);
    double d = 0;
    for (int a = 0; a < 3; ++a) d += std::abs(std::log2(static_cast<double>(x[a]) / v[a]));
    if (d < best || (d == best && v <= best_dims)) {
      best = d;
      best_dims = v;
      tflops = g.tflops;
    }
  }
  return tflops;
}

double ComputeCost::gemm_efficiency(const GemmShape& s, Precision p, CostSource* src) const {
  bool has_table = false;
  const double tflops = measured_gemm_tflops(hw_.gemm_samples, p, s.m, s.n, s.k, &has_table);
  if (tflops > 0) {
    *src = CostSource::kMeasured;
    return std::min(1.0, tflops / hw_.peak_tflops(p));
  }
  const bool hit = has_table;
  *src = hit ? CostSource::kOutsideTable : CostSource::kAnalytical;
  const double base = hw_.gemm_efficiency_of(p);
  // Split-K: a GEMM with fewer output tiles than SMs (the skinny GEMMs of decoding) has its K
  // cut into `split` parts run as separate tiles and summed (cuBLAS's split-K and stream-K
  // kernels), each part paying its own fill and epilogue: the best power-of-two split up to
  // the one that fills the SMs.
  double best = 0;
  for (const bool swap : {false, true}) {
    const int tm = swap ? hw_.gemm_tile_n : hw_.gemm_tile_m,
              tn = swap ? hw_.gemm_tile_m : hw_.gemm_tile_n;
    const int64_t tiles = ceil_div(s.m, tm) * ceil_div(s.n, tn) * s.batch;
    for (int64_t split = 1; split == 1 || tiles * split <= hw_.sm_count; split *= 2) {
      const double k = static_cast<double>(s.k) / static_cast<double>(split);
      if (split > 1 && k < hw_.gemm_k_overhead) break;
      const double u = tile_wave_utilisation(s.m, s.n, s.batch * split, tm, tn, hw_.sm_count);
      best = std::max(best, u * k / (k + hw_.gemm_k_overhead));
    }
  }
  return base * best;
}

KernelTime ComputeCost::gemm(const GemmShape& s, Precision p) const {
  KernelTime t;
  if (s.m <= 0 || s.n <= 0 || s.k <= 0 || s.batch <= 0) return t;
  const bool fp32 = p == Precision::kFp32;
  // An fp32 plan keeps fp32 operands whatever the part's fp32 peak (peak_tflops falls back).
  const Precision eff_p = fp32 || hw_.supports(p) ? p : Precision::kBf16;
  t.flops = s.flops();
  t.bytes = s.batch * (operand_bytes(eff_p) * s.m * s.k + operand_bytes(eff_p, true) * s.k * s.n +
                       (fp32 ? 4.0 : 2.0) * s.m * s.n);
  const double eff = gemm_efficiency(s, eff_p, &t.source);
  count(TableUse::kGemm, t.source);
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

KernelTime ComputeCost::block_scaled_casts(const GemmShape& fwd, GemmPass pass,
                                           int64_t weight_reuse, Precision p) const {
  if (!is_block_scaled(p)) return {};
  const double a = static_cast<double>(fwd.batch) * fwd.m * fwd.k;  // activation elements
  const double w = static_cast<double>(fwd.batch) * fwd.k * fwd.n;  // weight elements
  const double c = static_cast<double>(fwd.batch) * fwd.m * fwd.n;  // output (gradient) elements
  // Bytes per element: the amax pass (NVFP4 only), one bf16 read, two quantized copies.
  const double amax = p == Precision::kNvfp4 ? 2.0 : 0.0;
  const double act = amax + 2.0 + 2.0 * operand_bytes(p);
  const double weight = amax + 2.0 + 2.0 * operand_bytes(p, true);
  switch (pass) {
    case GemmPass::kForward:
      return memory_bound(act * a + weight * w / std::max<int64_t>(1, weight_reuse));
    case GemmPass::kDataGradient:
      return memory_bound(act * c);
    case GemmPass::kWeightGradient:
      return {};
  }
  return {};
}

double operand_bytes(Precision p, bool weight) {
  switch (p) {
    case Precision::kBf16:
      return 2.0;
    case Precision::kFp8:
      return 1.0;
    case Precision::kFp32:
      return 4.0;
    case Precision::kMxfp8:
      return 1.0 + 1.0 / 32;
    case Precision::kNvfp4:
      return 0.5 + (weight ? 1.0 / 256 : 1.0 / 16);
  }
  return 2.0;
}

KernelTime ComputeCost::attention(int64_t batch_heads, int64_t s_q, int64_t s_kv, int64_t d_qk,
                                  int64_t d_v, bool causal, bool backward, Precision p,
                                  AttentionImpl kernel, double masked_share) const {
  const bool fa2 = kernel == AttentionImpl::kFlash2 || kernel == AttentionImpl::kFlash1;
  const double rate = kernel == AttentionImpl::kFlash1 ? kFlash1OverFlash2 : 1.0;
  KernelTime t;
  const double fwd =
      2.0 * batch_heads * s_q * s_kv * static_cast<double>(d_qk + d_v) * (causal ? 0.5 : 1.0);
  t.flops = backward ? 2.5 * fwd : fwd;
  // Q, K, V, O (and dO, dQ, dK, dV in backward) in bf16; KV heads counted as query heads (upper
  // bound).
  const double elem = p == Precision::kFp32 ? 4.0 : 2.0;
  t.bytes =
      elem * batch_heads * (s_q * (d_qk + d_v) + s_kv * (d_qk + d_v)) * (backward ? 2.0 : 1.0);
  const double fa2_eff =
      fa2 ? (backward ? hw_.fa2_attention_bwd_efficiency : hw_.fa2_attention_fwd_efficiency) : 0;
  if (fa2_eff > 0) {
    count(TableUse::kAttention, CostSource::kAnalytical);
  } else if (!hw_.attention_samples.empty()) {
    const double tflops =
        measured_attention_tflops(hw_.attention_samples, s_kv, (d_qk + d_v) / 2, backward);
    t.source = tflops > 0 ? CostSource::kMeasured : CostSource::kOutsideTable;
    count(TableUse::kAttention, t.source);
    if (tflops > 0) {
      t.time_s = t.flops / (tflops * rate * kTera);
      return t;
    }
  } else {
    count(TableUse::kAttention, CostSource::kAnalytical);
  }
  const double base = fa2_eff > 0 ? fa2_eff
                      : backward  ? hw_.attention_bwd_efficiency
                                  : hw_.attention_fwd_efficiency;
  // The masked share of the FLOPs at the causal rate, the rest at the unmasked rate. A masked
  // call over n query blocks computes n (n + 1) / 2 blocks for the n^2 / 2 its FLOPs count, the
  // n diagonal ones at twice the cost of the others (the mask): n^2 / 2 + n block-times.
  const double factor = fa2_eff > 0 ? hw_.fa2_causal_attention_factor : hw_.causal_attention_factor;
  const double share = causal && factor > 0 ? std::clamp(masked_share, 0.0, 1.0) : 0.0;
  const double n = std::ceil(static_cast<double>(s_q) / kAttentionBlock);
  const double causal_rate = factor > 0 ? factor * n / (n + 2) : 1.0;
  const double slowdown = share / causal_rate + (1 - share);
  const double compute_s = t.flops * slowdown / (hw_.peak_tflops(p) * kTera * base * rate);
  const double memory_s = t.bytes / (hw_.hbm_bw_gbps * kGB * hw_.hbm_efficiency);
  t.time_s = std::max(compute_s, memory_s) + hw_.kernel_overhead_us * kUs;
  return t;
}

KernelTime ComputeCost::decode_attention(double kv_tokens, int64_t q_heads, int64_t d_qk,
                                         int64_t d_v, double kv_bytes_per_token,
                                         Precision p) const {
  KernelTime t = memory_bound(kv_tokens * kv_bytes_per_token);
  t.flops = 2.0 * static_cast<double>(q_heads) * kv_tokens * static_cast<double>(d_qk + d_v);
  const double compute_s = t.flops / (hw_.peak_tflops(p) * kTera * hw_.attention_fwd_efficiency) +
                           hw_.kernel_overhead_us * kUs;
  t.time_s = std::max(t.time_s, compute_s);
  return t;
}

KernelTime ComputeCost::memory_bound(double bytes, double flops) const {
  KernelTime t;
  t.bytes = bytes;
  t.flops = flops;
  if (bytes > 0 && !hw_.memory_samples.empty()) {
    const double gbps = measured_memory_gbps(hw_.memory_samples, bytes);
    t.source = gbps > 0 ? CostSource::kMeasured : CostSource::kOutsideTable;
    count(TableUse::kMemory, t.source);
    if (gbps > 0) {
      t.time_s = bytes / (gbps * kGB);
      return t;
    }
  }
  t.time_s = bytes / (hw_.hbm_bw_gbps * kGB * hw_.hbm_efficiency) + hw_.kernel_overhead_us * kUs;
  return t;
}

std::string TableUse::summary(const std::string& profile) const {
  static const char* kNames[kKinds] = {"GEMM", "attention", "memory-bound", "collective"};
  std::string out;
  for (int k = 0; k < kKinds; ++k) {
    const int64_t measured = n[k][1], outside = n[k][2], total = n[k][0] + n[k][1] + n[k][2];
    if (measured + outside == 0) continue;
    if (!out.empty()) out += "; ";
    out += std::string(kNames[k]) + " " + std::to_string(measured) + " of " +
           std::to_string(total) + " from the table";
    if (outside > 0)
      out += ", " + std::to_string(outside) + " outside its range (analytical model)";
  }
  return out.empty() ? out : "measured tables of " + profile + ": " + out;
}

double interpolate_log(double x, double x0, double y0, double x1, double y1) {
  if (x1 == x0) return y0;
  const double w = std::log(x / x0) / std::log(x1 / x0);
  return y0 + w * (y1 - y0);
}

double measured_memory_gbps(const std::vector<MemorySample>& samples, double bytes) {
  // Per kernel, the two samples that bracket `bytes`; the answer averages the kernels that do,
  // in the order of their names. Priced for every memory-bound op of every lowering: one small
  // array, names compared in place rather than copied into a map.
  struct Bracket {
    const std::string* kernel;
    const MemorySample *lo, *hi;
  };
  std::vector<Bracket> bracket;
  bracket.reserve(8);
  for (const auto& s : samples) {
    auto it = std::find_if(bracket.begin(), bracket.end(),
                           [&](const Bracket& b) { return *b.kernel == s.kernel; });
    if (it == bracket.end()) it = bracket.insert(bracket.end(), {&s.kernel, nullptr, nullptr});
    if (s.bytes <= bytes && (!it->lo || s.bytes > it->lo->bytes)) it->lo = &s;
    if (s.bytes >= bytes && (!it->hi || s.bytes < it->hi->bytes)) it->hi = &s;
  }
  std::sort(bracket.begin(), bracket.end(),
            [](const Bracket& a, const Bracket& b) { return *a.kernel < *b.kernel; });
  double sum = 0;
  int n = 0;
  for (const Bracket& b : bracket) {
    if (!b.lo || !b.hi) continue;
    sum += interpolate_log(bytes, b.lo->bytes, b.lo->gbps, b.hi->bytes, b.hi->gbps);
    ++n;
  }
  return n > 0 ? sum / n : 0;
}

double measured_attention_tflops(const std::vector<AttentionSample>& samples, int64_t seq,
                                 int64_t head_dim, bool backward) {
  // The nearest measured head size (in log), then the two sequence lengths around `seq`.
  int64_t best_d = 0;
  for (const auto& s : samples) {
    if (s.backward != backward) continue;
    if (best_d == 0 || std::abs(std::log2(static_cast<double>(s.head_dim) / head_dim)) <
                           std::abs(std::log2(static_cast<double>(best_d) / head_dim)))
      best_d = s.head_dim;
  }
  const AttentionSample *lo = nullptr, *hi = nullptr;
  for (const auto& s : samples) {
    if (s.backward != backward || s.head_dim != best_d) continue;
    if (s.seq <= seq && (!lo || s.seq > lo->seq)) lo = &s;
    if (s.seq >= seq && (!hi || s.seq < hi->seq)) hi = &s;
  }
  if (!lo || !hi) return 0;
  return interpolate_log(static_cast<double>(seq), static_cast<double>(lo->seq), lo->tflops,
                         static_cast<double>(hi->seq), hi->tflops);
}

}  // namespace parallax
