#include "simulator/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/hw_profile.h"
#include "core/model_spec.h"
#include "core/parallel_plan.h"
#include "simulator/schedules/pipeline_schedule.h"
#include "simulator/simulate.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

using Schedule = std::vector<std::vector<PipelineOp>>;

constexpr int kBubble = static_cast<int>(CostCategory::kBubble);
constexpr int kCompute = static_cast<int>(CostCategory::kCompute);

PassCost pass(double time_s) {
  PassCost p;
  p.add(OpCost{"pass", CostCategory::kCompute, time_s, time_s, 0});
  return p;
}

/// A virtual stage whose passes take fixed times: forward f, full backward b (split into
/// input-gradient b/2 and weight-gradient b/2 for zero-bubble schedules).
StageCost fixed_stage(double f, double b, double act_bytes = 0, int layers = 1) {
  StageCost s;
  s.layers = layers;
  s.forward = pass(f);
  s.backward = pass(b);
  s.backward_input = pass(b / 2);
  s.backward_weight = pass(b / 2);
  s.act_bytes_per_microbatch = act_bytes;
  return s;
}

/// pp ranks, vpp chunks each, m microbatches; every virtual stage runs f / vpp and b / vpp so
/// that a pipeline rank does f and b per microbatch whatever vpp is. No p2p, sync or optimizer.
EngineSetup fixed_setup(ScheduleKind kind, int pp, int vpp, int m, double f, double b,
                        double act_bytes = 0, int layers = 1) {
  EngineSetup s;
  s.plan.pp = pp;
  s.plan.vpp = vpp;
  s.plan.micro_batch = 1;
  s.plan.global_batch = m;
  s.plan.schedule = kind;
  for (int vs = 0; vs < pp * vpp; ++vs) {
    s.stages.push_back(fixed_stage(f / vpp, b / vpp, act_bytes, layers));
    s.stages.back().virtual_stage = vs;
  }
  s.grad_sync_s.assign(pp * vpp, 0);
  s.param_sync_s.assign(pp * vpp, 0);
  s.optimizer_s.assign(pp, 0);
  return s;
}

EngineResult run(const EngineSetup& s) {
  const auto sched = build_pipeline_schedule(s.plan.schedule, s.plan.pp, s.plan.vpp,
                                             static_cast<int>(s.plan.num_microbatches()));
  EXPECT_TRUE(sched.ok()) << sched.error_text();
  return sched.ok() ? run_engine(s, sched.value()) : EngineResult{};
}

std::string label(int pp, int vpp, int m) {
  return "pp=" + std::to_string(pp) + " vpp=" + std::to_string(vpp) + " m=" + std::to_string(m);
}

TEST(Engine, OneFOneBStepAndBubble) {
  // PipeDream-Flush with no p2p cost: T = (m + p - 1)(F + B), and every rank idles for
  // (p - 1)(F + B): bubble / T = (p - 1) / (m + p - 1).
  const double f = 1, b = 2;
  for (int pp : {1, 2, 4}) {
    for (int m : {1, 2, 5, 8}) {
      const EngineResult r = run(fixed_setup(ScheduleKind::k1F1B, pp, 1, m, f, b));
      const double t = (m + pp - 1) * (f + b);
      EXPECT_DOUBLE_EQ(r.step_time_s, t) << label(pp, 1, m);
      ASSERT_EQ(r.ranks.size(), static_cast<size_t>(pp));
      for (const RankOutcome& o : r.ranks) {
        EXPECT_DOUBLE_EQ(o.busy_by_category[kCompute], m * (f + b)) << label(pp, 1, m);
        EXPECT_DOUBLE_EQ(o.busy_by_category[kBubble] / r.step_time_s,
                         static_cast<double>(pp - 1) / (m + pp - 1))
            << label(pp, 1, m);
      }
    }
  }
}

