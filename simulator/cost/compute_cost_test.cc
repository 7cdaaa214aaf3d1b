#include "simulator/cost/compute_cost.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "core/hw_profile.h"
#include "core/json_io.h"
#include "core/units.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

using testing::round_profile;

// round_profile(): 1000 TFLOP/s bf16 (2000 fp8) at 0.8 on 100 SMs with 128 x 128 tiles,
// attention at 0.5 forward and 0.4 backward, HBM at 1000 GB/s and full efficiency.
constexpr double kRel = 1e-12;  // relative tolerance: the oracles are the same closed forms

double bf16_compute_s(double flops, double utilisation) {
  return flops / (1000 * kTera * 0.8 * utilisation);
}

TEST(ComputeCost, GemmFillingWholeWavesRunsAtLibraryEfficiency) {
  const HwProfile hw = round_profile();
  const ComputeCost cost(hw);
  // m = n = 2560: 20 x 20 = 400 tiles of 128 x 128 = exactly 4 waves on 100 SMs, u = 1.
  //   t = 2mnk / (peak * eff) = 2 * 2560^2 * 8192 / (1000e12 * 0.8) = 134.2 us;
  //   memory: (2(mk + kn) + 2mn) / bw = 48.5 MB / 1000 GB/s = 48.5 us, so compute-bound.
  const int64_t m = 2560, n = 2560, k = 8192;
  const KernelTime t = cost.gemm({m, n, k}, Precision::kBf16);
  const double flops = 2.0 * m * n * k;
  EXPECT_DOUBLE_EQ(t.flops, flops);
  EXPECT_DOUBLE_EQ(t.bytes, 2.0 * (m * k + k * n) + 2.0 * m * n);
  EXPECT_NEAR(t.time_s, flops / (1000 * kTera * 0.8), kRel * t.time_s);
  EXPECT_EQ(t.source, CostSource::kAnalytical);
}

TEST(ComputeCost, OneTileMoreThanAWaveCostsTwoWaves) {
  HwProfile hw = round_profile();
  // A 128-wide GEMM has arithmetic intensity < 128 FLOP/byte; raise HBM to 10 TB/s so that
  // both shapes stay compute-bound and the wave effect is what is measured.
  hw.hbm_bw_gbps = 10000;
  const ComputeCost cost(hw);
  const int64_t k = 8192;
  // One wave: 100 x 1 tiles on 100 SMs: t_wave = 2 * (100*128) * 128 * k / (peak * eff).
  const double wave_s = bf16_compute_s(2.0 * 100 * 128 * 128 * k, 1.0);
  const KernelTime one = cost.gemm({100 * 128, 128, k}, Precision::kBf16);
  EXPECT_NEAR(one.time_s, wave_s, kRel * wave_s);
  // 101 tiles need ceil(101/100) = 2 waves: u_wave = 101/200 and t = 2 * t_wave, not 1.01x.
  const KernelTime two = cost.gemm({101 * 128, 128, k}, Precision::kBf16);
  EXPECT_NEAR(two.time_s, 2 * wave_s, kRel * wave_s);
}

TEST(ComputeCost, TileQuantizationPadsPartialTiles) {
  const HwProfile hw = round_profile();
  const ComputeCost cost(hw);
  // m = 2500 needs ceil(2500/128) = 20 tiles (2560 rows), n = 2560: 400 tiles = 4 full waves.
  //   u_tile = 2500 * 2560 / (2560 * 2560);  t = 2mnk / (peak * eff * u_tile)
  //   = 2 * 2560 * 2560 * k / (peak * eff): the padded shape's time.
  const int64_t m = 2500, n = 2560, k = 8192;
  const double u_tile = static_cast<double>(m) * n / (2560.0 * 2560.0);
  const double expected = bf16_compute_s(2.0 * m * n * k, u_tile);
  const KernelTime t = cost.gemm({m, n, k}, Precision::kBf16);
  EXPECT_NEAR(t.time_s, expected, kRel * expected);
  EXPECT_NEAR(t.time_s, cost.gemm({2560, n, k}, Precision::kBf16).time_s, kRel * expected);
  EXPECT_DOUBLE_EQ(t.flops, 2.0 * m * n * k);  // useful FLOPs, not padded ones
}

