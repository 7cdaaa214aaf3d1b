#include "simulator/serving/step_cost.h"

#include <gtest/gtest.h>

#include "core/json_io.h"
#include "core/model_zoo.h"
#include "core/units.h"

namespace parallax::serving {
namespace {

ModelSpec zoo(const char* name) { return find_zoo_model(name, "t").value(); }
HwProfile h100() { return find_profile(builtin_profiles().value(), "h100-sxm-80gb", "t").value(); }

StepShape decode_step(int64_t batch, int64_t context) {
  StepShape s;
  s.decodes = batch;
  s.decode_context = static_cast<double>(batch * context);
  s.sampled = batch;
  return s;
}

// Batch-1 decode is a weight read: every parameter of the model crosses HBM once per token,
// t >= P * 2 bytes / (bandwidth * efficiency); the kernels' launch overheads and the small KV
// read add a little on top (Llama-3.1 8B: 16 GB of bf16 weights, 5.3 ms at the H100's
// streaming bandwidth; vLLM measures about 6.5-7 ms a token there).
TEST(StepCost, BatchOneDecodeIsTheWeightRead) {
  const ModelSpec m = zoo("llama3.1-8b");
  const HwProfile hw = h100();
  const StepCost cost(m, hw, Deployment{});
  const double params = count_params(m).total();
  const double roofline = params * kBf16Bytes / (hw.hbm_bw_gbps * kGB * hw.hbm_efficiency);
  const double t = cost.time_s(decode_step(1, 1024));
  EXPECT_GT(t, roofline);
  EXPECT_LT(t, 1.5 * roofline) << "roofline " << roofline;
  // Sixteen sequences read the same weights: far less than sixteen times the time.
  EXPECT_LT(cost.time_s(decode_step(16, 1024)), 1.5 * t);
}

// A long prefill is compute: 2 P FLOPs per token for the GEMMs plus causal attention,
// 2 * 2 * layers * hidden * s^2 / 2, at the GEMM efficiency of the part at most.
TEST(StepCost, LongPrefillIsBoundByTheTensorCores) {
  const ModelSpec m = zoo("llama3.1-8b");
  const HwProfile hw = h100();
  const StepCost cost(m, hw, Deployment{});
  StepShape s;
  const int64_t n = 8192;
  s.prefills.push_back({n, 0});
  s.sampled = 1;
  const double flops = 2.0 * (count_params(m).total() - count_params(m).embedding) * n +
                       2.0 * m.layers * m.hidden * static_cast<double>(n) * n;
  const double ideal = flops / (hw.bf16_tflops * 1e12 * hw.gemm_efficiency);
  const double t = cost.time_s(s);
  EXPECT_GT(t, 0.95 * ideal);
  EXPECT_LT(t, 1.5 * ideal) << "ideal " << ideal;
  // A chunk after 4096 tokens of context costs more than the same chunk alone.
  StepShape late, early;
  late.prefills.push_back({2048, 4096});
  early.prefills.push_back({2048, 0});
  EXPECT_GT(cost.parts(late).attention_s, 2.0 * cost.parts(early).attention_s);
  EXPECT_NEAR(cost.parts(late).gemm_s, cost.parts(early).gemm_s, 1e-12);
}

TEST(StepCost, TensorParallelismSplitsTheWeightReadAndAddsAllReduces) {
  const ModelSpec m = zoo("llama3.1-70b");
  const HwProfile hw = h100();
  Deployment tp4, tp8;
  tp4.tp = 4;
  tp8.tp = 8;
  const StepShape s = decode_step(32, 2048);
  const StepCost::Parts a = StepCost(m, hw, tp4).parts(s), b = StepCost(m, hw, tp8).parts(s);
  EXPECT_LT(b.total(), a.total());
  EXPECT_GT(b.total(), 0.5 * a.total());
  EXPECT_NEAR(b.gemm_s / a.gemm_s, 0.5, 0.1);
  EXPECT_GT(b.comm_s, 0);
}

// Decoding reads each sequence's KV cache once per layer, whatever the query heads sharing it:
// Llama-3.1 70B at tp 8 keeps 512 bytes a token and layer, so 256 sequences of 1500 tokens read
// 197 MB a layer; the attention time is that read at the streaming bandwidth (the math, 8 query
// heads a KV head, is far shorter).
TEST(StepCost, DecodeAttentionReadsTheCacheOnce) {
  const ModelSpec m = zoo("llama3.1-70b");
  const HwProfile hw = h100();
  Deployment d;
  d.tp = 8;
  const double read = 256.0 * 1500 * 512 / (hw.hbm_bw_gbps * kGB * hw.hbm_efficiency);
  const double t = StepCost(m, hw, d).parts(decode_step(256, 1500)).attention_s / m.layers;
  EXPECT_GT(t, read);
  EXPECT_LT(t, read + 2 * hw.kernel_overhead_us * kUs);
}

// KV bytes per token and layer: K and V of the rank's KV heads in bf16. Llama-3.1 70B has 8 KV
// heads of 128: 4096 bytes whole, 512 at tp 8, and still 512 at tp 16 (a head is replicated,
// not split). DeepSeek-V3's MLA keeps a 512-wide latent and a 64-wide rotary key on every rank.
// The stages of a pipelined replica add up to the whole step; the first carries the embedding,
// the last the output layer and sampler, and the layers split as evenly as they go (DeepSeek-V3:
// 61 layers, the first 3 dense, on 4 stages of 15, 15, 15, 16 layers; Llama-3.1 70B: 80 in 20s).
TEST(StepCost, StagesSumToTheStep) {
  const HwProfile hw = h100();
  StepShape mixed = decode_step(64, 2048);
  mixed.prefills.push_back({1024, 512});
  mixed.sampled += 1;
  for (const char* name : {"llama3.1-70b", "deepseek-v3"}) {
    const ModelSpec m = zoo(name);
    for (int pp : {1, 2, 4}) {
      Deployment d;
      d.tp = 8;
      d.pp = pp;
      const StepCost cost(m, hw, d);
      std::vector<double> stages;
      cost.stage_times(mixed, &stages);
      ASSERT_EQ(stages.size(), static_cast<size_t>(pp));
      double sum = 0;
      for (double x : stages) sum += x;
      EXPECT_NEAR(sum, cost.time_s(mixed), 1e-12 * sum) << name << " pp" << pp;
      if (pp == 1) continue;
      for (double x : stages) EXPECT_GT(x, 0.5 * sum / pp) << name << " pp" << pp;
      // The middle stages hold the same layers and send the same activations: equal; the first
      // adds the embedding, the last the output layer but no send.
      if (pp == 4) {
        EXPECT_EQ(stages[1], stages[2]) << name;
      }
      EXPECT_NE(stages.front(), stages[1]) << name << " pp" << pp;
    }
  }
}

TEST(KvBudget, BytesPerTokenFollowTheAttentionKind) {
  const ModelSpec llama = zoo("llama3.1-70b");
  EXPECT_EQ(kv_bytes_per_token_layer(llama, 1), 4096.0);
  EXPECT_EQ(kv_bytes_per_token_layer(llama, 8), 512.0);
  EXPECT_EQ(kv_bytes_per_token_layer(llama, 16), 512.0);
  const ModelSpec ds = zoo("deepseek-v3");
  EXPECT_EQ(kv_bytes_per_token_layer(ds, 1), 1152.0);
  EXPECT_EQ(kv_bytes_per_token_layer(ds, 8), 1152.0);
}

TEST(KvBudget, WhatTheWeightsLeaveHoldsTheCache) {
  const ModelSpec m = zoo("llama3.1-70b");
  const HwProfile hw = h100();
  Deployment d;
  d.tp = 8;
  const KvBudget b = kv_budget(m, hw, d).value();
  // 70.6B bf16 parameters over 8 GPUs: 16.4 GiB each.
  EXPECT_NEAR(b.weights_gib, count_params(m).total() * 2 / 8 / kGiB, 0.3);
  EXPECT_NEAR(b.usable_gib, hw.hbm_gib * 0.9, 1e-9);
  EXPECT_NEAR(b.kv_gib, b.usable_gib - b.weights_gib - b.activation_gib - b.reserved_gib, 1e-9);
  EXPECT_EQ(b.kv_bytes_per_token, 512.0 * 80);
  EXPECT_EQ(b.tokens(), b.blocks * 16);
  EXPECT_GT(b.tokens(), 800000);  // about 1.2M tokens of context on 8 H100s
  // A lower memory fraction leaves less, by exactly the HBM it gives up.
  Deployment low = d;
  low.gpu_memory_utilization = 0.8;
  EXPECT_NEAR(kv_budget(m, hw, low).value().kv_gib, b.kv_gib - 0.1 * hw.hbm_gib, 1e-9);
}

TEST(KvBudget, AModelThatDoesNotFitSaysWhy) {
  const auto r = kv_budget(zoo("llama3.1-405b"), h100(), Deployment{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.errors()[0].what.find("does not fit"), std::string::npos) << r.errors()[0].what;
}

TEST(Deployment, BadLayoutsAreNamed) {
  const ModelSpec m = zoo("llama3.1-70b");
  Deployment d;
  d.tp = 3;
  d.dp = 2;
  const Diagnostics e = check_deployment(m, d, 8);
  ASSERT_GE(e.size(), 2u);
  EXPECT_EQ(e[0].where, "--gpus");
  EXPECT_EQ(e[1].where, "--tp");
  d = Deployment{};
  d.ep = 2;
  d.tp = 2;
  EXPECT_EQ(check_deployment(m, d, 2).at(0).where, "--ep");
  EXPECT_TRUE(check_deployment(zoo("mixtral-8x7b"), d, 2).empty());
  d.max_num_batched_tokens = 16;
  EXPECT_EQ(check_deployment(zoo("mixtral-8x7b"), d, 2).at(0).where, "--max-num-batched-tokens");
}

// serve --tp 2^30 --pp 4 overflowed int in Deployment::gpus() (UBSan), and --gpus 2^30 made
// 2^30 replicas to simulate; both are refused with the limit.
TEST(Deployment, BeyondTheLargestClusterIsRefused) {
  const ModelSpec m = zoo("llama3.1-8b");
  Deployment d;
  d.tp = 1 << 30;
  d.pp = 4;
  Diagnostics e = check_deployment(m, d, 0);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].str().find("tp*pp*dp=1073741824*4*1, ep=1: beyond the largest cluster modelled"),
            std::string::npos)
      << e[0].str();
  d = Deployment{};
  d.dp = 1 << 30;
  e = check_deployment(m, d, 1 << 30);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].str().find("at most 1048576 GPUs"), std::string::npos) << e[0].str();
}

