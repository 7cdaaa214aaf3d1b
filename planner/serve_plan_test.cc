// The deployment planner: it finds what meets the SLO, prefers tensor parallelism when the TTFT
// target is tight, ranks impossible targets by how far they miss, counts what it prunes by
// reason, bisects a rate at which the SLO holds and just above which it fails, and also tries
// every prefill/decode split of the layouts with two or more replicas.
#include "planner/serve_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "core/json_io.h"
#include "core/model_zoo.h"
#include "simulator/serving/pd_sim.h"
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

// A shared system prompt comes from the prefix cache: every candidate's first tokens come sooner
// than when each prompt is computed whole. A prefix longer than the prompt is refused.
TEST(ServePlan, ASharedPrefixIsServedFromTheCache) {
  ServePlanRequest r = small_request(2);
  r.search_pd = false;
  auto plain = search_deployments(r);
  r.workload.prefix_len = 384;
  r.workload.prefix_groups = 2;
  auto shared = search_deployments(r);
  ASSERT_TRUE(plain.ok()) << plain.error_text();
  ASSERT_TRUE(shared.ok()) << shared.error_text();
  ASSERT_EQ(plain->ranked.size(), shared->ranked.size());
  std::map<std::string, double> ttft;
  for (const ServeCandidate& c : plain->ranked) ttft[deployment_label(c.deployment)] = c.ttft_p90_s;
  for (const ServeCandidate& c : shared->ranked)
    EXPECT_LT(c.ttft_p90_s, ttft.at(deployment_label(c.deployment)))
        << deployment_label(c.deployment);
  r.workload.prefix_len = 600;
  auto bad = search_deployments(r);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(mentions(bad.errors(), "--prefix-len")) << bad.error_text();
}

