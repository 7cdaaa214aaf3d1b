// The planner's search: exhaustive over its space (checked against brute force), deterministic,
// honest about what it pruned, and never worse than a published layout it could have chosen.
#include "planner/search.h"

#include <gtest/gtest.h>

#include "core/json_io.h"
#include "core/model_zoo.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

HwProfile h100() {
  return find_profile(builtin_profiles().value(), "h100-sxm-80gb", "test").value();
}

PlanRequest request(const char* model, int gpus, int64_t gbs, int64_t seq) {
  PlanRequest r;
  r.model = find_zoo_model(model, "test").value();
  r.cluster = {h100(), gpus};
  r.global_batch = gbs;
  r.seq_len = seq;
  return r;
}

// Branch and bound must return what simulating every candidate would: the best fitting plan.
TEST(Search, TopPlanIsTheBestOfAllCandidatesByBruteForce) {
  PlanRequest r = request("llama3.1-8b", 16, 32, 4096);
  r.constraints.max_mbs = 2;
  SearchOptions opt;
  opt.top_k = 3;
  auto found = search_plans(r, opt);
  ASSERT_TRUE(found) << found.error_text();
  double best = 1e300;
  int64_t fitting = 0;
  for (const ParallelPlan& p : enumerate_plans(r).candidates) {
    auto rep = simulate(r.model, r.cluster, p);
    ASSERT_TRUE(rep) << rep.error_text();
    if (rep->peak_memory_gib > r.cluster.hw.hbm_gib) continue;
    ++fitting;
    best = std::min(best, rep->step_time_s);
  }
  ASSERT_GT(fitting, 3);
  EXPECT_DOUBLE_EQ(found->top.front().report.step_time_s, best);
  // Fewer simulations than candidates: the bounds did prune.
  EXPECT_LT(found->stats.simulated, found->stats.candidates);
  for (size_t i = 1; i < found->top.size(); ++i)
    EXPECT_LE(found->top[i - 1].objective_value, found->top[i].objective_value);
}

TEST(Search, SameRankingWhateverTheThreadCount) {
  const PlanRequest r = request("llama3.1-70b", 64, 128, 8192);
  SearchOptions one, two;
  one.threads = 1;
  two.threads = 2;
  one.top_k = two.top_k = 8;
  auto a = search_plans(r, one), b = search_plans(r, two);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->top.size(), b->top.size());
  for (size_t i = 0; i < a->top.size(); ++i) {
    EXPECT_EQ(layout_label(a->top[i].report.plan), layout_label(b->top[i].report.plan));
    EXPECT_EQ(a->top[i].report.step_time_s, b->top[i].report.step_time_s);
  }
  EXPECT_EQ(a->stats.simulated, b->stats.simulated);
}

// Pinned degrees, limits and the headroom hold for every plan returned.
TEST(Search, RespectsPinsLimitsAndHeadroom) {
  PlanRequest r = request("llama3.1-70b", 64, 128, 8192);
  r.constraints.tp = 4;
  r.constraints.max_pp = 4;
  r.constraints.recompute = Recompute::kSelective;
  r.constraints.memory_headroom = 0.2;
  SearchOptions opt;
  opt.top_k = 10;
  auto found = search_plans(r, opt);
  ASSERT_TRUE(found) << found.error_text();
  for (const RankedPlan& p : found->top) {
    EXPECT_EQ(p.report.plan.tp, 4);
    EXPECT_LE(p.report.plan.pp, 4);
    EXPECT_EQ(p.report.plan.recompute, Recompute::kSelective);
    EXPECT_LE(p.report.peak_memory_gib, 0.8 * 80.0 + 1e-9);
  }
}

// The published layout of a record is one of the candidates, so the winner is at least as fast.
TEST(Search, WinnerIsNoSlowerThanAPublishedLayout) {
  const PlanRequest r = request("llama3.1-70b", 64, 128, 8192);
  ParallelPlan published = r.settings;
  published.tp = 8;
  published.pp = 4;
  published.dp = 2;
  published.vpp = 5;
  published.schedule = ScheduleKind::kInterleaved1F1B;
  published.sequence_parallel = true;
  published.zero_stage = 1;
  published.recompute = Recompute::kSelective;
  published.global_batch = 128;
  published.seq_len = 8192;
  auto pub = simulate(r.model, r.cluster, published);
  auto found = search_plans(r);
  ASSERT_TRUE(pub && found);
  EXPECT_LE(found->top.front().report.step_time_s, pub->step_time_s);
}

