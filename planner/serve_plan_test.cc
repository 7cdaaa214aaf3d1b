// The deployment planner: it finds what meets the SLO, prefers tensor parallelism when the TTFT
// target is tight, ranks impossible targets by how far they miss, counts what it prunes by
// reason, and bisects a rate at which the SLO holds and just above which it fails.
#include "planner/serve_plan.h"

#include <gtest/gtest.h>

#include "core/json_io.h"
#include "core/model_zoo.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

using testing::mentions;
using testing::text;

ModelSpec zoo(const char* name) { return find_zoo_model(name, "t").value(); }
HwProfile h100() { return find_profile(builtin_profiles().value(), "h100-sxm-80gb", "t").value(); }

/// Llama 3.1 8B on `gpus` H100: a small load and a one-point engine grid, so that a search runs
/// in well under a second.
ServePlanRequest small_request(int gpus) {
  ServePlanRequest r;
  r.model = zoo("llama3.1-8b");
  r.hw = h100();
  r.gpus = gpus;
  r.workload = {.requests = 200, .rate_per_s = 10, .prompt_len = 512, .output_len = 64, .seed = 1};
  r.max_num_seqs_grid = {128};
  r.max_num_batched_tokens_grid = {8192};
  return r;
}

TEST(ServePlan, FindsACandidateThatMeetsTheSlo) {
  ServePlanRequest r = small_request(2);
  r.slo = {.ttft_p90_s = 1.0, .tpot_p90_s = 0.1};
  auto s = search_deployments(r);
  ASSERT_TRUE(s.ok()) << s.error_text();
  ASSERT_FALSE(s->ranked.empty());
  const ServeCandidate& best = s->ranked.front();
  EXPECT_TRUE(best.meets);
  EXPECT_LE(best.ttft_p90_s, 1.0);
  EXPECT_LE(best.tpot_p90_s, 0.1);
  EXPECT_EQ(best.deployment.gpus(), 2);
  EXPECT_NEAR(best.output_tokens_per_s_per_gpu, best.output_tokens_per_s / 2, 1e-9);
  // Meeting candidates come first, and among them more tokens/s per GPU first.
  for (size_t i = 1; i < s->ranked.size(); ++i) {
    const ServeCandidate &a = s->ranked[i - 1], &b = s->ranked[i];
    EXPECT_GE(a.meets, b.meets) << i;
    if (a.meets && b.meets) {
      EXPECT_GE(a.output_tokens_per_s_per_gpu, b.output_tokens_per_s_per_gpu);
    }
  }
  // tp1 pp1 dp2, tp1 pp2 dp1, tp2 pp1 dp1 (pp 4 and 8 do not divide 2 GPUs).
  EXPECT_EQ(s->candidates, 3);
  EXPECT_EQ(s->simulated, 3);
  EXPECT_EQ(s->ranked.size(), 3u);
}

// A 16k-token prompt alone on the engine: its TTFT is one prefill, which tensor parallelism
// splits over more GPUs (pipeline stages run one after the other and do not). A TTFT target
// just above tp8's p90 leaves only tp8 meeting it.
TEST(ServePlan, ATightTtftTargetPrefersMoreTensorParallelismForALongPrompt) {
  ServePlanRequest r;
  r.model = zoo("llama3.1-70b");
  r.hw = h100();
  r.gpus = 8;
  r.workload = {
      .requests = 20, .rate_per_s = 0.05, .prompt_len = 16384, .output_len = 8, .seed = 3};
  r.max_num_seqs_grid = {64};
  r.max_num_batched_tokens_grid = {16384};
  serving::Deployment tp8, tp4;
  tp8.tp = 8;
  tp4.tp = 4;
  tp4.dp = 2;
  for (serving::Deployment* d : {&tp8, &tp4}) {
    d->max_num_seqs = 64;
    d->max_num_batched_tokens = 16384;
  }
  auto at8 = simulate_deployment(r, tp8, r.workload.rate_per_s);
  auto at4 = simulate_deployment(r, tp4, r.workload.rate_per_s);
  ASSERT_TRUE(at8.ok() && at4.ok()) << at8.error_text() << at4.error_text();
  ASSERT_LT(at8->ttft_p90_s * 1.1, at4->ttft_p90_s);  // the premise

  r.slo.ttft_p90_s = at8->ttft_p90_s * 1.05;
  auto s = search_deployments(r);
  ASSERT_TRUE(s.ok()) << s.error_text();
  EXPECT_EQ(s->ranked.front().deployment.tp, 8);
  EXPECT_TRUE(s->ranked.front().meets);
  for (const ServeCandidate& c : s->ranked)
    if (c.deployment.tp < 8) {
      EXPECT_FALSE(c.meets) << deployment_label(c.deployment);
    }
}

TEST(ServePlan, ImpossibleTargetsRankByHowFarTheyMiss) {
  ServePlanRequest r = small_request(4);
  r.slo = {.ttft_p90_s = 1e-6, .tpot_p90_s = 1e-6};
  auto s = search_deployments(r);
  ASSERT_TRUE(s.ok()) << s.error_text();
  ASSERT_GE(s->ranked.size(), 3u);
  for (size_t i = 0; i < s->ranked.size(); ++i) {
    const ServeCandidate& c = s->ranked[i];
    EXPECT_FALSE(c.meets);
    // miss = max(p90 / limit) - 1.
    EXPECT_NEAR(c.miss, std::max(c.ttft_p90_s, c.tpot_p90_s) / 1e-6 - 1, 1e-6 * (c.miss + 1));
    if (i > 0) {
      EXPECT_LE(s->ranked[i - 1].miss, c.miss);
    }
  }
}