TEST(Engine, OneFOneBWaitsOnItsPointToPointTransfers) {
  // Non-interleaved 1F1B waits on each batched send/recv before its next pass, so a transfer
  // of c idles the sender's compute stream. Two stages, F = 1, B = 2, c = 0.5: stage 0 runs
  // F + c and B, stage 1 runs F and B + c, and the step is (m + p - 1)(F + B + c); by hand for
  // m = 4: stage 0 ends its last backward at 17.5. Every send (m per stage) counts as pp_comm.
  const double f = 1, b = 2, c = 0.5;
  constexpr int kPpComm = static_cast<int>(CostCategory::kPpComm);
  for (int m : {1, 2, 4, 8}) {
    EngineSetup s = fixed_setup(ScheduleKind::k1F1B, 2, 1, m, f, b);
    s.p2p_time_s = c;
    const EngineResult r = run(s);
    EXPECT_DOUBLE_EQ(r.step_time_s, (m + 1) * (f + b + c)) << label(2, 1, m);
    for (const RankOutcome& o : r.ranks) EXPECT_DOUBLE_EQ(o.busy_by_category[kPpComm], m * c);
  }
  // The interleaved schedule posts its transfers beside compute: none of them is pp_comm.
  EngineSetup s = fixed_setup(ScheduleKind::kInterleaved1F1B, 2, 2, 4, f, b);
  s.p2p_time_s = c;
  const EngineResult r = run(s);
  for (const RankOutcome& o : r.ranks) EXPECT_DOUBLE_EQ(o.busy_by_category[kPpComm], 0);
}

TEST(Engine, ScatterGatherSplitsPipelineSendsOverTensorParallelRanks) {
  // tp 8 in one scale-up domain, pp 2 across domains, no SP: a stage's output (s x h in bf16)
  // crosses the scale-out link whole from every TP rank, or, split, 1/tp of it and then an
  // all-gather over the scale-up links. The last stage of 1F1B waits on each of its m sends.
  const HwProfile hw = testing::round_profile();
  const ModelSpec m = testing::gpt_model(
      {.name = "gpt-sg", .layers = 4, .hidden = 4096, .heads = 32, .vocab = 32000});
  ParallelPlan p;
  p.tp = 8;
  p.pp = 2;
  p.global_batch = 4;
  p.seq_len = 2048;
  const double bytes = 2048.0 * 4096 * 2;
  constexpr int kPpComm = static_cast<int>(CostCategory::kPpComm);
  auto whole = simulate(m, Cluster{hw, 16}, p);
  p.pp_scatter_gather = true;
  auto split = simulate(m, Cluster{hw, 16}, p);
  ASSERT_TRUE(whole) << whole.error_text();
  ASSERT_TRUE(split) << split.error_text();
  const double scale_out = hw.scale_out_bw_gbps * 1e9, scale_up = hw.scale_up_bw_gbps * 1e9;
  EXPECT_NEAR(whole->stages[1].busy_by_category[kPpComm], 4 * bytes / scale_out, 1e-9);
  EXPECT_NEAR(split->stages[1].busy_by_category[kPpComm],
              4 * (bytes / 8 / scale_out + 7.0 / 8 * bytes / scale_up), 1e-9);
  EXPECT_LT(split->step_time_s, whole->step_time_s);
  // With SP the stage output is already split over the TP ranks: nothing changes.
  p.sequence_parallel = true;
  auto sp_split = simulate(m, Cluster{hw, 16}, p);
  p.pp_scatter_gather = false;
  auto sp_whole = simulate(m, Cluster{hw, 16}, p);
  ASSERT_TRUE(sp_split && sp_whole);
  EXPECT_DOUBLE_EQ(sp_split->step_time_s, sp_whole->step_time_s);
}