TEST(ComputeCost, ShortKPaysTheTileOverheadOfTheProfile) {
  HwProfile hw = round_profile();
  hw.gemm_k_overhead = 256;
  const ComputeCost cost(hw);
  // u_k = k / (k + k0): k = 8192, k0 = 256 -> t = 2mnk / (peak * eff * u_k), 1/32 slower than
  // the same full-wave shape without overhead; compute-bound as in the whole-wave test.
  const int64_t m = 2560, n = 2560, k = 8192;
  const double u_k = static_cast<double>(k) / (k + 256);
  const double expected = bf16_compute_s(2.0 * m * n * k, u_k);
  EXPECT_NEAR(cost.gemm({m, n, k}, Precision::kBf16).time_s, expected, kRel * expected);
}

TEST(ComputeCost, SkinnyGemmIsMemoryBound) {
  const HwProfile hw = round_profile();
  const ComputeCost cost(hw);
  // A matrix-vector product 8192 x 8192 x 1: bytes = 2(mk + kn) + 2mn, t = bytes / (bw * eff);
  // compute would be 2mk / (peak * eff * u) with u = (1/128) * 0.64, about 33 us < 134 us.
  const int64_t m = 8192, n = 1, k = 8192;
  const double bytes = 2.0 * (m * k + k * n) + 2.0 * m * n;
  const KernelTime t = cost.gemm({m, n, k}, Precision::kBf16);
  EXPECT_DOUBLE_EQ(t.bytes, bytes);
  EXPECT_NEAR(t.time_s, bytes / (1000 * kGB * 1.0), kRel * t.time_s);
}

TEST(ComputeCost, Fp8GemmIsFasterButLessThanTwiceOnceCastsAreAdded) {
  const HwProfile hw = round_profile();
  const ComputeCost cost(hw);
  // m = n = 12800 (100 x 100 tiles = 100 full waves), k = 4096; both precisions compute-bound.
  //   bf16: t = 2mnk / (1000e12 * 0.8)
  //   fp8 math: t = 2mnk / (2000e12 * 0.8); the forward casts (amax pass, read bf16, write
  //   fp8: 5 bytes/element) of the activation and, reused by r microbatches, the weight:
  //   5 (mk + kn / r) / bw.
  const int64_t m = 12800, n = 12800, k = 4096, reuse = 4;
  const double flops = 2.0 * m * n * k;
  const double bf16_s = flops / (1000 * kTera * 0.8);
  const double fp8_math_s = flops / (2000 * kTera * 0.8);
  const double cast_s = 5.0 * (m * k + static_cast<double>(k * n) / reuse) / (1000 * kGB);
  const GemmShape s{m, n, k};
  const KernelTime bf16 = cost.gemm(s, Precision::kBf16);
  const KernelTime fp8 = cost.gemm(s, Precision::kFp8);
  const KernelTime casts = cost.fp8_casts(s, GemmPass::kForward, reuse);
  EXPECT_NEAR(bf16.time_s, bf16_s, kRel * bf16_s);
  EXPECT_NEAR(fp8.time_s, fp8_math_s, kRel * fp8_math_s);
  EXPECT_NEAR(casts.time_s, cast_s, kRel * cast_s);
  EXPECT_LT(fp8.time_s + casts.time_s, bf16.time_s);
  EXPECT_GT(fp8.time_s + casts.time_s, bf16.time_s / 2);
}

TEST(ComputeCost, Fp8BackwardCastsTheGradientOnceAndTransposesForWgrad) {
  const HwProfile hw = round_profile();
  const ComputeCost cost(hw);
  // dgrad: 5 mn (the output gradient, cast once for both GEMMs); wgrad: 2 (mk + mn) for the
  // transposed fp8 copies.
  const int64_t m = 4096, n = 2048, k = 1024;
  const GemmShape s{m, n, k};
  const double bw = 1000 * kGB;
  EXPECT_NEAR(cost.fp8_casts(s, GemmPass::kDataGradient, 1).time_s, 5.0 * m * n / bw, 1e-15);
  EXPECT_NEAR(cost.fp8_casts(s, GemmPass::kWeightGradient, 1).time_s,
              2.0 * (static_cast<double>(m) * k + static_cast<double>(m) * n) / bw, 1e-15);
}

TEST(ComputeCost, Fp8FallsBackToBf16WithoutFp8Units) {
  HwProfile hw = round_profile();
  hw.fp8_tflops = 0;
  const ComputeCost cost(hw);
  const GemmShape s{2560, 2560, 8192};
  EXPECT_DOUBLE_EQ(cost.gemm(s, Precision::kFp8).time_s, cost.gemm(s, Precision::kBf16).time_s);
}

