// DualPipe (DeepSeek-V3, arXiv 2412.19437 Sec. 3.2.1; deepseek-ai/DualPipe) and Megatron-LM's
// combined 1F1B: the schedules, their replay by the engine, and what simulate() makes of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/json_io.h"
#include "core/model_zoo.h"
#include "simulator/engine.h"
#include "simulator/schedules/pipeline_schedule.h"
#include "simulator/simulate.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

using Schedule = std::vector<std::vector<PipelineOp>>;
constexpr int kEp = static_cast<int>(CostCategory::kEpComm);

Schedule dualpipe(int pp, int m) {
  auto s = build_pipeline_schedule(ScheduleKind::kDualPipe, pp, 1, m);
  EXPECT_TRUE(s.ok()) << s.error_text();
  return s.ok() ? s.value() : Schedule{};
}

// Rank r runs chunk 0 (stage r) for microbatches 0..m/2-1 and chunk 1 (stage pp-1-r) for
// m/2..m-1: each once forward and once backward, whole or as B then W, forward first.
TEST(DualPipe, EveryMicrobatchOnceOnItsChunk) {
  for (int pp : {2, 4, 8}) {
    for (int m : {2 * pp, 2 * pp + 2, 20}) {
      const Schedule s = dualpipe(pp, m);
      ASSERT_EQ(s.size(), static_cast<size_t>(pp));
      for (int r = 0; r < pp; ++r) {
        std::map<std::tuple<int, int, int>, int> seen;  // microbatch, chunk, kind -> position
        for (size_t i = 0; i < s[r].size(); ++i) {
          const PipelineOp& op = s[r][i];
          EXPECT_EQ(op.chunk, op.microbatch < m / 2 ? 0 : 1) << "pp=" << pp << " r=" << r;
          EXPECT_TRUE(seen.emplace(std::tuple{op.microbatch, op.chunk, static_cast<int>(op.kind)},
                                   static_cast<int>(i))
                          .second);
        }
        for (int mb = 0; mb < m; ++mb) {
          const int c = mb < m / 2 ? 0 : 1;
          auto at = [&](PassKind k) {
            auto it = seen.find({mb, c, static_cast<int>(k)});
            return it == seen.end() ? -1 : it->second;
          };
          const int f = at(PassKind::kForward), b = at(PassKind::kBackward);
          const int bi = at(PassKind::kBackwardInput), w = at(PassKind::kBackwardWeight);
          ASSERT_GE(f, 0) << "pp=" << pp << " m=" << m << " r=" << r << " mb=" << mb;
          EXPECT_TRUE((b > f && bi < 0 && w < 0) || (b < 0 && bi > f && w > bi))
              << "pp=" << pp << " m=" << m << " r=" << r << " mb=" << mb;
        }
      }
    }
  }
}

// DualPipe's asserts: an even pp, an even number of microbatches of at least 2 pp.
TEST(DualPipe, RefusesOddPipelinesAndTooFewMicrobatches) {
  auto odd = build_pipeline_schedule(ScheduleKind::kDualPipe, 3, 1, 12);
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.error_text().find("needs an even pp"), std::string::npos) << odd.error_text();
  auto few = build_pipeline_schedule(ScheduleKind::kDualPipe, 4, 1, 6);
  ASSERT_FALSE(few.ok());
  EXPECT_NE(few.error_text().find("at least 2*pp=8, got 6"), std::string::npos) << few.error_text();
  EXPECT_FALSE(build_pipeline_schedule(ScheduleKind::kDualPipe, 4, 1, 9).ok());
}

// "Activation per device: PP + 1" (deepseek-ai/DualPipe README): chunk-microbatches whose forward
// has run and whose backward has not, at most pp + 1 on any rank (1F1B holds pp on rank 0).
TEST(DualPipe, HoldsAtMostPpPlusOneChunksOfActivations) {
  for (int pp : {4, 8}) {
    const Schedule s = dualpipe(pp, 4 * pp);
    int most = 0;
    for (const auto& ops : s) {
      int now = 0;
      for (const PipelineOp& op : ops) {
        if (op.kind == PassKind::kForward) most = std::max(most, ++now);
        if (op.kind == PassKind::kBackward || op.kind == PassKind::kBackwardInput) --now;
      }
    }
    EXPECT_EQ(most, pp + 1) << "pp=" << pp;
  }
}

PassCost pass(double compute_s, double ep_s = 0) {
  PassCost p;
  p.add(OpCost{"compute", CostCategory::kCompute, compute_s, compute_s, 0});
  if (ep_s > 0) p.add(OpCost{"ep", CostCategory::kEpComm, ep_s, ep_s, 0});
  return p;
}

/// pp stages whose forward takes f, backward b (input gradient b - w, weight gradient w), each
/// with `ep` of exposed expert-parallel communication in forward and in backward.
EngineSetup fixed(ScheduleKind kind, int pp, int vpp, int m, double f, double b, double w,
                  double ep = 0) {
  EngineSetup s;
  s.plan.pp = pp;
  s.plan.vpp = vpp;
  s.plan.micro_batch = 1;
  s.plan.global_batch = m;
  s.plan.schedule = kind;
  const int stages = kind == ScheduleKind::kDualPipe ? pp : pp * vpp;
  for (int vs = 0; vs < stages; ++vs) {
    StageCost st;
    st.layers = 1;
    st.forward = pass(f - ep, ep);
    st.backward = pass(b - ep, ep);
    st.backward_input = pass(b - w - ep, ep);
    st.backward_weight = pass(w);
    s.stages.push_back(st);
  }
  s.grad_sync_s.assign(stages, 0);
  s.param_sync_s.assign(stages, 0);
  s.optimizer_s.assign(pp, 0);
  return s;
}

