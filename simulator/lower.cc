#include "simulator/lower.h"

#include <algorithm>
#include <cmath>

#include "core/units.h"
#include "simulator/layer_builder.h"
#include "simulator/moe_layer.h"

namespace parallax {

const char* to_string(CostCategory c) {
  switch (c) {
    case CostCategory::kCompute:
      return "compute";
    case CostCategory::kTpComm:
      return "tp_comm";
    case CostCategory::kCpComm:
      return "cp_comm";
    case CostCategory::kEpComm:
      return "ep_comm";
    case CostCategory::kDpComm:
      return "dp_comm";
    case CostCategory::kPpComm:
      return "pp_comm";
    case CostCategory::kOptimizer:
      return "optimizer";
    case CostCategory::kBubble:
      return "bubble";
  }
  return "?";
}

void PassCost::add(OpCost op) {
  time_s += op.time_s;
  flops += op.flops;
  by_category[static_cast<int>(op.category)] += op.time_s;
  ops.push_back(std::move(op));
}

void PassCost::merge(const PassCost& other, bool keep_ops) {
  time_s += other.time_s;
  flops += other.flops;
  for (int c = 0; c < kNumCategories; ++c) by_category[c] += other.by_category[c];
  if (keep_ops) ops.insert(ops.end(), other.ops.begin(), other.ops.end());
}

namespace {

using lowering::act_bytes;
using lowering::attention_kv_heads;
using lowering::Dims;
using lowering::kFp32;
using lowering::LayerBuilder;
using lowering::rank_dims;

/// Bytes per element a linear layer keeps of its input for the weight gradient: the activation
/// element (act_bytes), or in a block-scaled recipe the column-wise quantized copy alone
/// (Transformer Engine's Linear: "Discard row-wise data since it is not needed in backward
/// pass", transformer_engine/pytorch/module/linear.py).
double gemm_input_bytes(const ModelSpec& m, const ParallelPlan& p, int layer) {
  if (is_block_scaled(p.precision) && !recipe_keeps_layer_in_bf16(p.precision, layer, m.layers))
    return operand_bytes(p.precision);
  return act_bytes(p);
}

/// One linear layer of a transformer layer as PyTorch runs it (one matmul), in forward order: the
/// lowered GEMM op it belongs to (q, k and v share qkv_proj; gate and up share mlp_gate_up), and
/// its rows, input and output features on one rank.
struct Linear {
  const char* op;
  double rows, k, width;
};

std::vector<Linear> layer_linears(const ModelSpec& m, const ParallelPlan& p, int layer) {
  const Dims d = rank_dims(m, p);
  const double t = d.tokens, h = d.h;
  std::vector<Linear> v;
  if (m.mla) {
    const MlaSpec& a = *m.mla;
    if (a.q_lora_rank > 0) {
      v.push_back({"q_down", t, h, static_cast<double>(a.q_lora_rank)});
      v.push_back({"q_up", t, static_cast<double>(a.q_lora_rank), d.q_heads * d.d_qk});
    } else {
      v.push_back({"q_proj", t, h, d.q_heads * d.d_qk});
    }
    v.push_back({"kv_down", t, h, static_cast<double>(a.kv_lora_rank + a.qk_rope_head_dim)});
    v.push_back({"kv_up", t, static_cast<double>(a.kv_lora_rank),
                 d.q_heads * (a.qk_nope_head_dim + a.v_head_dim)});
  } else {
    v.push_back({"qkv_proj", t, h, d.q_heads * d.d_qk});
    v.push_back({"qkv_proj", t, h, d.kv_heads * d.d_qk});
    v.push_back({"qkv_proj", t, h, d.kv_heads * d.d_v});
  }
  v.push_back({"out_proj", t, d.q_heads * d.d_v, h});
  const bool glu = m.ffn_act == FfnAct::kSwiglu;
  auto mlp = [&](const char* up, const char* down, double rows, double w) {
    for (int i = 0; i < (glu ? 2 : 1); ++i) v.push_back({up, rows, h, w});
    v.push_back({down, rows, w, h});
  };
  if (m.is_moe_layer(layer)) {
    const MoeSpec& e = *m.moe;
    v.push_back({"router", t / p.tp, h, static_cast<double>(e.experts)});
    mlp(glu ? "experts_gate_up" : "experts_up", "experts_down", routed_rows(m, p, t),
        static_cast<double>(e.expert_ffn_hidden) / p.etp);
    if (e.shared_experts > 0)
      mlp("shared_gate_up", "shared_down", t,
          static_cast<double>(e.shared_experts) * e.expert_ffn_hidden / p.tp);
  } else {
    mlp(glu ? "mlp_gate_up" : "mlp_up", "mlp_down", t, static_cast<double>(m.ffn_hidden) / p.tp);
  }
  return v;
}

/// Per-op selective checkpointing (TorchTitan's `selective_ac_option = "op"`): counting a layer's
/// matmuls in forward order, the 1st, 3rd, ... outputs are saved and the 2nd, 4th, ... recomputed.
/// The share of each lowered GEMM op's forward that backward recomputes.
std::vector<std::pair<std::string, double>> op_sac_recompute_share(
    const std::vector<Linear>& linears) {
  std::vector<std::pair<std::string, double>> share;  // op -> (recomputed, then share)
  std::vector<double> total;
  for (size_t i = 0; i < linears.size(); ++i) {
    const Linear& l = linears[i];
    auto it =
        std::find_if(share.begin(), share.end(), [&](const auto& s) { return s.first == l.op; });
    if (it == share.end()) {
      share.emplace_back(l.op, 0.0);
      total.push_back(0.0);
      it = share.end() - 1;
    }
    const double size = l.rows * l.k * l.width;
    total[static_cast<size_t>(it - share.begin())] += size;
    if (i % 2 == 1) it->second += size;
  }
  for (size_t i = 0; i < share.size(); ++i) share[i].second /= total[i] > 0 ? total[i] : 1.0;
  return share;
}

/// Attention parameters one TP rank holds: head-split projections divided by tp; MLA's down
/// projections and their norms, and KV heads when tp exceeds kv_heads, are replicated.
double attention_params_local(const ModelSpec& m, int tp) {
  const double h = static_cast<double>(m.hidden);
  if (m.mla) {
    const MlaSpec& a = *m.mla;
    const double qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
    const double replicated = (a.q_lora_rank > 0 ? h * a.q_lora_rank + a.q_lora_rank : 0.0) +
                              h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank;
    const double split = (a.q_lora_rank > 0 ? a.q_lora_rank : h) * m.heads * qk +
                         a.kv_lora_rank * m.heads * (a.qk_nope_head_dim + a.v_head_dim) +
                         static_cast<double>(m.heads) * a.v_head_dim * h;
    return replicated + split / tp;
  }
  const double kv_per_rank = std::max(1.0, static_cast<double>(m.kv_heads) / tp);
  return 2.0 * h * m.heads * m.head_dim / tp + 2.0 * h * m.head_dim * kv_per_rank;
}

double dense_layer_params_local(const ModelSpec& m, const ParallelPlan& p, int layer) {
  const double h = static_cast<double>(m.hidden);
  double attn = attention_params_local(m, p.tp);
  double mlp = 0;
  if (m.is_moe_layer(layer)) {
    mlp =
        m.moe->shared_experts * mlp_params(m, m.moe->expert_ffn_hidden) / p.tp + m.moe->experts * h;
  } else {
    mlp = mlp_params(m, m.ffn_hidden) / p.tp;
  }
  return attn + mlp + 2 * h;
}

double expert_params_local(const ModelSpec& m, const ParallelPlan& p, int layer) {
  if (!m.is_moe_layer(layer)) return 0;
  return static_cast<double>(m.moe->experts) / p.ep * mlp_params(m, m.moe->expert_ffn_hidden) /
         p.etp;
}

}  // namespace

double layer_activation_bytes(const ModelSpec& m, const ParallelPlan& p, int layer) {
  const Dims d = rank_dims(m, p);
  const double t = d.tokens, tsp = d.tokens_sp, h = d.h;
  if (p.recompute == Recompute::kFull) return tsp * h * act_bytes(p);  // only the layer input
  const double qh = d.q_heads, kvh = attention_kv_heads(d, p), dqk = d.d_qk, dv = d.d_v;
  const bool fused = p.attention != AttentionImpl::kUnfused;
  if (p.recompute == Recompute::kSelectiveOp) {
    // The layer input, the saved matmul outputs, and fused attention's output and statistics.
    const std::vector<Linear> lin = layer_linears(m, p, layer);
    double bytes = tsp * h * act_bytes(p);
    for (size_t i = 0; i < lin.size(); i += 2) bytes += lin[i].rows * lin[i].width * act_bytes(p);
    if (fused) bytes += t * qh * dv * act_bytes(p) + t * qh * kFp32;
    return bytes;
  }
  // Attention block: norm input and output (sharded with SP), Q, K, V, the attention output
  // (the out-projection input), and the softmax statistics (flash: fp32 per head and token) or
  // the s x s probabilities (unfused: bf16, Korthikanti's 2as/h term; with dropout also its
  // 1-byte mask and the dropped-out probabilities, 5as/h in all). Dropout adds a 1-byte mask
  // after each block (bias-dropout-add), sharded like the residual. In a block-scaled recipe
  // the linear layers keep their inputs as quantized copies (gemm_input_bytes): the norm
  // outputs and MLP down-projection inputs take them instead of bf16, and the out-projection
  // keeps one beside the bf16 attention output the attention backward reads.
  const bool selective = p.recompute == Recompute::kSelective;
  const double drop = m.dropout > 0 ? 1.0 : 0.0;
  const double gin = gemm_input_bytes(m, p, layer);
  const double out_copy = gin != act_bytes(p) ? gin : 0.0;
  // The attention output is the out-projection's input and stays stored under selective
  // recompute too (Korthikanti et al.: SP + selective = 34 sbh / t).
  double attn = tsp * h * (act_bytes(p) + gin) + t * (qh * dqk + kvh * (dqk + dv)) * act_bytes(p) +
                drop * tsp * h + t * qh * dv * (act_bytes(p) + out_copy);
  if (fused) {
    attn += t * qh * kFp32;
  } else if (!selective) {
    attn += (act_bytes(p) + drop * (1 + act_bytes(p))) * qh * t * static_cast<double>(p.seq_len);
  }
  if (m.mla) attn += t * (m.mla->q_lora_rank + m.mla->kv_lora_rank) * act_bytes(p);
  const bool glu = m.ffn_act == FfnAct::kSwiglu;
  // Per element of an MLP's width: the up (and gate) outputs the activation's backward reads,
  // and the down projection's input.
  const double inner = (glu ? 2 : 1) * act_bytes(p) + gin;
  double mlp = tsp * h * (act_bytes(p) + gin) + drop * tsp * h;  // norm in and out, dropout mask
  if (m.is_moe_layer(layer)) {
    const MoeSpec& e = *m.moe;
    const double rows = routed_rows(m, p, t);
    const double w = static_cast<double>(e.expert_ffn_hidden) / p.etp;
    mlp += rows * h * gin + rows * w * inner + t / p.tp * e.experts * kFp32;
    if (e.shared_experts > 0) mlp += t * e.shared_experts * e.expert_ffn_hidden / p.tp * inner;
  } else {
    mlp += t * static_cast<double>(m.ffn_hidden) / p.tp * inner;
  }
  return attn + mlp;
}

namespace {

/// Backward = recompute, then input gradients, then weight gradients (all on one stream); the
/// zero-bubble split keeps recompute with the input gradients.
void assemble_backward(const PassCost& recompute, const PassCost& bwd_in, const PassCost& bwd_w,
                       bool keep_ops, StageCost* s) {
  for (const PassCost* part : {&recompute, &bwd_in}) {
    s->backward.merge(*part, keep_ops);
    s->backward_input.merge(*part, keep_ops);
  }
  s->backward.merge(bwd_w, keep_ops);
  s->backward_weight.merge(bwd_w, keep_ops);
}

/// Working memory of one layer's backward beyond its stored activations: the gradients of the
/// MLP intermediates (gate and up, or up, and the activation), alive while that MLP runs backward.
double backward_workspace_bytes(const ModelSpec& m, const ParallelPlan& p, int layer) {
  const double t = rank_dims(m, p).tokens;
  const double mats = m.ffn_act == FfnAct::kSwiglu ? 3 : 2;
  if (m.is_moe_layer(layer)) {
    const double rows = routed_rows(m, p, t);
    return rows * static_cast<double>(m.moe->expert_ffn_hidden) / p.etp * mats * act_bytes(p);
  }
  return t * static_cast<double>(m.ffn_hidden) / p.tp * mats * act_bytes(p);
}

/// One transformer layer of one kind (dense or MoE), lowered once and reused for every layer of
/// that kind: layers of a kind are identical on a rank.
struct LayerPasses {
  bool built = false;
  PassCost forward, bwd_in, bwd_w, recompute;
  double dense_params = 0, expert_params = 0, act_bytes = 0, weight_input_bytes = 0;
  double working_bytes = 0;  ///< backward workspace, plus rematerialised activations (full)
};

/// Kinds of layer a rank lowers: dense or MoE, each in the plan's precision or in the bf16 its
/// recipe keeps at the model's ends.
constexpr int kLayerKinds = 4;

const LayerPasses& layer_passes(const ModelSpec& m, const ParallelPlan& p, LayerBuilder& b,
                                int layer, LayerPasses kinds[kLayerKinds]) {
  const bool bf16 = recipe_keeps_layer_in_bf16(p.precision, layer, m.layers);
  LayerPasses& lp = kinds[(m.is_moe_layer(layer) ? 1 : 0) + (bf16 ? 2 : 0)];
  if (lp.built) return lp;
  lp.built = true;
  b.set_layer_precision(bf16 ? Precision::kBf16 : p.precision);
  lp.dense_params = dense_layer_params_local(m, p, layer);
  lp.expert_params = expert_params_local(m, p, layer);
  b.fsdp_layer(lp.dense_params + lp.expert_params);
  b.attention_block();
  if (m.is_moe_layer(layer))
    b.moe_mlp();
  else
    b.dense_mlp(m.ffn_hidden);
  b.flush_layer(&lp.forward, &lp.bwd_in, &lp.bwd_w, &lp.recompute, p.recompute,
                p.recompute == Recompute::kSelectiveOp
                    ? op_sac_recompute_share(layer_linears(m, p, layer))
                    : std::vector<std::pair<std::string, double>>{});
  lp.act_bytes = layer_activation_bytes(m, p, layer);
  lp.weight_input_bytes = layer_weight_input_bytes(m, p, layer);
  ParallelPlan none = p;
  none.recompute = Recompute::kNone;
  // Full and selective-op recompute rematerialise one layer's dropped activations at a time.
  const bool remats = p.recompute == Recompute::kFull || p.recompute == Recompute::kSelectiveOp;
  const double remat = remats ? layer_activation_bytes(m, none, layer) - lp.act_bytes : 0;
  lp.working_bytes = remat + backward_workspace_bytes(m, p, layer);
  return lp;
}

/// The transformer layers of one virtual stage; returns the largest working memory one layer
/// needs at a time: its backward workspace, plus, under full recompute, the activations it
/// rematerialises.
double lower_layers(const ModelSpec& m, const ParallelPlan& p, LayerBuilder& b,
                    LayerPasses kinds[kLayerKinds], bool keep_ops, StageCost* s,
                    PassCost* recompute, PassCost* bwd_in, PassCost* bwd_w) {
  double max_layer_act = 0;
  for (int l = s->first_layer; l < s->first_layer + s->layers; ++l) {
    const LayerPasses& lp = layer_passes(m, p, b, l, kinds);
    s->forward.merge(lp.forward, keep_ops);
    bwd_in->merge(lp.bwd_in, keep_ops);
    bwd_w->merge(lp.bwd_w, keep_ops);
    recompute->merge(lp.recompute, keep_ops);
    s->dense_params += lp.dense_params;
    s->expert_params += lp.expert_params;
    s->act_bytes_per_microbatch += lp.act_bytes;
    s->weight_input_bytes_per_microbatch += lp.weight_input_bytes;
    max_layer_act = std::max(max_layer_act, lp.working_bytes);
  }
  return max_layer_act;
}

/// Parameters one rank holds of a multi-token-prediction module, besides the shared embedding
/// and head: the two input norms, the replicated [2h -> h] projection, the block's dense part
/// and the module's final norm (its experts go with expert_params_local).
double mtp_dense_params_local(const ModelSpec& m, const ParallelPlan& p) {
  const double h = static_cast<double>(m.hidden);
  return 2 * h + 2 * h * h + dense_layer_params_local(m, p, m.layers) + h;
}

/// The multi-token-prediction modules on the last stage, after the output layer: each runs its
/// input, a transformer block of the last layer's kind and the shared output layer and loss.
void lower_mtp(const ModelSpec& m, const ParallelPlan& p, LayerBuilder& b,
               LayerPasses kinds[kLayerKinds], bool keep_ops, StageCost* s, PassCost* recompute,
               PassCost* bwd_in, PassCost* bwd_w) {
  const Dims& d = b.dims();
  const double a = act_bytes(p);
  for (int k = 0; k < m.mtp_layers; ++k) {
    b.mtp_input();
    b.flush_layer(&s->forward, bwd_in, bwd_w, nullptr, Recompute::kNone);
    const LayerPasses& lp = layer_passes(m, p, b, m.layers, kinds);
    s->forward.merge(lp.forward, keep_ops);
    bwd_in->merge(lp.bwd_in, keep_ops);
    bwd_w->merge(lp.bwd_w, keep_ops);
    recompute->merge(lp.recompute, keep_ops);
    b.output_layer();
    b.flush_layer(&s->forward, bwd_in, bwd_w, nullptr, Recompute::kNone);
    s->dense_params += mtp_dense_params_local(m, p);
    s->expert_params += lp.expert_params;
    // The block's activations, the projection's input [2h], the head's input.
    const double stored = lp.act_bytes + 3 * d.tokens_sp * d.h * a;
    s->act_bytes_per_microbatch += stored;
    s->weight_input_bytes_per_microbatch += lp.weight_input_bytes + 3 * d.tokens_sp * d.h * a;
    s->transient_bytes = std::max(s->transient_bytes, lp.working_bytes);
  }
  // The modules embed with the model's table: the last stage holds a copy when the pipeline
  // splits it from the first (a tied one is already there).
  if (m.mtp_layers > 0 && p.pp * p.vpp > 1 && !m.tied_embeddings)
    s->dense_params += static_cast<double>(m.vocab) / p.tp * static_cast<double>(m.hidden);
}

}  // namespace

double layer_weight_input_bytes(const ModelSpec& m, const ParallelPlan& p, int layer) {
  if (p.recompute == Recompute::kFull) return layer_activation_bytes(m, p, layer);
  const Dims d = rank_dims(m, p);
  const double t = d.tokens, h = d.h;
  const double gin = gemm_input_bytes(m, p, layer);
  double bytes = 2 * d.tokens_sp * h * gin + t * d.q_heads * d.d_v * gin;  // norm outs, attn out
  if (m.mla) bytes += t * (m.mla->q_lora_rank + m.mla->kv_lora_rank) * act_bytes(p);
  if (m.is_moe_layer(layer)) {
    const double rows = routed_rows(m, p, t);
    bytes += rows * h * gin + rows * static_cast<double>(m.moe->expert_ffn_hidden) / p.etp * gin;
  } else {
    bytes += t * static_cast<double>(m.ffn_hidden) / p.tp * gin;
  }
  return bytes;
}

std::vector<StageCost> lower_stages(const ModelSpec& m, const ParallelPlan& p, const HwProfile& hw,
                                    const RankMap& ranks, bool keep_ops, TableUse* use) {
  const int stages = p.pp * p.vpp;
  std::vector<StageCost> out(stages);
  LayerBuilder b(m, p, hw, ranks, use);
  const Dims& d = b.dims();
  const double h = static_cast<double>(m.hidden);
  const double vocab_shard = static_cast<double>(m.vocab) / p.tp;
  LayerPasses kinds[kLayerKinds];
  for (int vs = 0; vs < stages; ++vs) {
    StageCost& s = out[vs];
    s.virtual_stage = vs;
    s.first_layer = first_layer_of_virtual_stage(m, p, vs);
    s.layers = layers_in_virtual_stage(m, p, vs);
    s.has_embedding = vs == 0;
    s.has_output = vs == stages - 1;
    PassCost recompute, bwd_in, bwd_w;
    if (s.has_embedding) {
      b.embedding();
      b.flush_layer(&s.forward, &bwd_in, &bwd_w, nullptr, Recompute::kNone);
      s.dense_params += vocab_shard * h;
    }
    // Full recompute rematerialises one layer's activations at a time during backward.
    s.transient_bytes = lower_layers(m, p, b, kinds, keep_ops, &s, &recompute, &bwd_in, &bwd_w);
    if (p.attention == AttentionImpl::kUnfused && s.layers > 0) {
      // One layer's scores and probabilities exist at once while it runs.
      const double probs = act_bytes(p) * d.q_heads * d.tokens * static_cast<double>(p.seq_len);
      s.transient_bytes = std::max(s.transient_bytes, 2 * probs);
    }
    if (s.has_output) {
      b.output_layer();
      b.flush_layer(&s.forward, &bwd_in, &bwd_w, nullptr, Recompute::kNone);
      s.dense_params += h;  // final norm
      // A tied embedding is replicated on the last stage when the pipeline splits them.
      if (!m.tied_embeddings || stages > 1) s.dense_params += vocab_shard * h;
      // Logits in bf16 and fp32 softmax workspace for one microbatch.
      s.transient_bytes =
          std::max(s.transient_bytes, d.tokens * vocab_shard * (act_bytes(p) + 2 * kFp32));
      s.act_bytes_per_microbatch += d.tokens_sp * h * act_bytes(p);  // the logits GEMM's input
      s.weight_input_bytes_per_microbatch += d.tokens_sp * h * act_bytes(p);
      lower_mtp(m, p, b, kinds, keep_ops, &s, &recompute, &bwd_in, &bwd_w);
    }
    assemble_backward(recompute, bwd_in, bwd_w, keep_ops, &s);
    s.p2p_bytes = d.tokens * h * act_bytes(p) / (p.sequence_parallel ? p.tp : 1);
  }
  return out;
}

double step_flops(const ModelSpec& m, const ParallelPlan& p, bool causal, bool with_recompute) {
  const double tokens = static_cast<double>(p.global_batch) * p.seq_len;
  const double h = static_cast<double>(m.hidden);
  const double s = static_cast<double>(p.seq_len);
  const Dims d = rank_dims(m, p);
  const double dqk = d.d_qk, dv = d.d_v;
  double layer_fwd = 0, attn_fwd = 0;  // per token, all layers
  // The multi-token-prediction modules' blocks run after the last layer (index layers + k).
  for (int l = 0; l < m.layers + m.mtp_layers; ++l) {
    double matmul = attention_params_per_layer(m);
    if (m.is_moe_layer(l)) {
      matmul += (m.moe->top_k + m.moe->shared_experts) * mlp_params(m, m.moe->expert_ffn_hidden) +
                m.moe->experts * h;
    } else {
      matmul += mlp_params(m, m.ffn_hidden);
    }
    layer_fwd += 2 * matmul;
    attn_fwd += 2 * s * (dqk + dv) * m.heads * (causal ? 0.5 : 1.0);
  }
  // The head runs once more per prediction depth, after each module's [2h -> h] projection.
  const double logits_fwd =
      (1 + m.mtp_layers) * 2 * h * static_cast<double>(m.vocab) + m.mtp_layers * 2 * (2 * h * h);
  double total = 3 * (layer_fwd + attn_fwd + logits_fwd);
  if (with_recompute && p.recompute == Recompute::kFull) total += layer_fwd + attn_fwd;
  if (with_recompute && p.recompute == Recompute::kSelective) total += attn_fwd;
  if (with_recompute && p.recompute == Recompute::kSelectiveOp) {
    // The recomputed matmuls of one sequence on one unsharded rank, per token.
    ParallelPlan one = p;
    one.tp = one.cp = one.etp = one.micro_batch = 1;
    for (int l = 0; l < m.layers; ++l) {
      const std::vector<Linear> lin = layer_linears(m, one, l);
      for (size_t i = 1; i < lin.size(); i += 2)
        total += 2 * lin[i].rows * lin[i].k * lin[i].width / s;
    }
  }
  return total * tokens;
}

}  // namespace parallax