TEST(Search, NothingFitsSaysWhyWithTheCounts) {
  const PlanRequest r = request("llama3.1-405b", 8, 8, 8192);
  auto found = search_plans(r);
  ASSERT_FALSE(found);
  EXPECT_TRUE(testing::mentions(found.errors(), "fits"));
  EXPECT_TRUE(testing::mentions(found.errors(), "memory"));
}

TEST(Search, CostObjectiveConsidersFewerGpusAndNeedsABudget) {
  const PlanRequest r = request("llama3.1-8b", 32, 64, 4096);
  SearchOptions opt;
  opt.objective = Objective::kCost;
  auto missing = search_plans(r, opt);
  ASSERT_FALSE(missing);
  EXPECT_TRUE(testing::mentions(missing.errors(), "token budget"));
  opt.token_budget = 1e12;
  auto cost = search_plans(r, opt);
  ASSERT_TRUE(cost) << cost.error_text();
  EXPECT_EQ(cost->stats.gpu_counts, (std::vector<int>{32, 16, 8, 4, 2, 1}));
  // GPU-hours of the cheapest plan are no more than those of the fastest on all 32 GPUs.
  SearchOptions fast;
  fast.token_budget = 1e12;
  auto quick = search_plans(r, fast);
  ASSERT_TRUE(quick);
  EXPECT_LE(cost->top.front().gpu_hours, quick->top.front().gpu_hours * (1 + 1e-12));
  const RankedPlan& c = cost->top.front();
  // gpu_hours = tokens / (tokens/s) * gpus / 3600.
  testing::expect_rel(c.gpu_hours, 1e12 / c.report.tokens_per_s * c.report.gpus / 3600);
}

TEST(Search, BadRequestReportsEveryProblem) {
  PlanRequest r = request("llama3.1-8b", 0, 0, 0);
  r.constraints.memory_headroom = 1.5;
  auto found = search_plans(r);
  ASSERT_FALSE(found);
  EXPECT_TRUE(testing::mentions(found.errors(), "--gpus"));
  EXPECT_TRUE(testing::mentions(found.errors(), "--gbs"));
  EXPECT_TRUE(testing::mentions(found.errors(), "--seq"));
  EXPECT_TRUE(testing::mentions(found.errors(), "--memory-headroom"));
}

// 2^30 GPUs overflowed int in the layout enumeration (2 * cp, dp * cp * tp); the request is
// refused first, naming the bound.
TEST(Search, GpusBeyondTheLargestClusterAreRefused) {
  auto found = search_plans(request("llama3.1-8b", 1 << 30, 1 << 30, 4096));
  ASSERT_FALSE(found);
  EXPECT_TRUE(testing::mentions(found.errors(),
                                "--gpus: gpus=1073741824 is beyond the largest cluster modelled"))
      << found.error_text();
}

// A deadline: the cost objective may pick fewer GPUs at better efficiency; --max-days keeps only
// plans that train the budget in time, and is refused without a budget.
TEST(Search, MaxDaysKeepsOnlyPlansThatMeetTheDeadline) {
  const PlanRequest r = request("llama3.1-8b", 32, 64, 4096);
  SearchOptions opt;
  opt.objective = Objective::kCost;
  opt.token_budget = 1e11;
  opt.top_k = 3;
  auto free = search_plans(r, opt);
  ASSERT_TRUE(free) << free.error_text();
  const double slowest = free->top.front().time_to_train_days;
  opt.max_days = 0.6 * slowest;
  auto bounded = search_plans(r, opt);
  ASSERT_TRUE(bounded) << bounded.error_text();
  for (const RankedPlan& p : bounded->top) EXPECT_LE(p.time_to_train_days, opt.max_days);
  EXPECT_GT(bounded->top.front().report.gpus, free->top.front().report.gpus);
  opt.token_budget = 0;
  opt.objective = Objective::kThroughput;
  EXPECT_TRUE(testing::mentions(search_plans(r, opt).errors(), "--max-days"));
}

}  // namespace
}  // namespace parallax
