#include "simulator/lower.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/hw_profile.h"
#include "core/model_spec.h"
#include "core/parallel_plan.h"
#include "core/rank_map.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

using testing::expect_rel;
using testing::round_profile;

/// GPT-style: MHA, GELU MLP of width 4h, tied embeddings (the setting of Korthikanti et al. and
/// of Narayanan et al. 2021's FLOP formula).
ModelSpec gpt(int layers = 4) {
  return testing::gpt_model({.name = "gpt-test",
                             .layers = layers,
                             .hidden = 1024,
                             .heads = 16,
                             .vocab = 32000,
                             .tied_embeddings = true});
}

ModelSpec moe() {
  ModelSpec m = gpt(2);
  m.ffn_act = FfnAct::kSwiglu;
  m.moe = MoeSpec{
      .experts = 8, .top_k = 2, .shared_experts = 0, .expert_ffn_hidden = 1024, .dense_layers = 0};
  return m;
}

ParallelPlan plan(int tp, bool sp, Recompute rc) {
  ParallelPlan p;
  p.tp = tp;
  p.micro_batch = 2;
  p.seq_len = 2048;
  p.global_batch = 8;
  p.sequence_parallel = sp;
  p.recompute = rc;
  return p;
}

// Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
// eq. (1): per layer and microbatch, tp = 1, bytes = s b h (34 + 5 a s / h). Flash attention stores
// no s x s tensor (drop 5as/h), this model has no dropout (drop the two 1-byte masks: 34 -> 32),
// and flash attention keeps fp32 softmax statistics per head and token: + 4 a s b.
TEST(Lower, ActivationBytesMatchKorthikantiWithoutTp) {
  const ModelSpec m = gpt();
  const ParallelPlan p = plan(1, false, Recompute::kNone);
  const double s = 2048, b = 2, h = 1024, a = 16;
  for (int layer = 0; layer < m.layers; ++layer) {
    expect_rel(layer_activation_bytes(m, p, layer), s * b * h * 32 + 4 * a * s * b);
  }
}

TEST(Lower, ActivationBytesWithTensorAndSequenceParallelism) {
  const ModelSpec m = gpt();
  const double s = 2048, b = 2, h = 1024, a = 16, t = 4;
  // Korthikanti eq. (5), TP + SP: s b h 34 / t; here s b h 32 / t + 4 (a/t) s b.
  expect_rel(layer_activation_bytes(m, plan(4, true, Recompute::kNone), 0),
             s * b * h * 32 / t + 4 * (a / t) * s * b);
  // Korthikanti eq. (2), TP without SP: s b h (10 + 24/t); without the two dropout masks the
  // replicated part (two norm inputs, QKV and MLP inputs) is 8: s b h (8 + 24/t) + 4 (a/t) s b.
  expect_rel(layer_activation_bytes(m, plan(4, false, Recompute::kNone), 0),
             s * b * h * (8 + 24 / t) + 4 * (a / t) * s * b);
}

TEST(Lower, ActivationBytesWithContextParallelismSplitTheSequence) {
  const ModelSpec m = gpt();
  ParallelPlan p = plan(1, false, Recompute::kNone);
  p.cp = 2;
  const double s = 2048.0 / 2, b = 2, h = 1024, a = 16;  // each rank holds s/cp tokens
  expect_rel(layer_activation_bytes(m, p, 0), s * b * h * 32 + 4 * a * s * b);
}

TEST(Lower, ActivationBytesWithFullRecomputeKeepOnlyTheLayerInput) {
  const ModelSpec m = gpt();
  const double s = 2048, b = 2, h = 1024, t = 4;
  // Korthikanti section 5: full recompute stores the layer input, 2 s b h (SP: / t).
  expect_rel(layer_activation_bytes(m, plan(1, false, Recompute::kFull), 0), 2 * s * b * h);
  expect_rel(layer_activation_bytes(m, plan(4, true, Recompute::kFull), 0), 2 * s * b * h / t);
}

// Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on GPU Clusters using
// Megatron-LM", eq. 3), GPT with full recompute, full (non-causal) attention:
//   F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)).
// Derivation per step: forward matmuls 24 B s l h^2 (QKV 6, out 2, MLP 16 per token and h^2),
// attention 4 B s^2 l h (QK^T and PV), logits 2 B s h V; layers run 4 times (fwd, recompute,
// 2x bwd), the logits 3 times: 4 (24 B s l h^2 + 4 B s^2 l h) + 3 * 2 B s h V.
TEST(Lower, StepFlopsMatchMegatronFormula) {
  const ModelSpec m = gpt();
  const ParallelPlan p = plan(1, false, Recompute::kFull);
  const double bb = 8, s = 2048, l = 4, h = 1024, v = 32000;
  const double megatron = 96 * bb * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h));
  expect_rel(step_flops(m, p, /*causal=*/false, /*with_recompute=*/true), megatron);
  // Without recompute (model FLOPs): 3 passes of everything, 72 B s l h^2 (1 + s/(6h) + V/(12lh)).
  expect_rel(step_flops(m, p, false, false),
             72 * bb * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h)));
  // Causal attention halves the 4 B s^2 l h term of each pass.
  expect_rel(step_flops(m, p, true, false),
             3 * (24 * bb * s * l * h * h + 2 * bb * s * s * l * h + 2 * bb * s * h * v));
  // Selective recompute re-runs attention only: + 4 B s^2 l h (full counting).
  expect_rel(step_flops(m, plan(1, false, Recompute::kSelective), false, true),
             3 * (24 * bb * s * l * h * h + 4 * bb * s * s * l * h + 2 * bb * s * h * v) +
                 4 * bb * s * s * l * h);
}

TEST(Lower, ForwardFlopsOfTheStagesAddUpToAThirdOfTheModelFlops) {
  // The lowered passes and step_flops count the same work: over all ranks of one microbatch
  // group, forward FLOPs * microbatches = step_flops(causal, no recompute) / 3.
  const ModelSpec m = gpt();
  const HwProfile hw = round_profile();
  for (int tp : {1, 2}) {
    ParallelPlan p = plan(tp, false, Recompute::kNone);
    p.pp = 2;
    const RankMap ranks(p, hw.scale_up_domain);
    double fwd = 0;
    for (const StageCost& s : lower_stages(m, p, hw, ranks)) fwd += s.forward.flops;
    expect_rel(fwd * tp * static_cast<double>(p.num_microbatches()),
               step_flops(m, p, true, false) / 3);
  }
}

TEST(Lower, StageParametersAddUpToTheModel) {
  ModelSpec m = gpt(5);
  m.tied_embeddings = false;
  ParallelPlan p = plan(1, false, Recompute::kNone);
  p.pp = 2;
  const HwProfile hw = round_profile();
  const std::vector<StageCost> stages = lower_stages(m, p, hw, RankMap(p, hw.scale_up_domain));
  ASSERT_EQ(stages.size(), 2u);
  double params = 0;
  int layers = 0;
  for (const StageCost& s : stages) {
    EXPECT_EQ(s.first_layer, layers);
    params += s.dense_params + s.expert_params;
    layers += s.layers;
  }
  EXPECT_EQ(layers, m.layers);
  EXPECT_TRUE(stages.front().has_embedding);
  EXPECT_TRUE(stages.back().has_output);
  // Embedding + output + layers (attention, MLP, two norms each) + the final norm.
  EXPECT_DOUBLE_EQ(params, count_params(m).total());
}

/// Communication ops of a category that actually move data, over every pass of every stage.
int comm_ops(const std::vector<StageCost>& stages, CostCategory c) {
  int n = 0;
  for (const StageCost& s : stages) {
    for (const PassCost* pass : {&s.forward, &s.backward, &s.backward_input, &s.backward_weight}) {
      for (const OpCost& op : pass->ops) n += op.category == c && op.busy_s > 0;
    }
  }
  return n;
}

std::vector<StageCost> lower(const ModelSpec& m, const ParallelPlan& p) {
  const HwProfile hw = round_profile();
  return lower_stages(m, p, hw, RankMap(p, hw.scale_up_domain));
}

TEST(Lower, TensorParallelCommunicationOnlyWithTp) {
  const ModelSpec m = gpt();
  EXPECT_EQ(comm_ops(lower(m, plan(1, false, Recompute::kNone)), CostCategory::kTpComm), 0);
  const auto tp2 = lower(m, plan(2, false, Recompute::kNone));
  EXPECT_GT(comm_ops(tp2, CostCategory::kTpComm), 0);
  EXPECT_GT(tp2[0].forward.by_category[static_cast<int>(CostCategory::kTpComm)], 0);
  EXPECT_GT(comm_ops(lower(m, plan(2, true, Recompute::kNone)), CostCategory::kTpComm), 0);
}