// A MoE model is also tried with its experts over every GPU (ep = tp * dp, pp 1), colocated and
// split into prefill and decode pools, each pool's experts over its own GPUs.
TEST(ServePlan, TriesWideExpertParallelismForAMoeModel) {
  ServePlanRequest r = small_request(4);
  r.model = zoo("qwen3-30b-a3b");
  r.pp_grid = {1};
  auto s = search_deployments(r);
  ASSERT_TRUE(s.ok()) << s.error_text();
  int colocated = 0, split = 0;
  for (const ServeCandidate& c : s->ranked) {
    const serving::Deployment& d = c.deployment;
    if (!d.wide_ep()) continue;
    EXPECT_EQ(d.ep, d.tp * d.dp);
    EXPECT_GT(c.output_tokens_per_s, 0);
    const int p = c.engine.prefill_replicas;
    if (p == 0) {
      ++colocated;
      continue;
    }
    ++split;
    EXPECT_TRUE(p >= 1 && p < d.dp) << deployment_label(d, p);
    for (const int pool : {p, d.dp - p}) EXPECT_EQ(128 % (d.tp * pool), 0);
  }
  EXPECT_EQ(colocated, 4);  // tp1 dp4 ep4 and tp2 dp2 ep4, each with and without two-batch overlap
  EXPECT_GT(split, 0);
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
  // tp1 pp1 dp2, tp1 pp2 dp1, tp2 pp1 dp1 (pp 4 and 8 do not divide 2 GPUs), and tp1 pp1 dp2
  // split into 1 prefill + 1 decode replica.
  EXPECT_EQ(s->candidates, 4);
  EXPECT_EQ(s->pd_candidates, 1);
  EXPECT_EQ(s->simulated, 4);
  EXPECT_EQ(s->ranked.size(), 4u);
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
// Colocated only: the P/D splits are never pruned (PdSplits* below count them).
TEST(ServePlan, CountsWhatItPrunesByReason) {
  ServePlanRequest r = small_request(6);
  r.search_pd = false;
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

// 2^30 GPUs overflowed int in the deployment enumeration (tp * pp); refused first.
TEST(ServePlan, RefusesGpusBeyondTheLargestCluster) {
  auto s = search_deployments(small_request(1 << 30), ServePlanOptions{});
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(mentions(s.errors(), "--gpus: gpus=1073741824 is beyond the largest cluster"))
      << text(s.errors());
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
  ASSERT_EQ(s->ranked.size(), 4u);  // three layouts and tp1 pp1 dp2 pd1:1
  EXPECT_TRUE(s->ranked[0].load_searched && s->ranked[1].load_searched);
  EXPECT_FALSE(s->ranked[2].load_searched || s->ranked[3].load_searched);
  EXPECT_GE(s->ranked[0].max_rate_per_s, s->ranked[1].max_rate_per_s);
}

/// (tp, pp, dp, prefill replicas) of a candidate.
using Split = std::tuple<int, int, int, int>;
Split split_of(const ServeCandidate& c) {
  const serving::Deployment& d = c.deployment;
  return {d.tp, d.pp, d.dp, c.engine.prefill_replicas};
}

// On 4 GPUs (one engine setting): layouts (tp, pp, dp) = (1,1,4) (1,2,2) (1,4,1) (2,1,2) (2,2,1)
// (4,1,1); the splits P + D = dp >= 2 are 1:3 2:2 3:1 of (1,1,4) and 1:1 of (1,2,2) and (2,1,2).
TEST(ServePlan, PdSplitsEveryLayoutWithTwoOrMoreReplicas) {
  ServePlanRequest r = small_request(4);
  auto s = search_deployments(r);
  ASSERT_TRUE(s.ok()) << s.error_text();
  EXPECT_EQ(s->candidates, 6 + 5);
  EXPECT_EQ(s->pd_candidates, 5);
  EXPECT_EQ(s->simulated, 11);
  std::set<Split> splits;
  for (const ServeCandidate& c : s->ranked)
    if (c.engine.prefill_replicas > 0) splits.insert(split_of(c));
  EXPECT_EQ(splits, (std::set<Split>{
                        {1, 1, 4, 1}, {1, 1, 4, 2}, {1, 1, 4, 3}, {1, 2, 2, 1}, {2, 1, 2, 1}}));
  // Every request moves its 512-token prompt's KV: the mean is that one transfer.
  for (const ServeCandidate& c : s->ranked) {
    if (c.engine.prefill_replicas == 0) {
      EXPECT_EQ(c.kv_transfer_mean_s, 0);
      continue;
    }
    const auto kv = serving::kv_budget(r.model, r.hw, c.deployment);
    ASSERT_TRUE(kv.ok());
    const double one = serving::kv_transfer_time(r.hw, kv->kv_bytes_per_token)(512);
    EXPECT_NEAR(c.kv_transfer_mean_s, one, 1e-12 * one);  // a mean of 200 equal terms
    EXPECT_GT(c.kv_transfer_mean_s, 0);
    EXPECT_EQ(c.engine.gpus, 4);
    EXPECT_NEAR(c.output_tokens_per_s_per_gpu, c.output_tokens_per_s / 4, 1e-9);
  }
  serving::Deployment d;
  d.tp = 1;
  d.dp = 4;
  EXPECT_EQ(deployment_label(d, 1), "tp1 pp1 dp4 pd1:3");
  EXPECT_EQ(deployment_label(d), "tp1 pp1 dp4");
  EXPECT_NE(explain_serve_plan(r, *s).find("11 candidates"), std::string::npos);
  EXPECT_NE(explain_serve_plan(r, *s).find("plus 5 prefill/decode splits"), std::string::npos);

  // Without the P/D search: the colocated candidates alone, scored as before.
  r.search_pd = false;
  auto colocated = search_deployments(r);
  ASSERT_TRUE(colocated.ok()) << colocated.error_text();
  EXPECT_EQ(colocated->candidates, 6);
  EXPECT_EQ(colocated->pd_candidates, 0);
  EXPECT_EQ(colocated->simulated, 6);
  ASSERT_EQ(colocated->ranked.size(), 6u);
  std::map<Split, const ServeCandidate*> with_pd;
  for (const ServeCandidate& c : s->ranked) with_pd[split_of(c)] = &c;
  for (const ServeCandidate& c : colocated->ranked) {
    EXPECT_EQ(c.engine.prefill_replicas, 0);
    ASSERT_TRUE(with_pd.count(split_of(c)));
    EXPECT_EQ(c.ttft_p90_s, with_pd[split_of(c)]->ttft_p90_s);
    EXPECT_EQ(c.tpot_p90_s, with_pd[split_of(c)]->tpot_p90_s);
  }
  EXPECT_NE(explain_serve_plan(r, *colocated).find("splits not searched"), std::string::npos);
}

// A P/D split keeps the max_num_seqs of its layout's first-ranked colocated candidate and tries
// every max_num_batched_tokens kept with it (here both: 2048 and 8192 >= 64 and 256).
TEST(ServePlan, PdSplitsKeepTheBestColocatedMaxNumSeqsOfTheirLayout) {
  ServePlanRequest r = small_request(2);
  r.tp = 1;
  r.max_num_seqs_grid = {64, 256};
  r.max_num_batched_tokens_grid = {2048, 8192};
  auto s = search_deployments(r);
  ASSERT_TRUE(s.ok()) << s.error_text();
  int64_t best_seqs = 0;  // the first colocated tp1 pp1 dp2
  for (const ServeCandidate& c : s->ranked)
    if (c.engine.prefill_replicas == 0 && c.deployment.dp == 2) {
      best_seqs = c.deployment.max_num_seqs;
      break;
    }
  ASSERT_GT(best_seqs, 0);
  std::set<int64_t> tokens;
  for (const ServeCandidate& c : s->ranked) {
    if (c.engine.prefill_replicas == 0) continue;
    EXPECT_EQ(c.deployment.max_num_seqs, best_seqs);
    tokens.insert(c.deployment.max_num_batched_tokens);
  }
  EXPECT_EQ(tokens, (std::set<int64_t>{2048, 8192}));
  EXPECT_EQ(s->pd_candidates, 2);
  EXPECT_EQ(s->candidates, 2 * 2 * 2 + 2);  // (tp1 pp1 dp2, tp1 pp2 dp1) x 2 x 2, plus 2
}

// Long prompts (2048 + 256 tokens at 12 req/s) on two replicas of Llama 3.1 8B: colocated, each
// decode step waits behind the prefill chunks scheduled with it; split 1:1, the decode replica
// only decodes. A p90 TPOT target between the two leaves the split first, meeting it alone.
TEST(ServePlan, ATightTpotTargetRanksThePrefillDecodeSplitFirstForLongPrompts) {
  ServePlanRequest r = small_request(2);
  r.tp = 1;
  r.workload = {.requests = 300, .rate_per_s = 12, .prompt_len = 2048, .output_len = 256};
  serving::Deployment d;
  d.dp = 2;
  d.max_num_seqs = 128;
  d.max_num_batched_tokens = 8192;
  auto colocated = simulate_deployment(r, d, r.workload.rate_per_s);
  auto split = simulate_deployment(r, d, r.workload.rate_per_s, 1);
  ASSERT_TRUE(colocated.ok() && split.ok()) << colocated.error_text() << split.error_text();
  ASSERT_LT(split->tpot_p90_s * 1.1, colocated->tpot_p90_s);  // the premise
  EXPECT_EQ(split->engine.prefill_replicas, 1);

  r.slo.tpot_p90_s = 0.5 * (split->tpot_p90_s + colocated->tpot_p90_s);
  auto s = search_deployments(r);
  ASSERT_TRUE(s.ok()) << s.error_text();
  const ServeCandidate& best = s->ranked.front();
  EXPECT_EQ(split_of(best), (Split{1, 1, 2, 1}));
  EXPECT_TRUE(best.meets);
  EXPECT_EQ(best.tpot_p90_s, split->tpot_p90_s);  // the same simulation
  EXPECT_EQ(best.ttft_p90_s, split->ttft_p90_s);
  for (const ServeCandidate& c : s->ranked)
    if (c.engine.prefill_replicas == 0) {
      EXPECT_FALSE(c.meets) << deployment_label(c.deployment);
    }
  const std::string why = explain_serve_plan(r, *s);
  EXPECT_NE(why.find("winner: tp1 pp1 dp2 pd1:1"), std::string::npos) << why;

  auto bad = simulate_deployment(r, d, r.workload.rate_per_s, 2);  // P = dp leaves no decoder
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(mentions(bad.errors(), "P + D = dp=2")) << bad.error_text();
}

// Max-load treats the split as part of the layout: with three layouts (tp1 pp1 dp2 colocated,
// the same split 1:1, tp1 pp2 dp1) and three bisections, each layout gets one, and the split's
// bisection brackets the rate at which its own simulation stops meeting the SLO.
TEST(ServePlan, MaxLoadBisectsEachSplitAsALayoutOfItsOwn) {
  ServePlanRequest r = small_request(2);
  r.tp = 1;
  r.max_num_seqs_grid = {64, 128};
  r.slo = {.ttft_p90_s = 0.5, .tpot_p90_s = 0.05};
  ServePlanOptions opt;
  opt.max_load = true;
  opt.max_load_top = 3;
  auto s = search_deployments(r, opt);
  ASSERT_TRUE(s.ok()) << s.error_text();
  ASSERT_EQ(s->ranked.size(), 5u);  // 2 layouts x 2 engine settings, and 1 split
  std::set<Split> bisected;
  const ServeCandidate* pd = nullptr;
  for (const ServeCandidate& c : s->ranked)
    if (c.load_searched) {
      bisected.insert(split_of(c));
      if (c.engine.prefill_replicas > 0) pd = &c;
    }
  EXPECT_EQ(bisected, (std::set<Split>{{1, 1, 2, 0}, {1, 1, 2, 1}, {1, 2, 1, 0}}));
  ASSERT_NE(pd, nullptr);
  ASSERT_FALSE(pd->max_rate_capped);
  ASSERT_GT(pd->max_rate_per_s, 0);
  auto at = simulate_deployment(r, pd->deployment, pd->max_rate_per_s, 1);
  auto above = simulate_deployment(r, pd->deployment, pd->failing_rate_per_s, 1);
  ASSERT_TRUE(at.ok() && above.ok());
  EXPECT_TRUE(at->meets) << "p90 TTFT " << at->ttft_p90_s << " TPOT " << at->tpot_p90_s;
  EXPECT_FALSE(above->meets) << "p90 TTFT " << above->ttft_p90_s << " TPOT " << above->tpot_p90_s;
}

}  // namespace
}  // namespace parallax