TEST(Engine, InterleavedStepShrinksTheBubbleByVpp) {
  // Megatron interleaving, chunks of F/v and B/v: T = (m + (p - 1)/v)(F + B).
  const double f = 1, b = 2;
  for (int pp : {2, 4}) {
    for (int vpp : {2, 4}) {
      for (int m : {pp, 2 * pp}) {
        const EngineResult r = run(fixed_setup(ScheduleKind::kInterleaved1F1B, pp, vpp, m, f, b));
        EXPECT_NEAR(r.step_time_s, (m + static_cast<double>(pp - 1) / vpp) * (f + b), 1e-12)
            << label(pp, vpp, m);
      }
    }
  }
}

TEST(Engine, ZeroBubbleH1BeatsOneFOneB) {
  // F = 1, B = W = 1 (1F1B runs them fused as a backward of 2). Qi et al. 2024, m >= p:
  //   T_1F1B = (m + p - 1)(F + B + W) = 3(m + p - 1),  T_H1 = m(F + B + W) + (p - 1)(F + B - W)
  //   = 3m + p - 1.
  const int pp = 4;
  for (int m : {4, 8}) {
    const EngineResult base = run(fixed_setup(ScheduleKind::k1F1B, pp, 1, m, 1, 2));
    const EngineResult h1 = run(fixed_setup(ScheduleKind::kZeroBubbleH1, pp, 1, m, 1, 2));
    EXPECT_DOUBLE_EQ(base.step_time_s, 3.0 * (m + pp - 1));
    EXPECT_DOUBLE_EQ(h1.step_time_s, 3.0 * m + pp - 1);
    EXPECT_LT(h1.step_time_s, base.step_time_s);
  }
}

TEST(Engine, OneFOneBPeakActivationsOfRankZeroAreMinPM) {
  // 1F1B holds min(p - r, m) microbatches on rank r; rank 0 peaks at min(p, m).
  const double act = 100;
  const int pp = 4;
  for (int m : {2, 4, 8}) {
    const EngineResult r = run(fixed_setup(ScheduleKind::k1F1B, pp, 1, m, 1, 2, act));
    EXPECT_DOUBLE_EQ(r.ranks[0].peak_activation_bytes, std::min(pp, m) * act) << label(pp, 1, m);
    for (int rank = 0; rank < pp; ++rank) {
      EXPECT_DOUBLE_EQ(r.ranks[rank].peak_activation_bytes, std::min(pp - rank, m) * act)
          << label(pp, 1, m) << " rank " << rank;
    }
  }
}

TEST(Engine, GradientSyncOverlapNeverHurtsAndWithoutItAddsExactlyTheSync) {
  // pp = 2, m = 4, F = 1, B = 2: the pipeline ends at T = (m + p - 1)(F + B) = 15 on rank 0.
  // Gradient reduction S = 1 per stage in 4 buckets (one per layer).
  const int pp = 2, m = 4, layers = 4;
  const double f = 1, b = 2, sync = 1;
  const double t = (m + pp - 1) * (f + b);
  EngineSetup s = fixed_setup(ScheduleKind::k1F1B, pp, 1, m, f, b, 0, layers);
  s.grad_sync_s.assign(pp, sync);

  s.plan.overlap_grad_reduce = false;
  const EngineResult off = run(s);
  // Off: the reduction starts after the last backward, T + S.
  EXPECT_DOUBLE_EQ(off.step_time_s, t + sync);

  s.plan.overlap_grad_reduce = true;
  const EngineResult on = run(s);
  EXPECT_LE(on.step_time_s, off.step_time_s);
  EXPECT_GE(on.step_time_s, t);
  // On: bucket j (of L) is ready at b0 + (j+1) B / L of the last backward and takes S / L <= B / L,
  // so only the last bucket sticks out: T + S / L.
  EXPECT_DOUBLE_EQ(on.step_time_s, t + sync / layers);
}

TEST(Engine, OptimizerStepAddsToTheStep) {
  const int pp = 2, m = 4;
  EngineSetup s = fixed_setup(ScheduleKind::k1F1B, pp, 1, m, 1, 2);
  s.optimizer_s = {0.5, 0.25};
  // Rank 0 ends its pipeline last, at (m + p - 1)(F + B), then steps its optimizer.
  EXPECT_DOUBLE_EQ(run(s).step_time_s, (m + pp - 1) * 3.0 + 0.5);
}