TEST(Lower, ExpertAllToAllOnlyWithEp) {
  const ModelSpec m = moe();
  ParallelPlan p = plan(1, false, Recompute::kNone);
  p.dp = 2;
  EXPECT_EQ(comm_ops(lower(m, p), CostCategory::kEpComm), 0);
  p.ep = 2;
  const auto ep2 = lower(m, p);
  // Dispatch and combine in forward, their mirrors in backward, per MoE layer.
  EXPECT_GT(comm_ops(ep2, CostCategory::kEpComm), 0);
  EXPECT_GT(ep2[0].forward.by_category[static_cast<int>(CostCategory::kEpComm)], 0);
  EXPECT_EQ(comm_ops(ep2, CostCategory::kTpComm), 0);
  EXPECT_EQ(comm_ops(ep2, CostCategory::kCpComm), 0);
}

TEST(Lower, ContextParallelRingOnlyWithCp) {
  const ModelSpec m = gpt();
  ParallelPlan p = plan(1, false, Recompute::kNone);
  EXPECT_EQ(comm_ops(lower(m, p), CostCategory::kCpComm), 0);
  p.cp = 2;
  const auto cp2 = lower(m, p);
  EXPECT_GT(comm_ops(cp2, CostCategory::kCpComm), 0);
  EXPECT_EQ(comm_ops(cp2, CostCategory::kTpComm), 0);
  EXPECT_EQ(comm_ops(cp2, CostCategory::kEpComm), 0);
}

const OpCost* find_op(const PassCost& pass, const std::string& name) {
  for (const auto& op : pass.ops)
    if (op.name == name) return &op;
  return nullptr;
}

// Megatron launches the input gradient's reduce-scatter asynchronously beside the weight-gradient
// GEMM of the same column-parallel layer: exposed = max(0, c - w) + k min(c, w), with k the SM
// share of the communication (0 in the round profile). Under ZB-H1 the weight gradient is
// deferred, so the collective is exposed in full.
TEST(Lower, TpBackwardReduceScatterHidesBehindTheWeightGradient) {
  const ModelSpec m = gpt(1);
  ParallelPlan p = plan(2, true, Recompute::kNone);
  const auto st = lower(m, p);
  const OpCost* rs = find_op(st[0].backward, "tp_gather.attn.bwd_rs");
  const OpCost* wgrad = find_op(st[0].backward, "qkv_proj.wgrad");
  ASSERT_NE(rs, nullptr);
  ASSERT_NE(wgrad, nullptr);
  EXPECT_DOUBLE_EQ(rs->time_s, std::max(0.0, rs->busy_s - wgrad->time_s));
  p.schedule = ScheduleKind::kZeroBubbleH1;
  const auto zb_stages = lower(m, p);
  const OpCost* zb = find_op(zb_stages[0].backward, "tp_gather.attn.bwd_rs");
  ASSERT_NE(zb, nullptr);
  EXPECT_DOUBLE_EQ(zb->time_s, zb->busy_s);
}

// With pipelining, FSDP keeps the stage gathered across microbatches: no per-layer gathers in
// the passes (the per-step sync is in simulate); without pipelining every layer gathers.
TEST(Lower, FsdpGathersPerLayerOnlyWithoutPipelining) {
  const ModelSpec m = gpt(4);
  ParallelPlan p = plan(1, false, Recompute::kNone);
  p.fsdp = true;
  p.dp = 2;
  // Per layer: the forward gather, and the backward gather + reduce-scatter, which comm_ops
  // sees in both the full backward and the zero-bubble W pass.
  EXPECT_EQ(comm_ops(lower(m, p), CostCategory::kDpComm), 3 * m.layers);
  p.pp = 2;
  EXPECT_EQ(comm_ops(lower(m, p), CostCategory::kDpComm), 0);
}

