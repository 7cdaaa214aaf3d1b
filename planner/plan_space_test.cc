// The plan space: the rules real frameworks enforce, applied while enumerating.
#include "planner/plan_space.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/json_io.h"
#include "core/model_zoo.h"
#include "planner/search.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

PlanRequest request(const char* model, int gpus, int64_t gbs, int64_t seq) {
  PlanRequest r;
  r.model = find_zoo_model(model, "test").value();
  r.cluster = {find_profile(builtin_profiles().value(), "h100-sxm-80gb", "t").value(), gpus};
  r.global_batch = gbs;
  r.seq_len = seq;
  return r;
}

int64_t pruned(const PlanSpaceResult& s, const std::string& rule_part) {
  int64_t n = 0;
  for (const auto& c : s.pruned)
    if (c.rule.find(rule_part) != std::string::npos) n += c.count;
  return n;
}

// 16 GPUs = 2^4 split over (tp, cp, pp, dp): C(4+3, 3) = 35 ordered factorisations.
TEST(PlanSpace, CountsEveryFactorisationOfTheGpus) {
  const PlanSpaceResult s = enumerate_plans(request("llama3.1-8b", 16, 64, 8192));
  EXPECT_EQ(s.layouts_considered, 35);
  // tp = 16 leaves the 8-GPU NVLink domain: (tp16) is the only such layout.
  EXPECT_EQ(pruned(s, "NVLink domain"), 1);
  EXPECT_EQ(s.layouts_kept, 34);
}

TEST(PlanSpace, EveryCandidateIsValidAndFollowsTheRules) {
  const PlanRequest r = request("mixtral-8x7b", 32, 64, 4096);
  const PlanSpaceResult s = enumerate_plans(r);
  ASSERT_GT(s.candidates.size(), 1000u);
  for (const ParallelPlan& p : s.candidates) {
    ASSERT_TRUE(validate_plan(r.model, r.cluster, p).empty())
        << testing::text(validate_plan(r.model, r.cluster, p));
    EXPECT_LE(p.tp, 8);
    if (p.tp > 1) {
      EXPECT_TRUE(p.sequence_parallel);  // MoE with tp needs SP
    }
    if (p.schedule == ScheduleKind::kInterleaved1F1B) {
      EXPECT_EQ(r.model.layers % (p.pp * p.vpp), 0);
      EXPECT_EQ(p.num_microbatches() % p.pp, 0);
    }
    if (p.cp > 1) {
      EXPECT_EQ(r.seq_len % (2 * p.cp), 0);
    }
  }
  EXPECT_GT(pruned(s, "MoE with tp > 1 needs sequence parallelism"), 0);
}

TEST(PlanSpace, PinsAndLimitsNarrowTheSpace) {
  PlanRequest r = request("llama3.1-70b", 64, 128, 8192);
  r.constraints.tp = 8;
  r.constraints.max_pp = 2;
  r.constraints.zero = 1;
  r.constraints.sequence_parallel = true;
  const PlanSpaceResult s = enumerate_plans(r);
  ASSERT_FALSE(s.candidates.empty());
  for (const ParallelPlan& p : s.candidates) {
    EXPECT_EQ(p.tp, 8);
    EXPECT_LE(p.pp, 2);
    EXPECT_EQ(p.zero_stage, 1);
    EXPECT_FALSE(p.fsdp);
    EXPECT_TRUE(p.sequence_parallel);
  }
  EXPECT_GT(pruned(s, "pinned"), 0);
  EXPECT_GT(pruned(s, "user limit"), 0);
}

TEST(PlanSpace, FrameworkKeepsOnlyWhatItCanRun) {
  PlanRequest r = request("llama3.1-8b", 16, 64, 8192);
  r.constraints.frameworks = {LaunchTarget::kDeepSpeed};
  const PlanSpaceResult s = enumerate_plans(r);
  ASSERT_FALSE(s.candidates.empty());
  for (const ParallelPlan& p : s.candidates) {
    EXPECT_EQ(p.tp, 1);
    EXPECT_EQ(p.cp, 1);
    EXPECT_EQ(p.schedule, ScheduleKind::k1F1B);
    EXPECT_TRUE(check_launch(LaunchTarget::kDeepSpeed, {r.model, r.cluster, p}).empty());
    // DeepSpeed's stack: the model's eager PyTorch with SDPA attention.
    EXPECT_TRUE(p.eager);
    EXPECT_EQ(p.attention, AttentionImpl::kFlash2);
  }
  EXPECT_GT(pruned(s, "deepspeed cannot run it"), 0);
}