// Wide expert parallelism: ep = tp * dp with pp 1, the experts dividing it.
TEST(Deployment, WideExpertParallelismSpansEveryReplica) {
  const ModelSpec q = zoo("qwen3-30b-a3b");  // 128 experts
  Deployment d;
  d.tp = 2;
  d.dp = 4;
  d.ep = 8;
  EXPECT_TRUE(d.wide_ep());
  EXPECT_TRUE(check_deployment(q, d, 8).empty()) << check_deployment(q, d, 8).front().str();
  d.pp = 2;
  d.dp = 2;
  d.ep = 4;
  const Diagnostics e = check_deployment(q, d, 8);
  ASSERT_FALSE(e.empty());
  EXPECT_EQ(e.front().where, "--ep");
  EXPECT_NE(e.front().str().find("must be tp*dp=4 with pp=1"), std::string::npos)
      << e.front().str();
  d = Deployment{};
  d.tp = 4;
  d.ep = 8;  // dp 1: nothing to spread over
  EXPECT_EQ(check_deployment(q, d, 4).at(0).where, "--ep");
}

// Two-batch overlap hides the all-to-alls behind the other micro-batch's compute: across two
// nodes (DeepSeek-V3 on 16 H200, tp1 dp16 ep16) a step of 2048-token prefill chunks is shorter
// with it. A small decode step is longer: each micro-batch reads the weights again, which is
// why the engines enable it only above a token threshold. It needs wide ep.
TEST(StepCost, TwoBatchOverlapHidesTheAllToAlls) {
  const ModelSpec m = zoo("deepseek-v3");
  const HwProfile hw = find_profile(builtin_profiles().value(), "h200-sxm-141gb", "t").value();
  Deployment d;
  d.tp = 1;
  d.dp = 16;
  d.ep = 16;
  d.precision = Precision::kFp8;
  StepShape chunks;
  chunks.prefills = {{1024, 0}, {1024, 2048}};
  chunks.sampled = 2;
  const std::vector<StepShape> prefill(16, chunks), decode(16, decode_step(64, 2048));
  Deployment overlapped = d;
  overlapped.two_batch_overlap = true;
  const StepCost plain(m, hw, d), tbo(m, hw, overlapped);
  EXPECT_LT(tbo.lockstep_time_s(prefill), plain.lockstep_time_s(prefill));
  EXPECT_GT(tbo.lockstep_time_s(prefill), 0.5 * plain.lockstep_time_s(prefill));
  EXPECT_GT(tbo.lockstep_time_s(decode), plain.lockstep_time_s(decode));
  Deployment narrow;
  narrow.tp = 8;
  narrow.dp = 2;
  narrow.ep = 8;
  narrow.two_batch_overlap = true;
  const Diagnostics e = check_deployment(m, narrow, 16);
  ASSERT_FALSE(e.empty());
  EXPECT_EQ(e.front().where, "--two-batch-overlap");
}