// MLA: the down projections (and their norms) are replicated on every TP rank; the head-split
// up projections and the output projection are divided by tp.
TEST(Lower, MlaDownProjectionsAreReplicatedAcrossTp) {
  ModelSpec m = gpt(1);
  m.tied_embeddings = false;
  m.mla = MlaSpec{.q_lora_rank = 256,
                  .kv_lora_rank = 128,
                  .qk_nope_head_dim = 64,
                  .qk_rope_head_dim = 32,
                  .v_head_dim = 64};
  const double h = 1024, heads = 16;
  const double replicated = h * 256 + 256 + h * (128 + 32) + 128;
  const double split = 256 * heads * 96 + 128 * heads * (64 + 64) + heads * 64 * h;
  for (int tp : {1, 2, 4}) {
    const double attn = replicated + split / tp;
    const double mlp = 2 * h * 4 * h / tp, norms = 2 * h;
    const double embed_and_out = 2 * 32000 * h / tp + h;  // embedding, output, final norm
    double total = 0;
    for (const auto& st : lower(m, plan(tp, true, Recompute::kNone))) total += st.dense_params;
    expect_rel(total, attn + mlp + norms + embed_and_out);
  }
}

// Expert tensor parallelism exchanges the dispatched tokens inside the etp group: an all-gather
// before the expert GEMMs and a reduce-scatter after, mirrored in backward.
TEST(Lower, ExpertTensorParallelismAddsItsCollectives) {
  const ModelSpec m = moe();
  ParallelPlan p = plan(1, false, Recompute::kNone);
  p.dp = 4;
  p.ep = 2;
  const int base = comm_ops(lower(m, p), CostCategory::kEpComm);
  p.etp = 2;
  const auto etp2 = lower(m, p);
  // Per MoE layer: gather and reduce in forward, their mirrors in backward (counted in the
  // full and the zero-bubble B pass).
  EXPECT_EQ(comm_ops(etp2, CostCategory::kEpComm), base + m.layers * (2 + 2 * 2));
  EXPECT_NE(find_op(etp2[0].forward, "etp_gather"), nullptr);
  EXPECT_NE(find_op(etp2[0].forward, "etp_reduce"), nullptr);
}

// What the weight gradients read, per layer and microbatch (GPT, tp = 1, no SP): the two norm
// outputs 2 * 2sbh, the attention output 2sbh, the GELU output 2 * 4sbh = 14 sbh; everything
// stored under full recompute.
TEST(Lower, WeightGradientInputsOfALayer) {
  const ModelSpec m = gpt();
  const double s = 2048, b = 2, h = 1024;
  expect_rel(layer_weight_input_bytes(m, plan(1, false, Recompute::kNone), 0), 14 * s * b * h);
  const ParallelPlan full = plan(1, false, Recompute::kFull);
  expect_rel(layer_weight_input_bytes(m, full, 0), layer_activation_bytes(m, full, 0));
}

// Unfused attention stores the s x s probabilities: Korthikanti's 2as/h softmax-output term
// (no dropout, so no mask and no dropout output): s b h 32 + 2 a s^2 b bytes per layer at tp = 1;
// selective recompute drops them again (and the attention output it rebuilds).
TEST(Lower, UnfusedAttentionStoresTheProbabilities) {
  const ModelSpec m = gpt();
  ParallelPlan p = plan(1, false, Recompute::kNone);
  p.attention = AttentionImpl::kUnfused;
  const double s = 2048, b = 2, h = 1024, a = 16;
  expect_rel(layer_activation_bytes(m, p, 0), s * b * h * 32 + 2 * a * s * s * b);
  p.recompute = Recompute::kSelective;
  expect_rel(layer_activation_bytes(m, p, 0), s * b * h * 32);
  const auto st = lower(m, p);
  EXPECT_NE(find_op(st[0].forward, "attn_scores"), nullptr);
  EXPECT_NE(find_op(st[0].forward, "attn_softmax"), nullptr);
  EXPECT_NE(find_op(st[0].backward, "attn_scores.recompute"), nullptr);
  EXPECT_EQ(find_op(st[0].forward, "attention"), nullptr);
}

// Context parallelism by all-gather: one gather of K and V before attention, a gather and a
// reduce-scatter of their gradients in backward; no ring.
TEST(Lower, ContextParallelAllGatherReplacesTheRing) {
  const ModelSpec m = gpt(1);
  ParallelPlan p = plan(1, false, Recompute::kNone);
  p.cp = 2;
  p.cp_comm = CpComm::kAllGather;
  const auto st = lower(m, p);
  EXPECT_NE(find_op(st[0].forward, "cp_kv_allgather"), nullptr);
  EXPECT_NE(find_op(st[0].backward, "cp_kv_allgather.bwd"), nullptr);
  EXPECT_EQ(find_op(st[0].forward, "cp_kv_ring"), nullptr);
}

