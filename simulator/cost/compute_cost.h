#pragma once
/// Compute costs: the ONLY home of the formulas for GEMM, fused attention and memory-bound
/// kernel times. Measured tables in the profile take precedence over the analytical model.

#include <cstdint>
#include <string>
#include <vector>

#include "core/hw_profile.h"
#include "core/parallel_plan.h"

namespace parallax {

/// A (batched) GEMM C[m,n] = A[m,k] B[k,n], `batch` independent problems of that shape.
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  double flops() const { return 2.0 * m * n * k * batch; }
};

/// The three GEMMs of a linear layer in training.
enum class GemmPass { kForward, kDataGradient, kWeightGradient };

/// Where a cost came from, for reports: the analytical model (the profile has no table for it),
/// a measured table, or the analytical model because the shape or size lies outside the table
/// the profile has.
enum class CostSource { kAnalytical, kMeasured, kOutsideTable };

/// How often the cost models answered from measured tables, per kind of cost, so that a report
/// can say how much of a prediction rests on measurements. Counts distinct priced operators
/// (the lowering prices each layer kind once), not calls.
struct TableUse {
  enum Kind { kGemm, kAttention, kMemory, kCollective, kKinds };
  int64_t n[kKinds][3] = {};
  void add(Kind k, CostSource s) { ++n[k][static_cast<int>(s)]; }
  /// "measured tables of NAME: GEMM 12 of 14 shapes (2 outside the table: analytical), ...";
  /// empty when no table answered and none was consulted.
  std::string summary(const std::string& profile) const;
};

struct KernelTime {
  double time_s = 0;
  double flops = 0;
  double bytes = 0;
  CostSource source = CostSource::kAnalytical;
};

/// FlashAttention-1's rate over FlashAttention-2's on the same part: Dao, 'FlashAttention-2'
/// (arXiv 2307.08691), abstract and Sec. 4.1: FlashAttention-2 is "around 2x faster than
/// FlashAttention" in the attention benchmarks (fwd, bwd, fwd+bwd; A100, head dims 64 and 128,
/// causal or not), FlashAttention reaching 25-40% of the A100's peak against FA2's 50-73%.
/// Measured on A100 only; parts without an FA1 measurement take the same ratio.
inline constexpr double kFlash1OverFlash2 = 0.5;

class ComputeCost {
 public:
  /// `use`, when given, counts where each cost came from.
  explicit ComputeCost(const HwProfile& hw, TableUse* use = nullptr) : hw_(hw), use_(use) {}

  /// GEMM time. Roofline with tile and wave quantization:
  ///   t = max(2mnk / (peak * eff * u_tile * u_wave), bytes / (bw * eff_mem)) + overhead,
  ///   u_tile = mn / (ceil(m/tm) tm ceil(n/tn) tn),  u_wave = T / (ceil(T/SMs) SMs),
  ///   T = ceil(m/tm) ceil(n/tn) tiles per problem times `batch`; times u_k = k / (k + k0), the
  ///   share of a tile's time in its K mainloop (k0: pipeline fill and epilogue, from the
  ///   profile), which penalises the short-K GEMMs of small models. When T is below the SM
  ///   count, K may be split into `split` (a power of two, T split <= SMs, k / split >= k0)
  ///   parts run as T split tiles of k / split each (split-K / stream-K kernels for the skinny
  ///   GEMMs of decoding). The best orientation and split are taken, as library heuristics do
  ///   (NVIDIA, "Matrix Multiplication Background User's Guide", 2023). In fp8, MXFP8 and
  ///   NVFP4 only the math runs at that format's rate and efficiency (the operands read at
  ///   operand_bytes each); the casts are priced by fp8_casts and block_scaled_casts. A part
  ///   without the format runs the GEMM at its bf16 rate.
  /// With a measured GEMM table (profile gemm_samples of that precision) the efficiency is the
  /// measured TFLOP/s over the peak, interpolated (measured_gemm_tflops); outside the table the
  /// formula above answers, and the source says kOutsideTable.
  KernelTime gemm(const GemmShape& s, Precision p) const;

  /// Memory-bound casts an fp8 linear layer adds to each of its GEMMs (dynamic tensor-wise
  /// scaling: an amax read of the bf16 tensor, then read bf16 and write fp8, 5 bytes/element):
  ///   forward  5 (m k) for the activation + 5 (k n) / weight_reuse for the weight, which is
  ///            cast once and reused by `weight_reuse` microbatches;
  ///   dgrad    5 (m n) for the output gradient, cast once for both backward GEMMs;
  ///   wgrad    2 (m k + m n): transposed fp8 copies of the activation and the gradient
  ///            (Hopper's fp8 MMA takes K-major operands only).
  KernelTime fp8_casts(const GemmShape& fwd, GemmPass pass, int64_t weight_reuse) const;

