// The lowering of block-scaled plans: which layers run the recipe, and what their linear layers
// keep for backward.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/hw_profile.h"
#include "core/model_spec.h"
#include "core/parallel_plan.h"
#include "core/rank_map.h"
#include "simulator/cost/compute_cost.h"
#include "simulator/lower.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

using testing::expect_rel;

/// A round-number part with MXFP8 at 2000 and NVFP4 at 4000 TFLOP/s.
HwProfile blackwell_like() {
  HwProfile hw = testing::round_profile();
  hw.mxfp8_tflops = 2000;
  hw.nvfp4_tflops = 4000;
  hw.mxfp8_gemm_efficiency = 0.8;
  hw.nvfp4_gemm_efficiency = 0.8;
  return hw;
}

ModelSpec gpt4() {
  return testing::gpt_model(
      {.name = "gpt-test", .layers = 4, .hidden = 1024, .heads = 16, .vocab = 32000});
}

/// One layer per pipeline stage, so that each stage's ops are one layer's.
ParallelPlan one_layer_per_stage(Precision prec) {
  ParallelPlan p;
  p.pp = 4;
  p.micro_batch = 2;
  p.seq_len = 2048;
  p.global_batch = 8;
  p.precision = prec;
  return p;
}

double forward_op_s(const StageCost& s, const std::string& name) {
  for (const OpCost& op : s.forward.ops)
    if (op.name == name) return op.busy_s;
  ADD_FAILURE() << "no forward op " << name;
  return 0;
}

// NVIDIA's NVFP4 recipe keeps the first and last layers' GEMMs in bf16
// (kNvfp4Bf16LayersAtStart/AtEnd = 1, Megatron's --first-last-layers-bf16 defaults): with one
// layer per stage, the first and last stages' MLP GEMMs cost what bf16 costs, the middle ones
// what NVFP4 does (here more: at hidden 1024 on 1000 GB/s of HBM the casts outweigh the math).
TEST(LowerPrecision, Nvfp4KeepsTheFirstAndLastLayersInBf16) {
  const HwProfile hw = blackwell_like();
  const ModelSpec m = gpt4();
  const ParallelPlan nv = one_layer_per_stage(Precision::kNvfp4);
  const ParallelPlan bf = one_layer_per_stage(Precision::kBf16);
  const auto nv_stages = lower_stages(m, nv, hw, RankMap(nv, hw.scale_up_domain));
  const auto bf_stages = lower_stages(m, bf, hw, RankMap(bf, hw.scale_up_domain));
  ASSERT_EQ(nv_stages.size(), 4u);
  for (int s : {0, 3})
    EXPECT_DOUBLE_EQ(forward_op_s(nv_stages[s], "mlp_up"), forward_op_s(bf_stages[s], "mlp_up"))
        << "stage " << s;
  for (int s : {1, 2})
    EXPECT_NE(forward_op_s(nv_stages[s], "mlp_up"), forward_op_s(bf_stages[s], "mlp_up"))
        << "stage " << s;
  EXPECT_DOUBLE_EQ(forward_op_s(nv_stages[1], "mlp_up"), forward_op_s(nv_stages[2], "mlp_up"));
  // MXFP8 keeps no layer in bf16.
  const ParallelPlan mx = one_layer_per_stage(Precision::kMxfp8);
  const auto mx_stages = lower_stages(m, mx, hw, RankMap(mx, hw.scale_up_domain));
  EXPECT_NE(forward_op_s(mx_stages[0], "mlp_up"), forward_op_s(bf_stages[0], "mlp_up"));
}

// The weight gradients read the column-wise quantized inputs the recipe keeps instead of bf16:
// the 14 sbh of a GPT layer's linear inputs (lower_test) at e / 2 of their bytes, e =
// operand_bytes (MXFP8 1 + 1/32, NVFP4 1/2 + 1/16), except in NVFP4's bf16 end layers.
TEST(LowerPrecision, LinearLayersKeepTheirQuantizedInputs) {
  const ModelSpec m = gpt4();
  ParallelPlan p = one_layer_per_stage(Precision::kBf16);
  p.pp = 1;
  const double bf16 = layer_weight_input_bytes(m, p, 1);
  p.precision = Precision::kMxfp8;
  expect_rel(layer_weight_input_bytes(m, p, 1), bf16 * (1 + 1.0 / 32) / 2);
  p.precision = Precision::kNvfp4;
  expect_rel(layer_weight_input_bytes(m, p, 1), bf16 * (0.5 + 1.0 / 16) / 2);
  expect_rel(layer_weight_input_bytes(m, p, 0), bf16);
  expect_rel(layer_weight_input_bytes(m, p, 3), bf16);
  // Stored activations: the norm outputs and the GELU output (2 sbh + 2 sbh + 8 sbh at tp = 1)
  // shrink to e / 2; the out-projection keeps its quantized input (sbh elements) beside the
  // attention output the attention backward reads.
  const double s = 2048, b = 2, h = 1024;
  ParallelPlan bf = p;
  bf.precision = Precision::kBf16;
  const double e = operand_bytes(Precision::kNvfp4);
  expect_rel(
      layer_activation_bytes(m, p, 1),
      layer_activation_bytes(m, bf, 1) - (2 + 2 + 8) * s * b * h + (1 + 1 + 4 + 1) * e * s * b * h);
}

}  // namespace
}  // namespace parallax