// Spreading the experts over every GPU leaves each GPU E/ep whole experts instead of E/tp
// slices: less weight, more KV cache.
TEST(KvBudget, WideExpertParallelismHoldsFewerExperts) {
  const ModelSpec q = zoo("qwen3-30b-a3b");
  Deployment in_replica, wide;
  in_replica.tp = wide.tp = 2;
  in_replica.dp = wide.dp = 4;
  in_replica.ep = 2;
  wide.ep = 8;
  auto a = kv_budget(q, h100(), in_replica), b = kv_budget(q, h100(), wide);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_LT(b->weights_gib, 0.5 * a->weights_gib);
  EXPECT_GT(b->blocks, a->blocks);
}

// Replicas stepping together: the slowest replica sets the pace, the routed experts see every
// replica's tokens (more tokens, more time, but less than running the replicas one by one),
// and an idle replica costs nothing of its own.
TEST(StepCost, LockstepIsTheSlowestReplicaPlusTheSharedExperts) {
  const ModelSpec q = zoo("qwen3-30b-a3b");
  Deployment d;
  d.tp = 1;
  d.dp = 8;
  d.ep = 8;
  const HwProfile hw = h100();  // StepCost keeps a reference: not a temporary
  const StepCost cost(q, hw, d);
  const StepShape dec = decode_step(64, 1024);
  StepShape pre;
  pre.prefills.push_back({2048, 0});
  pre.sampled = 1;
  const StepShape none;
  std::vector<StepShape> one(8, none), all(8, dec), mixed(8, dec);
  one[0] = dec;
  mixed[3] = pre;
  const double t_one = cost.lockstep_time_s(one), t_all = cost.lockstep_time_s(all),
               t_mixed = cost.lockstep_time_s(mixed);
  EXPECT_GT(t_one, 0);
  EXPECT_GT(t_all, t_one);
  EXPECT_LT(t_all, 8 * t_one);
  EXPECT_GT(t_mixed, t_all);  // one replica's prefill holds every replica's decode
  std::vector<StepShape> pre_alone(8, none);
  pre_alone[3] = pre;
  EXPECT_GT(t_mixed, cost.lockstep_time_s(pre_alone));
}

}  // namespace
}  // namespace parallax::serving
