#include "simulator/moe_layer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/hw_profile.h"
#include "core/model_zoo.h"
#include "core/units.h"
#include "simulator/cost/collective_cost.h"
#include "simulator/cost/compute_cost.h"
#include "simulator/lower.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

using testing::expect_rel;
using testing::round_profile;

/// 64 experts of width 1024, top 8, hidden 1024, SwiGLU: small enough to lower quickly.
ModelSpec moe64() {
  ModelSpec m = testing::gpt_model({.name = "moe64",
                                    .layers = 2,
                                    .hidden = 1024,
                                    .heads = 16,
                                    .vocab = 32000,
                                    .tied_embeddings = true});
  m.ffn_act = FfnAct::kSwiglu;
  MoeSpec e;
  e.experts = 64;
  e.top_k = 8;
  e.expert_ffn_hidden = 1024;
  m.moe = e;
  return m;
}

/// dp ranks of one sequence each, all of them expert-parallel.
ParallelPlan ep_plan(int ep) {
  ParallelPlan p;
  p.dp = ep;
  p.ep = ep;
  p.micro_batch = 1;
  p.seq_len = 4096;
  p.global_batch = ep;
  return p;
}

std::vector<StageCost> lower(const ModelSpec& m, const ParallelPlan& p, const HwProfile& hw) {
  return lower_stages(m, p, hw, RankMap(p, hw.scale_up_domain));
}

const OpCost& op(const PassCost& pass, const std::string& name) {
  for (const auto& o : pass.ops)
    if (o.name == name) return o;
  ADD_FAILURE() << "no op " << name;
  static const OpCost none;
  return none;
}

bool has_op(const PassCost& pass, const std::string& name) {
  for (const auto& o : pass.ops)
    if (o.name == name) return true;
  return false;
}

/// Probability that k draws without repeats from `pool` miss `hit` given items.
double miss(double pool, double hit, int k) {
  double p = 1;
  for (int i = 0; i < k; ++i) p *= (pool - hit - i) / (pool - i);
  return p;
}

// DeepSeek-V3 on EP 64 over 8 nodes of 8, its 8 expert groups a token's top 4: at most 4 nodes,
// and within their 128 experts the 8 copies reach
//   nodes  4 (1 - C(96, 8) / C(128, 8))  = 3.6,
//   ranks 32 (1 - C(124, 8) / C(128, 8)) = 7.4;
// routed without the node limit the same copies would reach 8 (1 - C(224, 8)/C(256, 8)) = 5.3
// nodes.
TEST(MoeLayer, TokenFanoutUnderNodeLimitedRouting) {
  const ModelSpec m = find_zoo_model("deepseek-v3", "t").value();
  ParallelPlan p = ep_plan(64);
  const GroupShape ep{64, 8, 8};
  EXPECT_EQ(routed_domain_limit(m, p, ep), 4);
  const TokenFanout f = token_fanout(m, p, ep);
  expect_rel(f.domains, 4 * (1 - miss(128, 32, 8)));
  expect_rel(f.ranks, 32 * (1 - miss(128, 4, 8)));
  EXPECT_NEAR(f.domains, 3.6, 0.05);
  EXPECT_NEAR(f.ranks, 7.4, 0.05);
  ModelSpec open = m;
  open.moe->router.groups = open.moe->router.group_topk = 0;
  EXPECT_EQ(routed_domain_limit(open, p, ep), 8);
  expect_rel(token_fanout(open, p, ep).domains, 8 * (1 - miss(256, 32, 8)));
  // The plan's own limit, and groups wider than a node (4 groups over 8 nodes: 2 nodes each).
  p.moe_max_nodes = 2;
  EXPECT_EQ(routed_domain_limit(open, p, ep), 2);
  p.moe_max_nodes = 0;
  open.moe->router.groups = 4;
  open.moe->router.group_topk = 1;
  EXPECT_EQ(routed_domain_limit(open, p, ep), 2);
}