int64_t count_of(const ServePlanResult& s, const std::string& rule_start) {
  for (const PruneCount& c : s.pruned)
    if (c.rule.rfind(rule_start, 0) == 0) return c.count;
  return 0;
}

// Llama 3.1 8B (32 heads, 8 KV heads) on 6 GPUs of a part whose NVLink domain is 4 GPUs:
// layouts (tp, pp) = (1,1) (1,2) (2,1) (3,1) (3,2) (6,1), each x 2 x 2 engine settings = 24.
TEST(ServePlan, CountsWhatItPrunesByReason) {
  ServePlanRequest r = small_request(6);
  r.hw.scale_up_domain = 4;
  r.max_num_seqs_grid = {64, 512};
  r.max_num_batched_tokens_grid = {256, 8192};
  auto s = search_deployments(r);
  ASSERT_TRUE(s.ok()) << s.error_text();
  EXPECT_EQ(s->candidates, 24);
  EXPECT_EQ(count_of(*s, "tp beyond one scale-up"), 4);          // tp6: all 4
  EXPECT_EQ(count_of(*s, "engine: max_num_batched_tokens"), 5);  // (512, 256) of the other 5
  EXPECT_EQ(count_of(*s, "tp must divide the heads"), 6);        // tp3: 2 layouts x 3
  EXPECT_EQ(s->simulated, 24 - 4 - 5 - 6);
  EXPECT_EQ(static_cast<int64_t>(s->ranked.size()), s->simulated);
  const std::string why = explain_serve_plan(r, *s);
  EXPECT_NE(why.find("24 candidates"), std::string::npos) << why;
  EXPECT_NE(why.find("tp beyond one scale-up (NVLink) domain of 4 GPUs"), std::string::npos) << why;
  EXPECT_NE(why.find("winner: "), std::string::npos) << why;
  EXPECT_NE(why.find("runner-up: "), std::string::npos) << why;
}

TEST(ServePlan, NothingFitsNamesTheReasons) {
  ServePlanRequest r = small_request(2);
  r.model = zoo("llama3.1-405b");
  auto s = search_deployments(r);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.errors().front().where, "serve-plan");
  EXPECT_TRUE(mentions(s.errors(), "leave no KV cache: 3")) << s.error_text();

  r = small_request(1);
  r.workload.prompt_len = 4'000'000;  // more KV than one H100 holds
  s = search_deployments(r);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(mentions(s.errors(), "cannot hold one request")) << s.error_text();
}

TEST(ServePlan, RefusesBadRequestsWithEveryReason) {
  ServePlanRequest r = small_request(12);
  r.tp = 8;
  r.workload.requests = 0;
  ServePlanOptions opt;
  opt.max_load = true;  // without an SLO
  auto s = search_deployments(r, opt);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(mentions(s.errors(), "--gpus: 12 GPUs do not split into replicas of tp*pp = 8"))
      << text(s.errors());
  EXPECT_TRUE(mentions(s.errors(), "--requests")) << text(s.errors());
  EXPECT_TRUE(mentions(s.errors(), "--max-load")) << text(s.errors());
}

// Bisection: the highest rate found meets the SLO, the failing rate just above it does not, and
// they are one bisection step apart (2 x saturation / 2^steps).
TEST(ServePlan, MaxLoadFindsTheRateWhereTheSloStopsHolding) {
  ServePlanRequest r = small_request(1);
  r.workload.requests = 300;
  r.slo = {.ttft_p90_s = 0.25, .tpot_p90_s = 0.02};
  ServePlanOptions opt;
  opt.max_load = true;
  opt.max_load_top = 1;
  auto s = search_deployments(r, opt);
  ASSERT_TRUE(s.ok()) << s.error_text();
  const ServeCandidate& c = s->ranked.front();
  ASSERT_TRUE(c.load_searched);
  ASSERT_FALSE(c.max_rate_capped);
  ASSERT_GT(c.max_rate_per_s, 0);
  EXPECT_GT(c.saturation_rate_per_s, 0);
  EXPECT_NEAR(c.failing_rate_per_s - c.max_rate_per_s, 2 * c.saturation_rate_per_s / 256, 1e-9);
  auto at = simulate_deployment(r, c.deployment, c.max_rate_per_s);
  auto above = simulate_deployment(r, c.deployment, c.failing_rate_per_s);
  ASSERT_TRUE(at.ok() && above.ok());
  EXPECT_TRUE(at->meets) << "p90 TTFT " << at->ttft_p90_s << " TPOT " << at->tpot_p90_s;
  EXPECT_FALSE(above->meets) << "p90 TTFT " << above->ttft_p90_s << " TPOT " << above->tpot_p90_s;
  // 1 first run + 1 saturated run + the bound + 8 halvings.
  EXPECT_EQ(s->simulated, 1 + 1 + 1 + 8);
}

// With several candidates bisected, they lead the ranking by their highest rate.
TEST(ServePlan, MaxLoadRanksTheBisectedByTheirHighestRate) {
  ServePlanRequest r = small_request(2);
  r.slo = {.ttft_p90_s = 0.5, .tpot_p90_s = 0.05};
  ServePlanOptions opt;
  opt.max_load = true;
  opt.max_load_top = 2;
  auto s = search_deployments(r, opt);
  ASSERT_TRUE(s.ok()) << s.error_text();
  ASSERT_EQ(s->ranked.size(), 3u);
  EXPECT_TRUE(s->ranked[0].load_searched && s->ranked[1].load_searched);
  EXPECT_FALSE(s->ranked[2].load_searched);
  EXPECT_GE(s->ranked[0].max_rate_per_s, s->ranked[1].max_rate_per_s);
}

}  // namespace
}  // namespace parallax