// With dropout and the unfused attention of 2022 Megatron, the stored activations are exactly
// Korthikanti et al.'s eq. (1)-(2): s b h (34 + 5 a s / h) at tp = 1, and with tensor and
// sequence parallelism s b h (34 + 5 a s / h) / t. Selective recompute drops the 5as/h term:
// s b h 34 / t (their Table 2).
TEST(Lower, DropoutAndUnfusedAttentionGiveKorthikantiExactly) {
  ModelSpec m = gpt();
  m.dropout = 0.1;
  const double s = 2048, b = 2, h = 1024, a = 16;
  ParallelPlan p = plan(1, false, Recompute::kNone);
  p.attention = AttentionImpl::kUnfused;
  expect_rel(layer_activation_bytes(m, p, 0), s * b * h * (34 + 5 * a * s / h));
  p = plan(4, true, Recompute::kNone);
  p.attention = AttentionImpl::kUnfused;
  expect_rel(layer_activation_bytes(m, p, 0), s * b * h * (34 + 5 * a * s / h) / 4);
  p.recompute = Recompute::kSelective;
  expect_rel(layer_activation_bytes(m, p, 0), s * b * h * 34 / 4);
  const auto st = lower(m, p);
  EXPECT_NE(find_op(st[0].forward, "attn_dropout"), nullptr);
}

// Per-op selective checkpointing (TorchTitan's selective_ac_option = "op") on a GPT layer: the
// matmuls in forward order are q, k, v, out, up, down; the 1st, 3rd and 5th outputs (q, v, up:
// h + h + 4h) are saved, with the layer input and flash attention's output and statistics:
// s b h (2 + 2 * 6 + 2) + 4 a s b. k, out and down (h^2 + h^2 + 4 h^2 of weights) are recomputed,
// and every memory-bound op, but not attention.
TEST(Lower, SelectiveOpSavesEveryOtherMatmul) {
  const ModelSpec m = gpt();
  const ParallelPlan p = plan(1, false, Recompute::kSelectiveOp);
  const double s = 2048, b = 2, h = 1024, a = 16, l = 4;
  expect_rel(layer_activation_bytes(m, p, 0), s * b * h * 16 + 4 * a * s * b);

  const auto sac = lower(m, p);
  const auto none = lower(m, plan(1, false, Recompute::kNone));
  ASSERT_EQ(sac.size(), 1u);
  expect_rel(sac[0].backward.flops - none[0].backward.flops, 2 * s * b * l * 6 * h * h);
  EXPECT_EQ(find_op(sac[0].backward, "attention.recompute"), nullptr);
  EXPECT_EQ(find_op(sac[0].backward, "mlp_up.recompute"), nullptr);
  ASSERT_NE(find_op(sac[0].backward, "mlp_down.recompute"), nullptr);
  ASSERT_NE(find_op(sac[0].backward, "out_proj.recompute"), nullptr);
  ASSERT_NE(find_op(sac[0].backward, "gelu.recompute"), nullptr);
  const OpCost* qkv = find_op(sac[0].forward, "qkv_proj");
  const OpCost* qkv_re = find_op(sac[0].backward, "qkv_proj.recompute");
  ASSERT_NE(qkv_re, nullptr);
  expect_rel(qkv_re->flops, qkv->flops / 3);  // k of q, k, v

  // Hardware FLOPs add the recomputed matmuls: 2 B s l (6 h^2).
  const double bb = 8, v = 32000;
  expect_rel(step_flops(m, p, false, true),
             3 * (24 * bb * s * l * h * h + 4 * bb * s * s * l * h + 2 * bb * s * h * v) +
                 12 * bb * s * l * h * h);
}

// FlashAttention-2 runs at the profile's fa2 efficiencies where it gives them (Hopper), and as
// the default fused kernel where it does not.
TEST(Lower, FlashAttention2UsesItsOwnEfficiencies) {
  const ModelSpec m = gpt(1);
  ParallelPlan p = plan(1, false, Recompute::kNone);
  p.seq_len = 8192;  // compute-bound, so the time scales with the efficiency
  HwProfile hw = round_profile();
  auto attention_s = [&](const ParallelPlan& q, const char* op, bool bwd) {
    const auto st = lower_stages(m, q, hw, RankMap(q, hw.scale_up_domain));
    return find_op(bwd ? st[0].backward : st[0].forward, op)->time_s;
  };
  const double fwd = attention_s(p, "attention", false),
               bwd = attention_s(p, "attention.bwd", true);
  p.attention = AttentionImpl::kFlash2;
  EXPECT_DOUBLE_EQ(attention_s(p, "attention", false), fwd);
  hw.fa2_attention_fwd_efficiency = 0.25;  // half the default 0.5
  hw.fa2_attention_bwd_efficiency = 0.2;   // half of 0.4
  expect_rel(attention_s(p, "attention", false), 2 * fwd);
  expect_rel(attention_s(p, "attention.bwd", true), 2 * bwd);
  // Same stored activations as the default fused kernel.
  ParallelPlan flash = p;
  flash.attention = AttentionImpl::kFlash;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 0), layer_activation_bytes(m, flash, 0));
}