ModelSpec tiny_model(int layers) {
  return testing::gpt_model(
      {.name = "tiny", .layers = layers, .hidden = 256, .heads = 4, .vocab = 1000});
}

void expect_full_ranks_match_representative(const ModelSpec& m, const ParallelPlan& p, int domain) {
  const Cluster c{testing::round_profile(domain), p.gpus()};
  const auto rep = simulate(m, c, p, {.full_ranks = false});
  const auto full = simulate(m, c, p, {.full_ranks = true});
  ASSERT_TRUE(rep.ok()) << rep.error_text();
  ASSERT_TRUE(full.ok()) << full.error_text();
  const std::string at = "tp=" + std::to_string(p.tp) + " pp=" + std::to_string(p.pp) +
                         " dp=" + std::to_string(p.dp) + " vpp=" + std::to_string(p.vpp) +
                         " domain=" + std::to_string(domain);
  EXPECT_GT(rep->step_time_s, 0) << at;
  EXPECT_DOUBLE_EQ(full->step_time_s, rep->step_time_s) << at;
  EXPECT_EQ(rep->engine.ranks.size(), static_cast<size_t>(p.pp)) << at;
  EXPECT_EQ(full->engine.ranks.size(), static_cast<size_t>(p.gpus())) << at;
  for (int r = 0; r < p.pp; ++r) {
    EXPECT_DOUBLE_EQ(full->stages[r].memory.total(), rep->stages[r].memory.total()) << at;
  }
}

TEST(Engine, FullRanksMatchRepresentativeRanks) {
  ParallelPlan p;
  p.tp = 2;
  p.pp = 2;
  p.dp = 2;
  p.micro_batch = 1;
  p.global_batch = 8;  // m = 4
  p.seq_len = 128;
  for (int domain : {8, 2}) expect_full_ranks_match_representative(tiny_model(4), p, domain);

  ParallelPlan q;
  q.pp = 4;
  q.dp = 2;
  q.vpp = 2;
  q.schedule = ScheduleKind::kInterleaved1F1B;
  q.micro_batch = 1;
  q.global_batch = 16;  // m = 8, a multiple of pp
  q.seq_len = 128;
  q.zero_stage = 1;
  for (int domain : {8, 2}) expect_full_ranks_match_representative(tiny_model(8), q, domain);
}

// ZB-H1 frees a microbatch's activations at B except what its weight gradient reads, which W
// frees. Nothing kept for W: every rank holds what 1F1B holds, min(p - r, m) microbatches. All
// kept for W: W lags B by r microbatches on rank r, so later ranks hold more, up to min(p, m).
TEST(Engine, ZeroBubbleFreesAtBExceptTheWeightGradientInputs) {
  const double act = 100;
  const int pp = 4, m = 8;
  EngineSetup none_kept = fixed_setup(ScheduleKind::kZeroBubbleH1, pp, 1, m, 1, 2, act);
  const EngineResult a = run(none_kept);
  for (int rank = 0; rank < pp; ++rank)
    EXPECT_DOUBLE_EQ(a.ranks[rank].peak_activation_bytes, std::min(pp - rank, m) * act)
        << "rank " << rank;
  EngineSetup all_kept = none_kept;
  for (auto& st : all_kept.stages) st.weight_input_bytes_per_microbatch = act;
  const EngineResult b = run(all_kept);
  for (int rank = 0; rank < pp; ++rank) {
    EXPECT_LE(b.ranks[rank].peak_activation_bytes, std::min(pp, m) * act) << "rank " << rank;
    EXPECT_GE(b.ranks[rank].peak_activation_bytes, a.ranks[rank].peak_activation_bytes);
  }
  EXPECT_GT(b.ranks[pp - 1].peak_activation_bytes, a.ranks[pp - 1].peak_activation_bytes);
}

}  // namespace
}  // namespace parallax