TEST(ComputeCost, AttentionFlopsCausalHalfAndBackwardTwoAndAHalf) {
  const HwProfile hw = round_profile();
  const ComputeCost cost(hw);
  // fwd = 2 * bh * s_q * s_kv * (d_qk + d_v), halved when causal; bwd = 2.5 x fwd.
  const int64_t bh = 32, s = 4096, d = 128;
  const double full = 2.0 * bh * s * s * (d + d);
  const KernelTime f_full = cost.attention(bh, s, s, d, d, /*causal=*/false, /*backward=*/false);
  const KernelTime f_causal = cost.attention(bh, s, s, d, d, true, false);
  const KernelTime b_full = cost.attention(bh, s, s, d, d, false, true);
  const KernelTime b_causal = cost.attention(bh, s, s, d, d, true, true);
  EXPECT_DOUBLE_EQ(f_full.flops, full);
  EXPECT_DOUBLE_EQ(f_causal.flops, full / 2);
  EXPECT_DOUBLE_EQ(b_full.flops, 2.5 * full);
  EXPECT_DOUBLE_EQ(b_causal.flops, 2.5 * full / 2);
  // Compute-bound here (flops / 0.5 PFLOP/s = 550 us vs 134 MB / 1 TB/s):
  //   t_fwd = flops / (peak * eff_fwd), t_bwd = 2.5 flops / (peak * eff_bwd).
  EXPECT_NEAR(f_full.time_s, full / (1000 * kTera * 0.5), kRel * f_full.time_s);
  EXPECT_NEAR(b_causal.time_s, 2.5 * full / 2 / (1000 * kTera * 0.4), kRel * b_causal.time_s);
}

// The causal mask costs throughput: a profile's causal factor f slows the masked share of a
// causal call's FLOPs to f n / (n + 2) of the unmasked rate (n query blocks of 128, each masked
// diagonal block costing two unmasked ones), never an unmasked call.
TEST(ComputeCost, CausalFactorSlowsTheMaskedShareOnly) {
  HwProfile hw = round_profile();
  const int64_t bh = 32, s = 4096, d = 128;
  const ComputeCost plain(hw);
  hw.causal_attention_factor = 0.8;
  hw.fa2_attention_fwd_efficiency = 0.25;
  hw.fa2_causal_attention_factor = 0.5;
  const ComputeCost cost(hw);
  const double causal_flops = 2.0 * bh * s * s * (d + d) / 2;
  const double rate = 0.8 * 32 / 34;  // n = 4096 / 128 = 32 query blocks
  // One masked call: every FLOP at the causal rate of the unmasked 0.5 PFLOP/s.
  EXPECT_NEAR(cost.attention(bh, s, s, d, d, true, false).time_s,
              causal_flops / (1000 * kTera * 0.5 * rate), kRel * 1e-3);
  // Longer calls lose less to their diagonal: n = 256 at 32k.
  const int64_t l = 32768;
  EXPECT_NEAR(cost.attention(1, l, l, d, d, true, false).time_s,
              2.0 * l * l * (d + d) / 2 / (1000 * kTera * 0.5 * 0.8 * 256 / 258), kRel * 1e-2);
  // Unmasked calls and profiles without a factor are as before.
  EXPECT_DOUBLE_EQ(cost.attention(bh, s, s, d, d, false, true).time_s,
                   plain.attention(bh, s, s, d, d, false, true).time_s);
  // A quarter masked (context parallelism over 4 ranks): 1/4 at the causal rate, 3/4 unmasked.
  EXPECT_NEAR(
      cost.attention(bh, s, s, d, d, true, false, Precision::kBf16, AttentionImpl::kFlash, 0.25)
          .time_s,
      causal_flops * (0.25 / rate + 0.75) / (1000 * kTera * 0.5), kRel * 1e-3);
  // FlashAttention-2 takes its own factor.
  EXPECT_NEAR(
      cost.attention(bh, s, s, d, d, true, false, Precision::kBf16, AttentionImpl::kFlash2).time_s,
      causal_flops / (1000 * kTera * 0.25 * 0.5 * 32 / 34), kRel * 1e-3);
  // FlashAttention-1 at half FlashAttention-2's rate, with its factor.
  EXPECT_NEAR(
      cost.attention(bh, s, s, d, d, true, false, Precision::kBf16, AttentionImpl::kFlash1).time_s,
      causal_flops / (1000 * kTera * 0.25 * kFlash1OverFlash2 * 0.5 * 32 / 34), kRel * 1e-3);
  // A factor is a fraction: above 1 is an error that names the field.
  hw.causal_attention_factor = 1.2;
  const Diagnostics bad = validate_profile(hw, "p.json:");
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad.front().where, "p.json:/causal_attention_factor");
}