EngineResult run(const EngineSetup& s, bool paired = false) {
  auto sched = build_pipeline_schedule(s.plan.schedule, s.plan.pp, s.plan.vpp,
                                       static_cast<int>(s.plan.num_microbatches()), paired);
  EXPECT_TRUE(sched.ok()) << sched.error_text();
  return sched.ok() ? run_engine(s, sched.value()) : EngineResult{};
}

// The DualPipe README's bubble, (PP/2 - 1)(F&B + B - 3W), over the m (F + B) of work every rank
// does; without communication to hide, F&B = F + B.
TEST(DualPipe, BubbleFollowsTheReadmeFormula) {
  const double f = 1, b = 2, w = 1;
  for (int pp : {2, 4, 8}) {
    for (int m : {2 * pp, 4 * pp, 4 * pp + 2}) {
      const EngineResult r = run(fixed(ScheduleKind::kDualPipe, pp, 1, m, f, b, w));
      EXPECT_DOUBLE_EQ(r.step_time_s, m * (f + b) + (pp / 2 - 1) * ((f + b) + b - 3 * w))
          << "pp=" << pp << " m=" << m;
    }
  }
}

// A pair's communication hides behind the other pass's compute:
//   t = C + max(0, A - C) + slowdown min(A, C).
TEST(DualPipe, PairedPassesHideEachOthersExpertCommunication) {
  EXPECT_NEAR(paired_time(pass(3, 1), pass(5, 2), 0), 8, 1e-12);
  EXPECT_NEAR(paired_time(pass(3, 1), pass(5, 2), 0.25), 8 + 0.25 * 3, 1e-12);
  EXPECT_NEAR(paired_time(pass(1, 4), pass(1, 4), 0), 8, 1e-12);  // A - C = 6 shows
}

// Megatron's combined 1F1B without pipelining: F(0), then F(i+1) paired with B(i), then B(m-1);
// each pair hides its two passes' EP communication (1 each) behind their compute (f - 1, b - 1).
TEST(DualPipe, CombinedOneFOneBOverlapsForwardWithTheLastBackward) {
  const double f = 3, b = 5, ep = 1;
  for (int m : {1, 2, 4, 8}) {
    const EngineResult plain = run(fixed(ScheduleKind::k1F1B, 1, 1, m, f, b, 1, ep));
    EXPECT_DOUBLE_EQ(plain.step_time_s, m * (f + b));
    const EngineResult paired = run(fixed(ScheduleKind::k1F1B, 1, 1, m, f, b, 1, ep), true);
    EXPECT_DOUBLE_EQ(paired.step_time_s, f + (m - 1) * (f + b - 2 * ep) + b) << "m=" << m;
    EXPECT_DOUBLE_EQ(paired.ranks[0].busy_by_category[kEp], 2 * ep) << "m=" << m;
  }
}

const HwProfile& h100() {
  static const HwProfile hw =
      find_profile(builtin_profiles().value(), "h100-sxm-80gb", "t").value();
  return hw;
}

ParallelPlan mixtral_plan(ScheduleKind kind) {
  ParallelPlan p;
  p.tp = 2;
  p.pp = 4;
  p.dp = 8;
  p.ep = 8;
  p.sequence_parallel = true;
  p.micro_batch = 1;
  p.global_batch = 64;
  p.seq_len = 4096;
  p.zero_stage = 1;
  p.recompute = Recompute::kSelective;
  p.schedule = kind;
  return p;
}

// "Parameter per device: 2x": rank r holds stages r and pp-1-r, so its weights are those two
// stages' of 1F1B; the planner's bounds stay exact for memory and below the simulated step.
TEST(DualPipe, EachRankHoldsTwoStagesParameters) {
  const ModelSpec m = find_zoo_model("mixtral-8x7b", "t").value();
  const Cluster c{h100(), 64};
  auto one = simulate(m, c, mixtral_plan(ScheduleKind::k1F1B));
  auto dual = simulate(m, c, mixtral_plan(ScheduleKind::kDualPipe));
  ASSERT_TRUE(one) << one.error_text();
  ASSERT_TRUE(dual) << dual.error_text();
  for (int r = 0; r < 4; ++r)
    EXPECT_DOUBLE_EQ(dual->stages[r].memory.weights_bytes,
                     one->stages[r].memory.weights_bytes + one->stages[3 - r].memory.weights_bytes)
        << "rank " << r;
  auto bound = step_bounds(m, c, mixtral_plan(ScheduleKind::kDualPipe));
  ASSERT_TRUE(bound) << bound.error_text();
  EXPECT_DOUBLE_EQ(bound->peak_memory_gib, dual->peak_memory_gib);
  EXPECT_LE(bound->step_time_lower_s, dual->step_time_s);
  ParallelPlan paired = mixtral_plan(ScheduleKind::kInterleaved1F1B);
  paired.vpp = 2;
  paired.overlap_moe_comm = true;
  auto sim = simulate(m, c, paired);
  ASSERT_TRUE(sim) << sim.error_text();
  auto pb = step_bounds(m, c, paired);
  ASSERT_TRUE(pb) << pb.error_text();
  EXPECT_DOUBLE_EQ(pb->peak_memory_gib, sim->peak_memory_gib);
  EXPECT_LE(pb->step_time_lower_s, sim->step_time_s);
}

}  // namespace
}  // namespace parallax
