#pragma once
/// Compute costs: the ONLY home of the formulas for GEMM, fused attention and memory-bound
/// kernel times. Measured tables in the profile take precedence over the analytical model.

#include <cstdint>

#include "core/hw_profile.h"

namespace parallax {

/// A (batched) GEMM C[m,n] = A[m,k] B[k,n], `batch` independent problems of that shape.
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  double flops() const { return 2.0 * m * n * k * batch; }
};

/// The three GEMMs of a linear layer in training.
enum class GemmPass { kForward, kDataGradient, kWeightGradient };

/// Where a cost came from, for reports ("measured table" or "analytical").
enum class CostSource { kAnalytical, kMeasured };

struct KernelTime {
  double time_s = 0;
  double flops = 0;
  double bytes = 0;
  CostSource source = CostSource::kAnalytical;
};

class ComputeCost {
 public:
  explicit ComputeCost(const HwProfile& hw) : hw_(hw) {}

  /// GEMM time. Roofline with tile and wave quantization:
  ///   t = max(2mnk / (peak * eff * u_tile * u_wave), bytes / (bw * eff_mem)) + overhead,
  ///   u_tile = mn / (ceil(m/tm) tm ceil(n/tn) tn),  u_wave = T / (ceil(T/SMs) SMs),
  ///   T = ceil(m/tm) ceil(n/tn) tiles per problem times `batch`; times u_k = k / (k + k0), the
  ///   share of a tile's time in its K mainloop (k0: pipeline fill and epilogue, from the
  ///   profile), which penalises the short-K GEMMs of small models. The better of the two tile
  ///   orientations is taken, as library heuristics do (NVIDIA, "Matrix Multiplication
  ///   Background User's Guide", 2023). In fp8 only the math runs at the fp8 rate; the casts
  ///   are priced by fp8_casts.
  KernelTime gemm(const GemmShape& s, Precision p) const;

  /// Memory-bound casts an fp8 linear layer adds to each of its GEMMs (dynamic tensor-wise
  /// scaling: an amax read of the bf16 tensor, then read bf16 and write fp8, 5 bytes/element):
  ///   forward  5 (m k) for the activation + 5 (k n) / weight_reuse for the weight, which is
  ///            cast once and reused by `weight_reuse` microbatches;
  ///   dgrad    5 (m n) for the output gradient, cast once for both backward GEMMs;
  ///   wgrad    2 (m k + m n): transposed fp8 copies of the activation and the gradient
  ///            (Hopper's fp8 MMA takes K-major operands only).
  KernelTime fp8_casts(const GemmShape& fwd, GemmPass pass, int64_t weight_reuse) const;

  /// Fused (flash) attention; never materialises the s x s matrix.
  ///   fwd flops = 2 b h_q s_q s_kv (d_qk + d_v) * f_causal, f_causal = 1/2 when masked;
  ///   bwd flops = 2.5 x fwd (recomputes S and P, five GEMM-like products; Dao 2023).
  /// Always in bf16 (fp8 recipes keep attention in bf16).
  KernelTime attention(int64_t batch_heads, int64_t s_q, int64_t s_kv, int64_t d_qk, int64_t d_v,
                       bool causal, bool backward) const;

  /// A memory-bound kernel moving `bytes` through HBM.
  KernelTime memory_bound(double bytes, double flops = 0) const;

 private:
  double gemm_efficiency(const GemmShape& s, Precision p, CostSource* src) const;
  const HwProfile& hw_;
};

}  // namespace parallax
