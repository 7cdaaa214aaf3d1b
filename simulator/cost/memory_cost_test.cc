#include "simulator/cost/memory_cost.h"

#include <gtest/gtest.h>

#include "core/hw_profile.h"
#include "core/parallel_plan.h"
#include "core/units.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

constexpr double kP = 1e9;      // dense parameters on the rank
constexpr double kE = 8e8;      // routed-expert parameters on the rank
constexpr double kLayer = 5e7;  // largest layer's parameters
constexpr int kExpertDp = 2;    // expert-data-parallel group

/// dp = 4, cp = 2: dense states shard 8 ways under ZeRO/FSDP.
ParallelPlan plan(int zero_stage, bool fsdp = false) {
  ParallelPlan p;
  p.dp = 4;
  p.cp = 2;
  p.zero_stage = zero_stage;
  p.fsdp = fsdp;
  return p;
}

TEST(MemoryCost, MegatronStyleWithoutZeroKeepsEverything) {
  // bf16 params 2, fp32 grads 4, fp32 master + Adam m, v 12 bytes per parameter, replicated.
  const MemoryBreakdown m = parameter_memory(plan(0), kP, kE, kExpertDp, kLayer);
  EXPECT_DOUBLE_EQ(m.weights_bytes, 2 * (kP + kE));
  EXPECT_DOUBLE_EQ(m.grads_bytes, 4 * (kP + kE));
  EXPECT_DOUBLE_EQ(m.optimizer_bytes, 12 * (kP + kE));
  EXPECT_DOUBLE_EQ(m.buffers_bytes, 0);
  EXPECT_DOUBLE_EQ(m.total(), 18 * (kP + kE));
}

TEST(MemoryCost, Fp32TrainingKeepsNoMasterCopy) {
  // fp32 weights 4, grads 4, Adam m, v 8: 16 bytes per parameter; ZeRO-1 shards the 8.
  ParallelPlan p = plan(0);
  p.precision = Precision::kFp32;
  MemoryBreakdown m = parameter_memory(p, kP, kE, kExpertDp, kLayer);
  EXPECT_DOUBLE_EQ(m.total(), 16 * (kP + kE));
  p.zero_stage = 1;
  m = parameter_memory(p, kP, kE, kExpertDp, kLayer);
  EXPECT_DOUBLE_EQ(m.optimizer_bytes, 8 * (kP / 8 + kE / kExpertDp));
  // The optimizer step streams 32 bytes per parameter instead of 34.
  HwProfile hw;
  hw.hbm_bw_gbps = 100;
  hw.hbm_efficiency = 1;
  EXPECT_DOUBLE_EQ(optimizer_step_time_s(hw, 1e9, Precision::kFp32), 32e9 / 100e9);
  EXPECT_DOUBLE_EQ(optimizer_step_time_s(hw, 1e9), 34e9 / 100e9);
}

TEST(MemoryCost, ZeroStagesShardOverDpTimesCp) {
  // Dense states shard over dp * cp = 8, expert states over the expert-dp group (2).
  const double shard = kP / 8 + kE / kExpertDp;
  const double full = kP + kE;

  const MemoryBreakdown z1 = parameter_memory(plan(1), kP, kE, kExpertDp, kLayer);
  EXPECT_DOUBLE_EQ(z1.weights_bytes, 2 * full);
  EXPECT_DOUBLE_EQ(z1.grads_bytes, 4 * full);
  EXPECT_DOUBLE_EQ(z1.optimizer_bytes, 12 * shard);
  EXPECT_DOUBLE_EQ(z1.buffers_bytes, 0);

  const MemoryBreakdown z2 = parameter_memory(plan(2), kP, kE, kExpertDp, kLayer);
  EXPECT_DOUBLE_EQ(z2.weights_bytes, 2 * full);
  EXPECT_DOUBLE_EQ(z2.grads_bytes, 4 * shard);
  EXPECT_DOUBLE_EQ(z2.optimizer_bytes, 12 * shard);
  EXPECT_DOUBLE_EQ(z2.buffers_bytes, 0);

  // ZeRO-3 also shards the bf16 weights and keeps two gathered bf16 layers in buffers.
  const MemoryBreakdown z3 = parameter_memory(plan(3), kP, kE, kExpertDp, kLayer);
  EXPECT_DOUBLE_EQ(z3.weights_bytes, 2 * shard);
  EXPECT_DOUBLE_EQ(z3.grads_bytes, 4 * shard);
  EXPECT_DOUBLE_EQ(z3.optimizer_bytes, 12 * shard);
  EXPECT_DOUBLE_EQ(z3.buffers_bytes, 2 * 2 * kLayer);
}

