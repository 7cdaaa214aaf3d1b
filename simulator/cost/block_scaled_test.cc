// The block-scaled recipes (MXFP8, NVFP4) in the one home of GEMM cost: the math at the format's
// rate, the quantization casts as memory-bound work, closed forms with round numbers, then the
// B200's own profile.

#include <gtest/gtest.h>

#include <cstdint>

#include "core/hw_profile.h"
#include "core/json_io.h"
#include "core/units.h"
#include "simulator/cost/compute_cost.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

using testing::round_profile;

constexpr double kRel = 1e-12;

/// round_profile() with MXFP8 at 2000 and NVFP4 at 4000 TFLOP/s, both at 0.8.
HwProfile blackwell_like() {
  HwProfile hw = round_profile();
  hw.mxfp8_tflops = 2000;
  hw.nvfp4_tflops = 4000;
  hw.mxfp8_gemm_efficiency = 0.8;
  hw.nvfp4_gemm_efficiency = 0.8;
  return hw;
}

HwProfile builtin(const std::string& name) {
  auto profiles = builtin_profiles();
  PX_CHECK(profiles.ok(), profiles.error_text());
  auto hw = find_profile(*profiles, name, "test");
  PX_CHECK(hw.ok(), hw.error_text());
  return *hw;
}

TEST(BlockScaled, OperandBytesCountTheBlockScales) {
  EXPECT_DOUBLE_EQ(operand_bytes(Precision::kMxfp8), 1.0 + 1.0 / 32);  // e4m3 + e8m0 per 32
  EXPECT_DOUBLE_EQ(operand_bytes(Precision::kNvfp4), 0.5 + 1.0 / 16);  // e2m1 + e4m3 per 16
  EXPECT_DOUBLE_EQ(operand_bytes(Precision::kNvfp4, /*weight=*/true), 0.5 + 1.0 / 256);  // 16x16
  EXPECT_DOUBLE_EQ(operand_bytes(Precision::kMxfp8, true), operand_bytes(Precision::kMxfp8));
}

TEST(BlockScaled, GemmRunsAtTheFormatsRateReadingQuantizedOperands) {
  const HwProfile hw = blackwell_like();
  const ComputeCost cost(hw);
  // m = n = 12800 (100 x 100 tiles, 100 full waves), k = 4096: compute-bound,
  //   t = 2mnk / (peak * 0.8); bytes = e (mk + kn) + 2 mn.
  const int64_t m = 12800, n = 12800, k = 4096;
  const double flops = 2.0 * m * n * k, a = 1.0 * m * k, w = 1.0 * k * n, c = 1.0 * m * n;
  const KernelTime mx = cost.gemm({m, n, k}, Precision::kMxfp8);
  const KernelTime nv = cost.gemm({m, n, k}, Precision::kNvfp4);
  EXPECT_NEAR(mx.time_s, flops / (2000 * kTera * 0.8), kRel * mx.time_s);
  EXPECT_NEAR(nv.time_s, flops / (4000 * kTera * 0.8), kRel * nv.time_s);
  EXPECT_DOUBLE_EQ(mx.bytes, (1 + 1.0 / 32) * (a + w) + 2 * c);
  EXPECT_DOUBLE_EQ(nv.bytes, (0.5 + 1.0 / 16) * a + (0.5 + 1.0 / 256) * w + 2 * c);
}

TEST(BlockScaled, CastsAreEachOperandQuantizedOnceIntoBothCopies) {
  const HwProfile hw = blackwell_like();
  const ComputeCost cost(hw);
  const int64_t m = 4096, n = 2048, k = 1024, reuse = 4;
  const GemmShape s{m, n, k};
  const double bw = 1000 * kGB, a = 1.0 * m * k, w = 1.0 * k * n, c = 1.0 * m * n;
  auto casts = [&](GemmPass pass, Precision p) {
    return cost.block_scaled_casts(s, pass, reuse, p).time_s;
  };
  // MXFP8: read bf16 (2) and write the row-wise and column-wise copies, 2 (1 + 1/32): 4.0625.
  const double mx = 2 + 2 * (1 + 1.0 / 32);
  EXPECT_NEAR(casts(GemmPass::kForward, Precision::kMxfp8), mx * (a + w / reuse) / bw, 1e-15);
  EXPECT_NEAR(casts(GemmPass::kDataGradient, Precision::kMxfp8), mx * c / bw, 1e-15);
  EXPECT_EQ(casts(GemmPass::kWeightGradient, Precision::kMxfp8), 0.0);
  // NVFP4: an amax pass (2) before the same, copies of 1/2 + 1/16 (X, dY: 5.125) or, for the
  // weight's 16x16 blocks, 1/2 + 1/256 (5.0078125).
  const double nv_act = 2 + 2 + 2 * (0.5 + 1.0 / 16), nv_w = 2 + 2 + 2 * (0.5 + 1.0 / 256);
  EXPECT_NEAR(casts(GemmPass::kForward, Precision::kNvfp4), (nv_act * a + nv_w * w / reuse) / bw,
              1e-15);
  EXPECT_NEAR(casts(GemmPass::kDataGradient, Precision::kNvfp4), nv_act * c / bw, 1e-15);
  EXPECT_EQ(casts(GemmPass::kWeightGradient, Precision::kNvfp4), 0.0);
  EXPECT_EQ(cost.block_scaled_casts(s, GemmPass::kForward, reuse, Precision::kFp8).time_s, 0.0);
}

