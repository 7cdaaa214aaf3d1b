// step_bounds(): the planner's engine-free figures against the full simulation.
#include <gtest/gtest.h>

#include "core/json_io.h"
#include "core/model_zoo.h"
#include "simulator/simulate.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

struct Case {
  const char* model;
  int gpus, tp, pp, cp, ep, vpp, mbs, zero;
  ScheduleKind schedule;
  Recompute recompute;
  bool fsdp;
};

ParallelPlan plan_of(const Case& k, int64_t gbs, int64_t seq) {
  ParallelPlan p;
  p.tp = k.tp;
  p.pp = k.pp;
  p.cp = k.cp;
  p.dp = k.gpus / (k.tp * k.pp * k.cp);
  p.ep = k.ep;
  p.vpp = k.vpp;
  p.micro_batch = k.mbs;
  p.global_batch = gbs;
  p.seq_len = seq;
  p.sequence_parallel = k.tp > 1;
  p.zero_stage = k.zero;
  p.fsdp = k.fsdp;
  p.schedule = k.schedule;
  p.recompute = k.recompute;
  return p;
}

// Memory is the same number simulate() reports; the step-time bound never exceeds the simulated
// step and, for 1F1B on equal stages, is close to it (the closed form of a 1F1B step is
// (pp - 1 + m)(F + B) and the bound is exactly that plus the optimizer).
TEST(StepBounds, MemoryExactAndTimeBelowSimulation) {
  const HwProfile hw = find_profile(builtin_profiles().value(), "h100-sxm-80gb", "t").value();
  const Case cases[] = {
      {"llama3.1-8b", 64, 1, 1, 1, 1, 1, 1, 0, ScheduleKind::k1F1B, Recompute::kNone, true},
      {"llama3.1-70b", 64, 8, 4, 1, 1, 1, 1, 1, ScheduleKind::k1F1B, Recompute::kNone, false},
      {"llama3.1-70b", 64, 8, 4, 1, 1, 5, 1, 1, ScheduleKind::kInterleaved1F1B,
       Recompute::kSelective, false},
      {"llama3.1-70b", 64, 4, 8, 1, 1, 1, 2, 0, ScheduleKind::kZeroBubbleH1, Recompute::kFull,
       false},
      {"llama3.1-70b", 64, 8, 2, 2, 1, 1, 1, 3, ScheduleKind::k1F1B, Recompute::kNone, false},
      {"mixtral-8x7b", 64, 2, 4, 1, 8, 1, 1, 1, ScheduleKind::k1F1B, Recompute::kSelective, false},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string(k.model) + " tp" + std::to_string(k.tp) + " pp" +
                 std::to_string(k.pp) + " " + to_string(k.schedule));
    const ModelSpec m = find_zoo_model(k.model, "t").value();
    const Cluster c{hw, k.gpus};
    const ParallelPlan p = plan_of(k, 256, 8192);
    auto sim = simulate(m, c, p);
    auto b = step_bounds(m, c, p);
    ASSERT_TRUE(sim) << sim.error_text();
    ASSERT_TRUE(b) << b.error_text();
    EXPECT_NEAR(b->peak_memory_gib, sim->peak_memory_gib, 1e-9 * sim->peak_memory_gib);
    EXPECT_LE(b->step_time_lower_s, sim->step_time_s * (1 + 1e-12));
    EXPECT_GT(b->step_time_lower_s, 0.5 * sim->step_time_s);
  }
}

TEST(StepBounds, OneF1BBoundIsTheClosedForm) {
  // Uniform stages, no data-parallel work: the bound is (pp - 1 + m)(F + B) + p2p hops + opt,
  // and the simulated step adds only the exposed p2p and the sync.
  HwProfile hw = testing::round_profile();
  testing::GptShape shape;
  shape.name = "gpt-bound";
  shape.layers = 8;
  shape.hidden = 4096;
  shape.heads = 32;
  shape.vocab = 32000;
  const ModelSpec m = testing::gpt_model(shape);
  ParallelPlan p;
  p.pp = 4;
  p.global_batch = 16;
  p.seq_len = 2048;
  auto sim = simulate(m, Cluster{hw, 4}, p);
  auto b = step_bounds(m, Cluster{hw, 4}, p);
  ASSERT_TRUE(sim) << sim.error_text();
  ASSERT_TRUE(b) << b.error_text();
  EXPECT_LE(b->step_time_lower_s, sim->step_time_s);
  EXPECT_GT(b->step_time_lower_s, 0.9 * sim->step_time_s);
}

TEST(StepBounds, RejectsWhatSimulateRejects) {
  const ModelSpec m = find_zoo_model("llama3.1-8b", "t").value();
  ParallelPlan p;
  p.tp = 3;
  p.dp = 1;
  p.global_batch = 8;
  p.seq_len = 4096;
  auto b = step_bounds(m, Cluster{testing::round_profile(), 3}, p);
  ASSERT_FALSE(b);
  EXPECT_TRUE(testing::mentions(b.errors(), "must divide heads"));
}

}  // namespace
}  // namespace parallax

namespace parallax {
namespace {

// The bound replays at most 2*pp microbatches: the activation peak must still be the simulated
// one, and the bound below the simulated step, for every microbatch count and schedule.
TEST(StepBounds, ShortReplayKeepsPeakForAnyMicrobatchCount) {
  const HwProfile hw = find_profile(builtin_profiles().value(), "h100-sxm-80gb", "t").value();
  const ModelSpec m = find_zoo_model("llama3.1-8b", "t").value();
  struct Sched {
    ScheduleKind kind;
    int pp, vpp;
  } scheds[] = {{ScheduleKind::k1F1B, 4, 1},
                {ScheduleKind::kZeroBubbleH1, 4, 1},
                {ScheduleKind::kInterleaved1F1B, 4, 2},
                {ScheduleKind::kInterleaved1F1B, 2, 4},
                {ScheduleKind::k1F1B, 8, 1}};
  for (const Sched& s : scheds) {
    for (int mb = 1; mb <= 40; ++mb) {
      if (s.kind == ScheduleKind::kInterleaved1F1B && mb % s.pp != 0) continue;
      ParallelPlan p;
      p.pp = s.pp;
      p.vpp = s.vpp;
      p.schedule = s.kind;
      p.global_batch = mb;
      p.seq_len = 4096;
      p.recompute = Recompute::kSelective;
      SCOPED_TRACE(std::string(to_string(s.kind)) + " pp" + std::to_string(s.pp) + " m" +
                   std::to_string(mb));
      auto sim = simulate(m, Cluster{hw, s.pp}, p);
      auto b = step_bounds(m, Cluster{hw, s.pp}, p);
      ASSERT_TRUE(sim) << sim.error_text();
      ASSERT_TRUE(b) << b.error_text();
      EXPECT_NEAR(b->peak_memory_gib, sim->peak_memory_gib, 1e-9 * sim->peak_memory_gib);
      EXPECT_LE(b->step_time_lower_s, sim->step_time_s * (1 + 1e-12));
    }
  }
}

}  // namespace
}  // namespace parallax