TEST(MemoryCost, ShardingWithoutDataParallelismChangesNothing) {
  ParallelPlan p;  // dp = cp = 1
  p.zero_stage = 2;
  const MemoryBreakdown m = parameter_memory(p, kP, 0, 1, kLayer);
  EXPECT_DOUBLE_EQ(m.weights_bytes + m.grads_bytes + m.optimizer_bytes, 18 * kP);
}

TEST(MemoryCost, FsdpShardsFp32StatesEverywhere) {
  // FSDP2: fp32 params 4, fp32 grads 4, Adam m, v 8 bytes per parameter, all sharded, plus two
  // gathered bf16 layers (current and prefetched).
  const double shard = kP / 8 + kE / kExpertDp;
  const MemoryBreakdown m = parameter_memory(plan(0, /*fsdp=*/true), kP, kE, kExpertDp, kLayer);
  EXPECT_DOUBLE_EQ(m.weights_bytes, 4 * shard);
  EXPECT_DOUBLE_EQ(m.grads_bytes, 4 * shard);
  EXPECT_DOUBLE_EQ(m.optimizer_bytes, 8 * shard);
  EXPECT_DOUBLE_EQ(m.buffers_bytes, 2 * 2 * kLayer);
  EXPECT_DOUBLE_EQ(m.total(), 16 * shard + 4 * kLayer);
}

TEST(MemoryCost, FsdpWithPipelineKeepsTheStageGathered) {
  // With pp > 1 FSDP2 does not reshard between microbatches: the stage's bf16 parameters (2) and
  // its unsharded bf16 gradient accumulators (2) add 4 bytes per parameter of the stage.
  ParallelPlan p = plan(0, /*fsdp=*/true);
  p.pp = 2;
  const double shard = kP / 8 + kE / kExpertDp;
  const MemoryBreakdown m = parameter_memory(p, kP, kE, kExpertDp, kLayer);
  EXPECT_DOUBLE_EQ(m.weights_bytes, 4 * shard);
  EXPECT_DOUBLE_EQ(m.grads_bytes, 4 * shard);
  EXPECT_DOUBLE_EQ(m.optimizer_bytes, 8 * shard);
  EXPECT_DOUBLE_EQ(m.buffers_bytes, 2 * 2 * kLayer + 4 * (kP + kE));
}

TEST(MemoryCost, TotalSumsEveryField) {
  MemoryBreakdown m;
  m.weights_bytes = 1;
  m.grads_bytes = 2;
  m.optimizer_bytes = 4;
  m.activations_bytes = 8;
  m.buffers_bytes = 16;
  m.reserved_bytes = 32;
  EXPECT_DOUBLE_EQ(m.total(), 63);
}

TEST(MemoryCost, OptimizerStepStreamsThirtyFourBytesPerParameter) {
  HwProfile hw = testing::round_profile();  // HBM at 1000 GB/s
  hw.hbm_efficiency = 0.5;
  // t = 34 P / (bw * eff) = 34e9 / (1000e9 * 0.5) = 68 ms.
  EXPECT_NEAR(optimizer_step_time_s(hw, kP), 34 * kP / (1000 * kGB * 0.5), 1e-15);
  EXPECT_NEAR(optimizer_step_time_s(hw, kP), 68e-3, 1e-15);
  EXPECT_EQ(optimizer_step_time_s(hw, 0), 0);
}

}  // namespace
}  // namespace parallax