// A capacity factor caps the busiest rank's copies at factor x mean: 3x skew, factor 1.25.
TEST(MoeLayer, CapacityFactorBoundsTheBusiestRank) {
  const ModelSpec m = moe64();
  ParallelPlan p = ep_plan(8);
  const double mean = 4096.0 * 8;
  expect_rel(routed_rows(m, p, 4096), mean);
  p.moe_imbalance = 3;
  expect_rel(routed_rows(m, p, 4096), 3 * mean);
  p.moe_capacity_factor = 1.25;
  expect_rel(routed_rows(m, p, 4096), 1.25 * mean);
  p.moe_imbalance = 1;
  p.moe_capacity_factor = 0.5;  // below the mean load: every expert drops half
  expect_rel(routed_rows(m, p, 4096), 0.5 * mean);
}

// On 16 GPUs over two nodes with a token's experts on one node (moe_max_nodes 1), DeepEP sends
// each token over RDMA at most once, to the other node with probability 1/2:
//   RDMA bytes = t * 1/2 * h * 2, against NCCL all-to-all's t * 8 copies * (16 - 8)/16 * h * 2,
// and the scale-out link (10 GB/s against NVLink's 100 in round_profile) sets both times.
TEST(MoeLayer, DeepEpWithNodeLimitedRoutingMovesFewerInterNodeBytes) {
  const HwProfile hw = round_profile(8);
  const ModelSpec m = moe64();
  ParallelPlan p = ep_plan(16);
  p.moe_max_nodes = 1;
  const double t = 4096, row = 1024 * 2.0;
  const double all_to_all = op(lower(m, p, hw)[0].forward, "ep_dispatch").busy_s;
  expect_rel(all_to_all, t * 8 * row * 8 / 16 / (10 * kGB));
  p.moe_dispatcher = MoeDispatcher::kFlex;
  const auto st = lower(m, p, hw);
  const TokenFanout f = token_fanout(m, p, GroupShape{16, 8, 2});
  EXPECT_DOUBLE_EQ(f.domains, 1.0);
  const double rdma_s = t * f.domains * 0.5 * row / (10 * kGB);
  const double nvlink_s = t * f.ranks * 7 / 8 * row / (100 * kGB);
  expect_rel(op(st[0].forward, "deepep_dispatch").busy_s, std::max(rdma_s, nvlink_s));
  expect_rel(op(st[0].forward, "deepep_combine").busy_s, std::max(rdma_s, nvlink_s));
  expect_rel(all_to_all / op(st[0].forward, "deepep_dispatch").busy_s, 8);  // 4 copies vs 1/2
  EXPECT_FALSE(has_op(st[0].forward, "ep_dispatch"));
}

// The allgather dispatcher gathers every token with its routing map (1 byte) and probabilities
// (fp32) over the etp x ep ranks and reduce-scatters the outputs back: on 4 ranks of one node,
//   all-gather t = (n - 1)/n * 4t (h a + 5 E) / B.
TEST(MoeLayer, AllGatherDispatcherGathersEveryTokenOverTheExpertRanks) {
  const HwProfile hw = round_profile(8);
  const ModelSpec m = moe64();
  ParallelPlan p = ep_plan(4);
  p.moe_dispatcher = MoeDispatcher::kAllGather;
  const auto st = lower(m, p, hw);
  const double t = 4096, n = 4, bw = 100 * kGB;
  expect_rel(op(st[0].forward, "ep_allgather").busy_s,
             (n - 1) / n * n * t * (1024 * 2.0 + 64 * 5.0) / bw);
  expect_rel(op(st[0].forward, "ep_reduce_scatter").busy_s, (n - 1) / n * n * t * 1024 * 2.0 / bw);
  EXPECT_FALSE(has_op(st[0].forward, "ep_dispatch"));
}