// By default every candidate is one that some framework runs exactly as it will be simulated;
// `frameworks` empty keeps every layout, zero-bubble and uneven splits included.
TEST(PlanSpace, DefaultKeepsOnlyRunnablePlans) {
  PlanRequest r = request("llama3.1-8b", 16, 64, 8192);
  r.model.layers = 30;  // 30 layers over 4 stages: Megatron's even split refuses pp=4
  const PlanSpaceResult s = enumerate_plans(r);
  ASSERT_FALSE(s.candidates.empty());
  bool any_torchtitan = false, any_megatron = false;
  for (const ParallelPlan& p : s.candidates) {
    const auto runs = frameworks_running(r.model, r.cluster, p, r.constraints);
    ASSERT_FALSE(runs.empty()) << layout_label(p);
    EXPECT_NE(p.schedule, ScheduleKind::kZeroBubbleH1);
    for (LaunchTarget f : runs) {
      any_torchtitan |= f == LaunchTarget::kTorchTitan;
      any_megatron |= f == LaunchTarget::kMegatron;
    }
  }
  EXPECT_TRUE(any_torchtitan);
  EXPECT_TRUE(any_megatron);
  r.constraints.frameworks.clear();
  const PlanSpaceResult all = enumerate_plans(r);
  EXPECT_GT(all.candidates.size(), 0u);
  EXPECT_TRUE(std::any_of(all.candidates.begin(), all.candidates.end(), [](const ParallelPlan& p) {
    return p.schedule == ScheduleKind::kZeroBubbleH1;
  }));
}

// Each framework's overlap switches are searched where they act: TP overlap (Megatron's
// --tp-comm-overlap, TorchTitan's async TP) both ways at tp > 1, never at tp = 1; TorchTitan's
// FSDP2 has no switch for the gradient reduction, so it stays on.
TEST(PlanSpace, OverlapSwitchesAreSearchedWhereTheFrameworkHasThem) {
  PlanRequest r = request("llama3.1-8b", 8, 32, 8192);
  for (LaunchTarget f : {LaunchTarget::kMegatron, LaunchTarget::kTorchTitan}) {
    r.constraints.frameworks = {f};
    std::set<bool> tp_overlap, grad_overlap;
    for (const ParallelPlan& p : enumerate_plans(r).candidates) {
      if (p.tp == 1) {
        EXPECT_FALSE(p.overlap_tp_comm);
      } else {
        tp_overlap.insert(p.overlap_tp_comm);
      }
      if (p.dp > 1) grad_overlap.insert(p.overlap_grad_reduce);
    }
    EXPECT_EQ(tp_overlap.size(), 2u) << to_string(f);
    EXPECT_EQ(grad_overlap.size(), f == LaunchTarget::kMegatron ? 2u : 1u) << to_string(f);
  }
  r.constraints.frameworks = {LaunchTarget::kMegatron};
  r.constraints.overlap_tp_comm = true;
  for (const ParallelPlan& p : enumerate_plans(r).candidates)
    if (p.tp > 1) {
      EXPECT_TRUE(p.overlap_tp_comm);
    }
}

// Selective recompute as each framework runs it: TorchTitan's per-op checkpointing in place of
// Megatron's attention-core recompute; a pinned mode is the only one.
TEST(PlanSpace, SelectiveRecomputeIsTheFrameworksOwn) {
  PlanRequest r = request("llama3.1-8b", 8, 32, 8192);
  auto modes = [&] {
    std::vector<Recompute> seen;
    for (const ParallelPlan& p : enumerate_plans(r).candidates)
      if (std::find(seen.begin(), seen.end(), p.recompute) == seen.end())
        seen.push_back(p.recompute);
    std::sort(seen.begin(), seen.end());
    return seen;
  };
  r.constraints.frameworks = {LaunchTarget::kMegatron};
  EXPECT_EQ(modes(),
            (std::vector<Recompute>{Recompute::kNone, Recompute::kSelective, Recompute::kFull}));
  r.constraints.frameworks = {LaunchTarget::kTorchTitan};
  EXPECT_EQ(modes(),
            (std::vector<Recompute>{Recompute::kNone, Recompute::kSelectiveOp, Recompute::kFull}));
  r.constraints.recompute = Recompute::kSelectiveOp;
  r.constraints.frameworks = training_frameworks();
  EXPECT_EQ(modes(), (std::vector<Recompute>{Recompute::kSelectiveOp}));
  r.constraints.frameworks = {LaunchTarget::kMegatron};
  EXPECT_TRUE(enumerate_plans(r).candidates.empty());
}

TEST(PlanSpace, TpAcrossDomainsOnlyWhenAsked) {
  PlanRequest r = request("llama3.1-70b", 32, 64, 8192);
  r.constraints.tp = 16;
  EXPECT_TRUE(enumerate_plans(r).candidates.empty());
  r.constraints.tp_across_domains = true;
  EXPECT_FALSE(enumerate_plans(r).candidates.empty());
}

}  // namespace
}  // namespace parallax