// TorchTitan repeats K and V to the query heads before SDPA: with grouped-query attention under
// flash2 the copy is an op (read the K, V heads, write the query heads' worth; backward the
// same bytes), context parallelism exchanges the repeated K, V, and they are what attention
// saves. Multi-head models and the other kernels have nothing to repeat.
TEST(Lower, Flash2RunsOnKAndVRepeatedToTheQueryHeads) {
  ModelSpec m = gpt(1);
  m.kv_heads = 4;  // 16 query heads of 64: groups of 4
  ParallelPlan p = plan(1, false, Recompute::kNone);
  HwProfile hw = round_profile();  // 1000 GB/s, no kernel overhead
  auto stages = [&](const ParallelPlan& q) {
    return lower_stages(m, q, hw, RankMap(q, hw.scale_up_domain));
  };
  const auto flash = stages(p);
  EXPECT_EQ(find_op(flash[0].forward, "repeat_kv"), nullptr);
  ParallelPlan f2 = p;
  f2.attention = AttentionImpl::kFlash2;
  const auto st = stages(f2);
  const OpCost* fwd = find_op(st[0].forward, "repeat_kv");
  const OpCost* bwd = find_op(st[0].backward, "repeat_kv.bwd");
  ASSERT_NE(fwd, nullptr);
  ASSERT_NE(bwd, nullptr);
  const double tokens = 2.0 * 2048, bytes = tokens * (4 + 16) * (64 + 64) * 2;
  expect_rel(fwd->time_s, bytes / 1e12);
  expect_rel(bwd->time_s, bytes / 1e12);
  // Stored: K and V at 16 heads instead of 4, 2 bytes each.
  expect_rel(layer_activation_bytes(m, f2, 0) - layer_activation_bytes(m, p, 0),
             tokens * (16 - 4) * (64 + 64) * 2);
  // Context parallelism all-gathers the repeated K, V: four times the bytes.
  f2.cp = p.cp = 2;
  f2.cp_comm = p.cp_comm = CpComm::kAllGather;
  const auto cp_f2 = stages(f2), cp_flash = stages(p);
  const OpCost* ag2 = find_op(cp_f2[0].forward, "cp_kv_allgather");
  const OpCost* ag = find_op(cp_flash[0].forward, "cp_kv_allgather");
  ASSERT_NE(ag2, nullptr);
  ASSERT_NE(ag, nullptr);
  expect_rel(ag2->busy_s, 4 * ag->busy_s);
  m.kv_heads = 16;
  const auto mha = stages(f2);
  EXPECT_EQ(find_op(mha[0].forward, "repeat_kv"), nullptr);
}