/// One linear layer of training on `hw` in `p`: its forward, data-gradient and weight-gradient
/// GEMMs, with their casts when `casts`; the weight cast once for 8 microbatches.
double linear_layer_s(const HwProfile& hw, Precision p, bool casts) {
  const ComputeCost cost(hw);
  const int64_t t = 16384, h = 8192, w = 28672;  // tokens x hidden -> MLP width
  const GemmShape fwd{t, w, h}, dgrad{t, h, w}, wgrad{h, w, t};
  double s = cost.gemm(fwd, p).time_s + cost.gemm(dgrad, p).time_s + cost.gemm(wgrad, p).time_s;
  if (casts)
    for (GemmPass pass : {GemmPass::kForward, GemmPass::kDataGradient, GemmPass::kWeightGradient})
      s += cost.block_scaled_casts(fwd, pass, 8, p).time_s;
  return s;
}

// The B200's profile: MXFP8 runs the math at twice bf16's peak, yet a training layer gains less
// than the GEMMs alone once its casts are paid; NVFP4 gains more still.
TEST(BlockScaled, OnB200Mxfp8BeatsBf16ByLessThanItsGemmsAndNvfp4BeatsMxfp8) {
  const HwProfile hw = builtin("b200-sxm-180gb");
  const double bf16 = linear_layer_s(hw, Precision::kBf16, false);
  const double mx = linear_layer_s(hw, Precision::kMxfp8, true);
  const double mx_gemms = linear_layer_s(hw, Precision::kMxfp8, false);
  const double nv = linear_layer_s(hw, Precision::kNvfp4, true);
  const double nv_gemms = linear_layer_s(hw, Precision::kNvfp4, false);
  EXPECT_LT(mx, bf16);
  EXPECT_LT(bf16 / mx, hw.mxfp8_tflops / hw.bf16_tflops) << "faster than the peak ratio";
  EXPECT_LT(bf16 / mx, bf16 / mx_gemms) << "the casts cost nothing";
  EXPECT_LT(nv, mx);
  EXPECT_LT(bf16 / nv, bf16 / nv_gemms) << "the casts cost nothing";
  EXPECT_LT(bf16 / nv, hw.nvfp4_tflops / hw.bf16_tflops);
}

// Hopper has no block-scaled tensor cores: a GEMM asked in MXFP8 or NVFP4 prices as bf16
// (validate_plan refuses such plans; this is the cost model's own fallback).
TEST(BlockScaled, APartWithoutTheFormatRunsBf16) {
  const HwProfile hw = builtin("h100-sxm-80gb");
  EXPECT_FALSE(hw.supports(Precision::kMxfp8));
  EXPECT_FALSE(hw.supports(Precision::kNvfp4));
  const ComputeCost cost(hw);
  const GemmShape s{8192, 8192, 8192};
  EXPECT_DOUBLE_EQ(cost.gemm(s, Precision::kMxfp8).time_s, cost.gemm(s, Precision::kBf16).time_s);
  EXPECT_DOUBLE_EQ(cost.gemm(s, Precision::kNvfp4).time_s, cost.gemm(s, Precision::kBf16).time_s);
}

TEST(BlockScaled, MfuCountsAgainstTheBf16Peak) {
  const HwProfile hw = builtin("gb200-nvl72");
  EXPECT_EQ(hw.mfu_peak_tflops(Precision::kMxfp8), hw.bf16_tflops);
  EXPECT_EQ(hw.mfu_peak_tflops(Precision::kNvfp4), hw.bf16_tflops);
  EXPECT_EQ(hw.mfu_peak_tflops(Precision::kFp8), hw.fp8_tflops);
  EXPECT_GT(hw.peak_tflops(Precision::kNvfp4), hw.peak_tflops(Precision::kMxfp8));
}

}  // namespace
}  // namespace parallax