TEST(ComputeCost, MemoryBoundKernelIsBytesOverEffectiveBandwidth) {
  HwProfile hw = round_profile();
  hw.hbm_efficiency = 0.5;
  // t = bytes / (bw * eff) = 1e9 / (1000e9 * 0.5) = 2 ms.
  EXPECT_NEAR(ComputeCost(hw).memory_bound(1e9).time_s, 1e9 / (1000 * kGB * 0.5), 1e-15);
  // Launch overhead adds on top: + 5 us.
  hw.kernel_overhead_us = 5;
  EXPECT_NEAR(ComputeCost(hw).memory_bound(1e9).time_s, 2e-3 + 5e-6, 1e-15);
}

TEST(ComputeCost, MeasuredGemmSampleOverridesNearbyShapesOnly) {
  HwProfile hw = round_profile();
  const HwProfile analytical_hw = hw;
  // Measured: 4096^3 ran at 500 TFLOP/s, an efficiency of 0.5 instead of the analytical
  // 0.8 * u (u = 1024 / 1100 for 1024 tiles on 100 SMs).
  hw.gemm_samples.push_back({4096, 4096, 4096, Precision::kBf16, 500});
  const ComputeCost cost(hw);
  const ComputeCost analytical(analytical_hw);

  // 4096 x 4096 x 8192 is one factor of 2 away (|log2| distance 1 <= 1.5): t = 2mnk / 500e12.
  const GemmShape near{4096, 4096, 8192};
  const KernelTime t_near = cost.gemm(near, Precision::kBf16);
  EXPECT_EQ(t_near.source, CostSource::kMeasured);
  EXPECT_NEAR(t_near.time_s, near.flops() / (500 * kTera), kRel * t_near.time_s);

  // 512^3 is 9 octaves away: the analytical model answers.
  const GemmShape far{512, 512, 512};
  const KernelTime t_far = cost.gemm(far, Precision::kBf16);
  EXPECT_EQ(t_far.source, CostSource::kOutsideTable);  // the table exists, this shape is not in it
  EXPECT_DOUBLE_EQ(t_far.time_s, analytical.gemm(far, Precision::kBf16).time_s);

  // A bf16 sample says nothing about fp8.
  EXPECT_EQ(cost.gemm(near, Precision::kFp8).source, CostSource::kAnalytical);
}

TEST(ComputeCost, MeasuredMemoryTableInterpolatesPerKernelInLogBytes) {
  HwProfile hw = round_profile();  // analytical: 1000 GB/s, no overhead
  // copy: 100 GB/s at 1 MB, 400 GB/s at 4 MB; triad: 200 GB/s at 1 MB, 200 GB/s at 16 MB.
  hw.memory_samples = {{"copy", 1e6, 100, 0.01},
                       {"copy", 4e6, 400, 0.01},
                       {"triad", 1e6, 200, 0.01},
                       {"triad", 16e6, 200, 0.01}};
  TableUse use;
  const ComputeCost cost(hw, &use);
  // 2 MB: copy at w = 1/2 -> 250 GB/s, triad 200; the kernels that bracket it are averaged.
  KernelTime t = cost.memory_bound(2e6);
  EXPECT_EQ(t.source, CostSource::kMeasured);
  EXPECT_NEAR(t.time_s, 2e6 / (225 * kGB), kRel * t.time_s);
  // 8 MB: only triad brackets it.
  t = cost.memory_bound(8e6);
  EXPECT_NEAR(t.time_s, 8e6 / (200 * kGB), kRel * t.time_s);
  // Beyond every kernel's sizes: the analytical model, counted as outside the table.
  t = cost.memory_bound(1e9);
  EXPECT_EQ(t.source, CostSource::kOutsideTable);
  EXPECT_NEAR(t.time_s, 1e9 / (1000 * kGB), kRel * t.time_s);
  EXPECT_EQ(use.n[TableUse::kMemory][static_cast<int>(CostSource::kMeasured)], 2);
  EXPECT_EQ(use.n[TableUse::kMemory][static_cast<int>(CostSource::kOutsideTable)], 1);
}