  /// Memory-bound quantization a linear layer's GEMMs add in a block-scaled recipe (`p` MXFP8
  /// or NVFP4; Transformer Engine's MXFP8BlockScaling and NVFP4BlockScaling,
  /// transformer_engine/common/recipe/__init__.py). Blocks run along each GEMM's K, which
  /// differs between the GEMMs an operand enters, so each operand (activation X [m k], weight
  /// W [k n], output gradient dY [m n]) is quantized once, from bf16, into a row-wise copy and
  /// a column-wise (transposed) one, both from the bf16 values ("to avoid double quantization
  /// errors", ibid.), e bytes per element each (operand_bytes, scales included):
  ///   MXFP8: one kernel reads bf16 and writes both copies (common/cast/mxfp8/quantize_mxfp8.cuh;
  ///     e8m0 scales need no global amax): 2 + 2 e = 4.0625 bytes per element;
  ///   NVFP4: an amax pass for the fp32 per-tensor scale (2), then one kernel writes both
  ///     copies (2 + 2 e): X and dY 5.125, their column-wise copies (the weight-gradient
  ///     GEMM's operands) through a 16-point random Hadamard transform in that same kernel
  ///     (nvte_hadamard_transform_amax, nvte_quantize_with_hadamard_transform: RHT "only
  ///     applied to column-wise usage so that it can be used for wgrad GEMM"), dY with
  ///     stochastic rounding (no extra bytes); W in 16x16 blocks, one scale for both copies:
  ///     4 + 2 (0.5 + 1/256) = 5.008.
  ///   forward  X + W / weight_reuse (the weight's copies are kept across `weight_reuse`
  ///            microbatches, Transformer Engine's is_first_microbatch);
  ///   dgrad    dY (both copies: one for this GEMM, the transpose for the weight gradient);
  ///   wgrad    nothing (the column-wise copies of X and dY exist).
  KernelTime block_scaled_casts(const GemmShape& fwd, GemmPass pass, int64_t weight_reuse,
                                Precision p) const;

  /// The expert GEMMs of an MoE layer as Megatron-LM's grouped GEMM runs them (--moe-grouped-gemm:
  /// TEGroupedMLP, Transformer Engine's GroupedLinear): `s.batch` problems of m x n x k, one per
  /// local expert. TE's grouped GEMM on Hopper launches one cuBLAS GEMM per problem, round-robin
  /// over its 4 compute streams (transformer_engine/common/gemm/cublaslt_gemm.cu,
  /// multi_stream_cublas_gemm; util/multi_stream.cpp: num_compute_streams = 4; the CUTLASS
  /// grouped kernel only with NVTE_USE_CUTLASS_GROUPED_GEMM=1). Each problem is priced alone by
  /// gemm() (its own tile and wave quantization, split-K, K overhead and launch, or the measured
  /// table at its shape), and the group takes the longer of two bounds:
  ///   streams  ceil(E / 4) * t(m, n, k)            each stream runs its share one after another;
  ///   SMs      t(E * ceil(m / tile) * tile, n, k)  every problem's tiles (its rows padded to
  ///                                                 whole tiles) spread over all SMs at once,
  /// tile = the smaller edge of the profile's GEMM tile. FLOPs are the useful E * 2mnk. At small
  /// m per expert the padding wastes tiles and a single GEMM leaves most SMs idle; at large m both
  /// bounds approach one dense GEMM of the same FLOPs.
  KernelTime grouped_gemm(const GemmShape& s, Precision p) const;

