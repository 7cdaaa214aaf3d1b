// Closed-form checks of communication that overlaps compute: the parameter all-gather after the
// optimizer and the compute slowdown while collectives run beside compute.
#include <gtest/gtest.h>

#include "simulator/cost/collective_cost.h"
#include "simulator/engine.h"
#include "simulator/simulate.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

// One pipeline stage of `layers` layers whose forward takes f and backward b seconds.
EngineSetup one_stage(int layers, double f, double b, double gather, int microbatches) {
  EngineSetup s;
  s.plan.global_batch = microbatches;
  s.plan.overlap_param_gather = true;
  StageCost st;
  st.layers = layers;
  st.forward.time_s = f;
  st.backward.time_s = b;
  s.stages = {st};
  s.grad_sync_s = {0};
  s.param_sync_s = {gather};
  s.optimizer_s = {0};
  return s;
}

double step(const EngineSetup& s) {
  auto sched = build_pipeline_schedule(ScheduleKind::k1F1B, 1, 1,
                                       static_cast<int>(s.plan.num_microbatches()));
  return run_engine(s, sched.value()).step_time_s;
}

TEST(OverlapParamGather, HiddenBehindTheFirstForwardWhenItFits) {
  // m (F + B) + G/L when G <= F: only the first bucket waits.
  const double f = 1.0, b = 2.0, g = 0.8;
  const int layers = 4, m = 3;
  EXPECT_NEAR(step(one_stage(layers, f, b, g, m)), m * (f + b) + g / layers, 1e-12);
}

TEST(OverlapParamGather, TheExcessOverTheFirstForwardShows) {
  // m (F + B) + G/L + (G - F) when G > F.
  const double f = 1.0, b = 2.0, g = 1.5;
  const int layers = 5, m = 2;
  EXPECT_NEAR(step(one_stage(layers, f, b, g, m)), m * (f + b) + g / layers + (g - f), 1e-12);
}

TEST(OverlapParamGather, WithoutOverlapTheWholeGatherShows) {
  EngineSetup s = one_stage(4, 1.0, 2.0, 0.8, 3);
  s.plan.overlap_param_gather = false;
  EXPECT_NEAR(step(s), 3 * 3.0 + 0.8, 1e-12);
}

TEST(OverlapSlowdown, OverlappedGatherSlowsComputeByTheCommShareOfSms) {
  // The hidden part of the gather, G - G/L, slows compute by the fraction k.
  const double f = 1.0, b = 2.0, g = 0.8, k = 0.125;
  const int layers = 4, m = 3;
  EngineSetup s = one_stage(layers, f, b, g, m);
  s.overlap_slowdown = k;
  EXPECT_NEAR(step(s), m * (f + b) + g / layers + k * (g - g / layers), 1e-12);
}

TEST(OverlapSlowdown, IsTheShareOfSmsTheCollectiveOccupies) {
  HwProfile hw;
  hw.sm_count = 128;
  hw.comm_sms = 16;
  EXPECT_DOUBLE_EQ(CollectiveCost(hw).overlap_slowdown(), 16.0 / 128.0);
  hw.comm_sms = 0;
  EXPECT_DOUBLE_EQ(CollectiveCost(hw).overlap_slowdown(), 0.0);
}

// Tied embeddings split across the pipeline: the first and last stages all-reduce the fp32
// embedding gradient between them, which lengthens the step; untied, they do not.
TEST(TiedEmbeddings, FirstAndLastStagesAllReduceTheEmbeddingGradient) {
  ModelSpec m = testing::gpt_model({.name = "tied",
                                    .layers = 4,
                                    .hidden = 1024,
                                    .heads = 16,
                                    .vocab = 32000,
                                    .tied_embeddings = true});
  ParallelPlan p;
  p.pp = 2;
  p.global_batch = 4;
  p.seq_len = 1024;
  const Cluster c{testing::round_profile(), 2};
  const double tied = simulate(m, c, p)->step_time_s;
  // Two ranks over NVLink: all-reduce of 4 V h bytes, t = 2 (1/2) S / B (latency 0).
  const double ar = 4.0 * 32000 * 1024 / (c.hw.scale_up_bw_gbps * c.hw.scale_up_efficiency * 1e9);
  m.tied_embeddings = false;
  const double untied = simulate(m, c, p)->step_time_s;
  EXPECT_GT(tied, untied);
  EXPECT_LE(tied - untied, ar + 1e-12);
}

}  // namespace
}  // namespace parallax