TEST(ComputeCost, MeasuredAttentionTableUsesNearestHeadSizeAndLogSeq) {
  HwProfile hw = round_profile();
  hw.attention_samples = {{1024, 128, false, 100, 0},
                          {4096, 128, false, 300, 0},
                          {1024, 64, false, 50, 0},
                          {4096, 64, false, 60, 0},
                          {1024, 128, true, 80, 0}};
  const ComputeCost cost(hw);
  // seq 2048, head 128, forward: w = 1/2 -> 200 TFLOP/s over the causal FLOPs.
  KernelTime t = cost.attention(8, 2048, 2048, 128, 128, true, false);
  EXPECT_EQ(t.source, CostSource::kMeasured);
  const double fwd = 2.0 * 8 * 2048 * 2048 * 256 * 0.5;
  EXPECT_NEAR(t.time_s, fwd / (200 * kTera), kRel * t.time_s);
  // head 96 is nearer 128 than 64 in log (0.415 vs 0.585 octaves).
  EXPECT_NEAR(measured_attention_tflops(hw.attention_samples, 2048, 96, false), 200, 1e-9);
  // Backward has one length only: 1024 is measured, 2048 is outside and analytical.
  EXPECT_EQ(cost.attention(8, 1024, 1024, 128, 128, true, true).source, CostSource::kMeasured);
  t = cost.attention(8, 2048, 2048, 128, 128, true, true);
  EXPECT_EQ(t.source, CostSource::kOutsideTable);
  EXPECT_NEAR(t.time_s, 2.5 * fwd / (1000 * kTera * 0.4), kRel * t.time_s);
}

TEST(ComputeCost, MeasuredGemmTableInterpolatesTrilinearlyInLogShape) {
  const std::vector<GemmSample> t = {{1024, 1024, 1024, Precision::kBf16, 100},
                                     {2048, 1024, 1024, Precision::kBf16, 200},
                                     {1024, 1024, 1024, Precision::kFp32, 7}};
  bool has = false;
  // Halfway in log(m) between the two measured m: halfway in TFLOP/s.
  EXPECT_NEAR(measured_gemm_tflops(t, Precision::kBf16, 1448, 1024, 1024, &has), 150, 0.1);
  EXPECT_TRUE(has);
  // Up to a factor 2 beyond the measured range: held at the edge.
  EXPECT_DOUBLE_EQ(measured_gemm_tflops(t, Precision::kBf16, 4096, 1024, 1024, &has), 200);
  EXPECT_DOUBLE_EQ(measured_gemm_tflops(t, Precision::kBf16, 1024, 600, 1024, &has), 100);
  // Further out: not measured.
  EXPECT_DOUBLE_EQ(measured_gemm_tflops(t, Precision::kBf16, 8192, 1024, 1024, &has), 0);
  // Each precision has its own table.
  EXPECT_DOUBLE_EQ(measured_gemm_tflops(t, Precision::kFp32, 1024, 1024, 1024, &has), 7);
  EXPECT_DOUBLE_EQ(measured_gemm_tflops(t, Precision::kFp8, 1024, 1024, 1024, &has), 0);
  EXPECT_FALSE(has);
}

TEST(ComputeCost, Fp32GemmAndAttentionRunAtTheFp32PeakWithFourByteElements) {
  HwProfile hw = round_profile();
  hw.fp32_tflops = 100;
  const ComputeCost cost(hw);
  // The whole-wave shape of the first test: t = 2mnk / (100e12 * 0.8), and 4-byte operands.
  const int64_t m = 2560, n = 2560, k = 8192;
  const KernelTime t = cost.gemm({m, n, k}, Precision::kFp32);
  EXPECT_NEAR(t.time_s, 2.0 * m * n * k / (100 * kTera * 0.8), kRel * t.time_s);
  EXPECT_DOUBLE_EQ(t.bytes, 4.0 * (m * k + k * n) + 4.0 * m * n);
  // Attention: the fp32 peak (forward efficiency 0.5) and 4-byte Q, K, V, O.
  const KernelTime a = cost.attention(8, 4096, 4096, 128, 128, true, false, Precision::kFp32);
  const double flops = 2.0 * 8 * 4096 * 4096 * 256 * 0.5;
  EXPECT_NEAR(a.time_s, flops / (100 * kTera * 0.5), kRel * a.time_s);
  EXPECT_DOUBLE_EQ(a.bytes, 4.0 * 8 * (4096 * 256 + 4096 * 256));
}