  /// Fused (flash) attention; never materialises the s x s matrix.
  ///   fwd flops = 2 b h_q s_q s_kv (d_qk + d_v) * f_causal, f_causal = 1/2 when masked;
  ///   bwd flops = 2.5 x fwd (recomputes S and P, five GEMM-like products; Dao 2023).
  /// In bf16 (fp8 recipes keep attention in bf16), or fp32 in an fp32 plan: `p` picks the peak
  /// and the element size.
  /// With a measured attention table (profile attention_samples): the achieved TFLOP/s of the
  /// nearest head size, interpolated in log(seq) between the two nearest sequence lengths
  /// (s_kv); outside the measured lengths the analytical model answers.
  /// `kernel` kFlash2: FlashAttention-2 (PyTorch SDPA) at the profile's fa2_attention_*_efficiency
  /// when it gives one (a measured table times the part's own fused kernel, not FA2); otherwise
  /// the same kernel as the default. kFlash1: FlashAttention-1 at kFlash1OverFlash2 of that rate.
  /// Where the profile gives that kernel's causal factor f (causal_attention_factor,
  /// fa2_causal_attention_factor), `masked_share` of a causal call's FLOPs runs at f n / (n + 2) of
  /// the unmasked rate, n = ceil(s_q / 128) query blocks (the n diagonal blocks each cost two
  /// unmasked ones): 1 for one masked call; 1/cp under load-balanced context parallelism, whose
  /// other cp - 1 calls per rank (chunks against earlier chunks) run unmasked. A measured table
  /// (calibrate times causal attention) needs no factor.
  KernelTime attention(int64_t batch_heads, int64_t s_q, int64_t s_kv, int64_t d_qk, int64_t d_v,
                       bool causal, bool backward, Precision p = Precision::kBf16,
                       AttentionImpl kernel = AttentionImpl::kFlash,
                       double masked_share = 1.0) const;

  /// Decode attention (FlashDecoding-style): sequences with one new query token each against
  /// `kv_tokens` cached tokens in all, `q_heads` query heads reading a cache of
  /// `kv_bytes_per_token` a token (the heads of a GQA group, or all heads of MLA, share it): the
  /// cache is read once, and the math runs at the flash-attention forward efficiency:
  ///   t = max(read, 2 q_heads kv_tokens (d_qk + d_v) / (peak eff_fwd)) + overhead,
  /// read = memory_bound(kv_tokens * kv_bytes_per_token) (measured when the profile has a
  /// memory table).
  KernelTime decode_attention(double kv_tokens, int64_t q_heads, int64_t d_qk, int64_t d_v,
                              double kv_bytes_per_token, Precision p = Precision::kBf16) const;

  /// A memory-bound kernel moving `bytes` through HBM: bytes / (bw * eff) + overhead. With a
  /// measured memory table (profile memory_samples), the bandwidth the measured kernels achieved
  /// at that size, interpolated in log(bytes) for each kernel whose sizes bracket it and
  /// averaged over those kernels (the measured time includes the launch); outside every
  /// kernel's sizes the analytical model answers.
  KernelTime memory_bound(double bytes, double flops = 0) const;

 private:
  double gemm_efficiency(const GemmShape& s, Precision p, CostSource* src) const;
  void count(TableUse::Kind k, CostSource s) const {
    if (use_) use_->add(k, s);
  }
  const HwProfile& hw_;
  TableUse* use_ = nullptr;
};

/// Bytes one element of a GEMM operand takes in `p`, its block scales included: bf16 2, fp8 1,
/// fp32 4; MXFP8 1 + 1/32 (an e8m0 scale per 32 elements); NVFP4 1/2 + 1/16 (an e4m3 scale per
/// 16), or 1/2 + 1/256 for a weight (one scale per 16x16 block, NVFP4BlockScaling's 2D weight
/// quantization). The per-tensor fp32 scale of NVFP4 is left out (4 bytes a tensor).
double operand_bytes(Precision p, bool weight = false);

/// Value at x of the line through (x0, y0) and (x1, y1) in log(x); y0 when x0 == x1.
double interpolate_log(double x, double x0, double y0, double x1, double y1);
/// Achieved TFLOP/s of an m x n x k GEMM in precision `p` from a measured GEMM table: trilinear
/// in log(m), log(n), log(k) between the measured sizes around the shape (corners the table
/// lacks are left out and the rest reweighted; with none, the nearest sample). A dimension may
/// lie at most a factor 2 beyond the measured range (held at its edge); further out the answer
/// is 0 (the analytical model's turn). `has_table`: whether `p` has samples at all.
double measured_gemm_tflops(const std::vector<GemmSample>& samples, Precision p, int64_t m,
                            int64_t n, int64_t k, bool* has_table);
/// Achieved GB/s of a memory-bound kernel moving `bytes`, from a measured memory table (see
/// ComputeCost::memory_bound); 0 when no kernel's sizes bracket `bytes`.
double measured_memory_gbps(const std::vector<MemorySample>& samples, double bytes);
/// Achieved TFLOP/s of attention at `seq` and `head_dim` from a measured attention table (see
/// ComputeCost::attention); 0 when the measured lengths do not bracket `seq`.
double measured_attention_tflops(const std::vector<AttentionSample>& samples, int64_t seq,
                                 int64_t head_dim, bool backward);

}  // namespace parallax