// PyTorch eager runs RMSNorm and rotary embeddings as chains of fp32 kernels and SwiGLU as two;
// fused, each is one kernel reading and writing its tensors once. Bytes per element (bf16):
// norm 36 forward, 84 backward (6 and 12 kernels); rope 20 and 20 (3 and 3); SwiGLU 10 and 18
// (2 and 3); fused norm 4 and 8, rope 4 and 8, SwiGLU 6 and 12.
TEST(Lower, EagerElementwiseOpsCostTheirKernelChains) {
  ModelSpec m = gpt(1);
  m.ffn_act = FfnAct::kSwiglu;
  ParallelPlan p = plan(1, false, Recompute::kNone);
  HwProfile hw = round_profile();  // 1000 GB/s at full efficiency
  hw.kernel_overhead_us = 1;
  auto op_s = [&](const ParallelPlan& q, const char* op, bool bwd) {
    const auto st = lower_stages(m, q, hw, RankMap(q, hw.scale_up_domain));
    const OpCost* o = find_op(bwd ? st[0].backward : st[0].forward, op);
    EXPECT_NE(o, nullptr) << op;
    return o ? o->time_s : 0.0;
  };
  const double tokens = 2.0 * 2048, h = 1024, rope = tokens * 2 * 16 * 64,
               ffn = tokens * static_cast<double>(m.ffn_hidden), us = 1e-6;
  auto at = [](double bytes) { return bytes / 1e12; };
  expect_rel(op_s(p, "input_norm", false), at(4 * tokens * h) + us);
  expect_rel(op_s(p, "input_norm.bwd", true), at(8 * tokens * h) + us);
  expect_rel(op_s(p, "rope", false), at(4 * rope) + us);
  expect_rel(op_s(p, "swiglu.bwd", true), at(12 * ffn) + us);
  p.eager = true;
  expect_rel(op_s(p, "input_norm", false), at(36 * tokens * h) + 6 * us);
  expect_rel(op_s(p, "input_norm.bwd", true), at(84 * tokens * h) + 12 * us);
  expect_rel(op_s(p, "post_attn_norm", false), at(36 * tokens * h) + 6 * us);
  expect_rel(op_s(p, "rope", false), at(20 * rope) + 3 * us);
  expect_rel(op_s(p, "rope.bwd", true), at(20 * rope) + 3 * us);
  expect_rel(op_s(p, "swiglu", false), at(10 * ffn) + 2 * us);
  expect_rel(op_s(p, "swiglu.bwd", true), at(18 * ffn) + 3 * us);
  // An fp32 plan has nothing to upcast: square, mean, scale, weight = 8 + 4 + 8 + 8 bytes.
  p.precision = Precision::kFp32;
  expect_rel(op_s(p, "input_norm", false), at(28 * tokens * h) + 4 * us);
  expect_rel(op_s(p, "rope", false), at(8 * rope) + us);
}

// The busiest expert-parallel rank sets an MoE layer's pace: an imbalance f multiplies its
// expert GEMMs' rows and the tokens it receives (capped at ep: every copy on one rank); even
// routing (1) and a dense layer are untouched, and an imbalance below 1 is refused.
TEST(Lower, MoeImbalanceScalesTheBusiestRanksExpertsAndExchange) {
  const ModelSpec m = moe();
  ParallelPlan p = plan(1, false, Recompute::kNone);
  p.dp = 4;
  p.ep = 4;
  p.seq_len = 8192;  // expert GEMMs large enough to be compute-bound
  auto op = [&](const ParallelPlan& q, const char* name) {
    const auto st = lower(m, q);
    const OpCost* o = find_op(st[0].forward, name);
    EXPECT_NE(o, nullptr) << name;
    return o ? *o : OpCost{};
  };
  const OpCost gemm = op(p, "experts_gate_up"), dispatch = op(p, "ep_dispatch");
  ParallelPlan skewed = p;
  skewed.moe_imbalance = 1.5;
  EXPECT_NEAR(op(skewed, "experts_gate_up").flops, 1.5 * gemm.flops, 1e-9 * gemm.flops);
  EXPECT_GT(op(skewed, "experts_gate_up").time_s, 1.4 * gemm.time_s);
  EXPECT_GT(op(skewed, "ep_dispatch").busy_s, dispatch.busy_s);
  EXPECT_DOUBLE_EQ(op(skewed, "router").time_s, op(p, "router").time_s);
  EXPECT_GT(layer_activation_bytes(m, skewed, 0), layer_activation_bytes(m, p, 0));
  skewed.moe_imbalance = 10;  // more than all on one of 4 ranks: capped at 4
  EXPECT_NEAR(op(skewed, "experts_gate_up").flops, 4 * gemm.flops, 1e-9 * gemm.flops);

  ModelSpec dense = gpt(1);
  ParallelPlan d = plan(1, false, Recompute::kNone);
  ParallelPlan d_skewed = d;
  d_skewed.moe_imbalance = 2;
  EXPECT_DOUBLE_EQ(lower(dense, d_skewed)[0].forward.time_s, lower(dense, d)[0].forward.time_s);

  const HwProfile hw = round_profile();
  p.moe_imbalance = 0.5;
  const Diagnostics bad = validate_plan(m, Cluster{hw, 4}, p);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].where, "--moe-imbalance");
  EXPECT_NE(bad[0].what.find("must be at least 1"), std::string::npos) << bad[0].what;
}

}  // namespace
}  // namespace parallax