// The experts run as a grouped GEMM of their local count (16 of 64 on EP 4), each with the
// rows its share of the routed copies gives it; all-to-all adds the chunk sort when a rank holds
// several experts, and the host sync of the token counts costs one launch.
TEST(MoeLayer, ExpertsRunAsAGroupedGemmBesideTheDispatchersKernels) {
  HwProfile hw = round_profile(8);
  hw.kernel_overhead_us = 5;
  const ModelSpec m = moe64();
  const ParallelPlan p = ep_plan(4);
  const auto st = lower(m, p, hw);
  const ComputeCost cost(hw);
  const double rows = 4 * 4096.0 * 8 / 64;  // per expert: every rank's copies over 64 experts
  expect_rel(
      op(st[0].forward, "experts_gate_up").time_s,
      cost.grouped_gemm({static_cast<int64_t>(rows), 2048, 1024, 16}, Precision::kBf16).time_s);
  expect_rel(op(st[0].forward, "moe_host_sync").time_s, 5 * kUs);
  EXPECT_TRUE(has_op(st[0].forward, "sort_chunks"));
  EXPECT_FALSE(has_op(lower(m, ep_plan(1), hw)[0].forward, "sort_chunks"));
  // TE's fused router: top-k with the score function and the aux-loss scores (each reads the
  // bf16 logits, writes fp32 scores and a 1-byte map) and the aux loss (reads fp32): 3 launches.
  const double n = 4096.0 * 64;
  expect_rel(op(st[0].forward, "router_topk").time_s,
             (2 * n * (2 + 4 + 1) + n * 4) / (1000 * kGB) + 3 * 5 * kUs);
  // PyTorch eager runs each op of the router and permutation as its own kernel.
  ParallelPlan eager = p;
  eager.eager = true;
  const auto e = lower(m, eager, hw);
  EXPECT_GT(op(e[0].forward, "router_topk").time_s, 5 * op(st[0].forward, "router_topk").time_s);
  EXPECT_GT(op(e[0].forward, "permute").time_s, op(st[0].forward, "permute").time_s);
  EXPECT_GT(op(e[0].forward, "unpermute").time_s, op(st[0].forward, "unpermute").time_s);
}

// Multi-token prediction (DeepSeek-V3 Sec. 2.2) adds to the last stage one block of the last
// layer's kind, the [2h -> h] projection and the head again; FLOPs per token grow by
// 3 (2 block matmuls + 2 * 2h^2 + 2 h V) plus the block's attention.
TEST(MoeLayer, MultiTokenPredictionRunsOnTheLastStage) {
  const HwProfile hw = round_profile(8);
  ModelSpec m = moe64();
  ParallelPlan p = ep_plan(1);
  p.pp = 2;
  p.dp = 1;
  p.global_batch = 4;
  const auto plain = lower(m, p, hw);
  m.mtp_layers = 1;
  const auto mtp = lower(m, p, hw);
  EXPECT_DOUBLE_EQ(mtp[0].forward.time_s, plain[0].forward.time_s);
  EXPECT_TRUE(has_op(mtp[1].forward, "mtp_eh_proj"));
  EXPECT_GT(mtp[1].forward.time_s, plain[1].forward.time_s);
  EXPECT_GT(mtp[1].act_bytes_per_microbatch, plain[1].act_bytes_per_microbatch);
  // The block's parameters plus its input projection and norms, and the embedding table the
  // modules share, copied to the last stage.
  const double h = 1024;
  expect_rel(
      mtp[1].dense_params + mtp[1].expert_params - (plain[1].dense_params + plain[1].expert_params),
      mtp_module_params(m));
  ModelSpec untied = m;
  untied.tied_embeddings = false;
  ModelSpec untied_plain = untied;
  untied_plain.mtp_layers = 0;
  expect_rel(lower(untied, p, hw)[1].dense_params - lower(untied_plain, p, hw)[1].dense_params,
             mtp_module_params(m) - 64 * 3 * h * 1024 + 32000 * h);
  const double tokens = 4.0 * 4096;
  ModelSpec none = m;
  none.mtp_layers = 0;
  const double block = 2 * (attention_params_per_layer(m) + 8 * 3 * h * 1024 + 64 * h) +
                       2 * 4096.0 * (64 + 64) * 16 * 0.5;
  expect_rel(step_flops(m, p, true, false) - step_flops(none, p, true, false),
             3 * tokens * (block + 2 * h * 32000 + 2 * 2 * h * h));
}

}  // namespace
}  // namespace parallax