// Grouped GEMM (Transformer Engine's GroupedLinear: one GEMM per expert over 4 streams). 128
// experts of FFN 768 at 64 tokens each (gate and up: n = 1536, k = 2048) on round_profile with
// HBM fast enough that every GEMM here is compute-bound:
//   one expert   12 tiles (64 rows pad to 128), split-K 8 -> 96 of 100 SMs:
//                t1 = 2 * 64 * 1536 * 2048 / (1000e12 * 0.8 * 0.5 * 0.96)
//   streams      ceil(128 / 4) * t1 = 32 t1
//   SMs          the padded 128 * 128 rows: 1536 tiles in 16 waves (u = 0.96),
//                t = 2 * 16384 * 1536 * 2048 / (1000e12 * 0.8 * 0.96)
// and one dense GEMM of the same FLOPs (m = 8192: 768 tiles, 8 waves) takes half the SM bound.
TEST(ComputeCost, GroupedGemmOfSkinnyExpertsPadsEachExpertsTiles) {
  HwProfile hw = round_profile();
  hw.hbm_bw_gbps = 1e6;
  const ComputeCost cost(hw);
  const KernelTime g = cost.grouped_gemm({64, 1536, 2048, 128}, Precision::kBf16);
  const double t1 = 2.0 * 64 * 1536 * 2048 / (1000 * kTera * 0.8 * 0.5 * 0.96);
  const double sms = 2.0 * 16384 * 1536 * 2048 / (1000 * kTera * 0.8 * 0.96);
  EXPECT_NEAR(g.time_s, std::max(32 * t1, sms), kRel * sms);
  EXPECT_DOUBLE_EQ(g.flops, 128 * 2.0 * 64 * 1536 * 2048);
  const KernelTime dense = cost.gemm({128 * 64, 1536, 2048}, Precision::kBf16);
  EXPECT_DOUBLE_EQ(dense.flops, g.flops);
  EXPECT_NEAR(g.time_s / dense.time_s, 2.0, 1e-9);
}

// With a launch cost per GEMM the 4 streams bound it: 32 launches of (t1 + 10 us) in a row.
TEST(ComputeCost, GroupedGemmOfManyShortExpertsIsBoundByItsLaunches) {
  HwProfile hw = round_profile();
  hw.hbm_bw_gbps = 1e6;
  hw.kernel_overhead_us = 10;
  const ComputeCost cost(hw);
  const KernelTime g = cost.grouped_gemm({64, 1536, 2048, 128}, Precision::kBf16);
  const double t1 = 2.0 * 64 * 1536 * 2048 / (1000 * kTera * 0.8 * 0.5 * 0.96) + 10 * kUs;
  EXPECT_NEAR(g.time_s, 32 * t1, kRel * g.time_s);
}

// On an H100 profile (128 x 256 tiles, 132 SMs, K overhead, launch cost) the 128 skinny experts
// run far below one dense GEMM of their FLOPs, and 8 experts of 4096 tokens each nearly match it.
TEST(ComputeCost, GroupedGemmApproachesDenseOnlyAtLargeTokensPerExpert) {
  const HwProfile hw = find_profile(builtin_profiles().value(), "h100-sxm-80gb", "t").value();
  const ComputeCost cost(hw);
  const KernelTime skinny = cost.grouped_gemm({64, 1536, 2048, 128}, Precision::kBf16);
  const KernelTime skinny_dense = cost.gemm({128 * 64, 1536, 2048}, Precision::kBf16);
  EXPECT_GT(skinny.time_s, 2.5 * skinny_dense.time_s);
  const KernelTime wide = cost.grouped_gemm({4096, 1536, 2048, 8}, Precision::kBf16);
  const KernelTime wide_dense = cost.gemm({8 * 4096, 1536, 2048}, Precision::kBf16);
  EXPECT_LT(wide.time_s, 1.15 * wide_dense.time_s);
  EXPECT_GE(wide.time_s, wide_dense.time_s * (1 - 1e-9));
}

}  // namespace
}  // namespace parallax
