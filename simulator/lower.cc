#include "simulator/lower.h"

#include <algorithm>
#include <cmath>

#include "core/units.h"

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

/// Bytes of one activation (and gathered parameter, and p2p) element: bf16, which fp8
/// recipes keep for activations too, or 4 in an fp32 plan.
double act_bytes(const ParallelPlan& p) {
  return p.precision == Precision::kFp32 ? kFp32Bytes : kBf16Bytes;
}
constexpr double kFp32 = kFp32Bytes;

/// Bytes per element a linear layer keeps of its input for the weight gradient: the activation
/// element (act_bytes), or in a block-scaled recipe the column-wise quantized copy alone
/// (Transformer Engine's Linear: "Discard row-wise data since it is not needed in backward
/// pass", transformer_engine/pytorch/module/linear.py).
double gemm_input_bytes(const ModelSpec& m, const ParallelPlan& p, int layer) {
  if (is_block_scaled(p.precision) && !recipe_keeps_layer_in_bf16(p.precision, layer, m.layers))
    return operand_bytes(p.precision);
  return act_bytes(p);
}

/// Sizes one rank sees for one microbatch.
struct Dims {
  double tokens = 0;     ///< t = mbs * seq / cp
  double tokens_sp = 0;  ///< t / tp with sequence parallelism, else t
  double h = 0;
  int tp = 1;
  double q_heads = 0;   ///< query heads on this rank
  double kv_heads = 0;  ///< KV heads on this rank (replicated when tp > kv_heads)
  double d_qk = 0, d_v = 0;
};

/// The one derivation of the per-rank sizes that lowering and the memory formulas share.
Dims rank_dims(const ModelSpec& m, const ParallelPlan& p) {
  Dims d;
  d.tp = p.tp;
  d.tokens = static_cast<double>(p.micro_batch) * p.seq_len / p.cp;
  d.tokens_sp = p.sequence_parallel ? d.tokens / p.tp : d.tokens;
  d.h = static_cast<double>(m.hidden);
  d.q_heads = static_cast<double>(m.heads) / p.tp;
  d.kv_heads = m.mla ? d.q_heads : std::max(1.0, static_cast<double>(m.kv_heads) / p.tp);
  d.d_qk = m.mla ? m.mla->qk_nope_head_dim + m.mla->qk_rope_head_dim : m.head_dim;
  d.d_v = m.mla ? m.mla->v_head_dim : m.head_dim;
  return d;
}

/// The K and V heads attention runs on: TorchTitan (AttentionImpl::kFlash2, PyTorch's SDPA)
/// repeats K and V to the query heads before the call, so its attention inputs, the K and V that
/// context parallelism exchanges and what SDPA saves for backward have the query heads.
double attention_kv_heads(const Dims& d, const ParallelPlan& p) {
  return p.attention == AttentionImpl::kFlash2 ? std::max(d.kv_heads, d.q_heads) : d.kv_heads;
}

/// Routed token copies the busiest expert-parallel rank's experts run on in one MoE layer, out of
/// `tokens` (before the tensor-parallel split): its share of tokens / tp * top_k, gathered over
/// the expert-tensor-parallel ranks, times the plan's imbalance (at most ep: every copy on one
/// rank).
double routed_rows(const ModelSpec& m, const ParallelPlan& p, double tokens) {
  const double imbalance = std::clamp(p.moe_imbalance, 1.0, static_cast<double>(p.ep));
  return tokens / p.tp * m.moe->top_k * p.etp * imbalance;
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

/// The ops of one pass, built op by op; backward mirrors forward.
class LayerBuilder {
 public:
  LayerBuilder(const ModelSpec& m, const ParallelPlan& p, const HwProfile& hw, const RankMap& ranks,
               TableUse* use)
      : m_(m),
        p_(p),
        compute_(hw, use),
        comm_(hw, use),
        tp_shape_(ranks.shape(GroupKind::kTp)),
        cp_shape_(ranks.shape(GroupKind::kCp)),
        ep_shape_(ranks.shape(GroupKind::kEp)),
        etp_shape_(ranks.shape(GroupKind::kEtp)),
        fsdp_shape_(ranks.shape(GroupKind::kDpCp)),
        d_(rank_dims(m, p)),
        act_(act_bytes(p)),
        microbatches_(std::max<int64_t>(1, p.num_microbatches())),
        linear_(p.precision) {}

  const Dims& dims() const { return d_; }

  // --- primitives -------------------------------------------------------------------------------
  /// A GEMM [m x k] x [k x n]; in backward, the data-gradient and weight-gradient GEMMs (the
  /// latter is W in zero-bubble schedules). `kind`: a linear layer (in the layer's recipe: fp8,
  /// MXFP8 or NVFP4 when the plan is, see set_layer_precision), a bf16-only linear layer (logits,
  /// router: the recipes keep them in bf16), or attention's batched GEMMs (bf16, and both backward
  /// GEMMs are input gradients).
  enum class GemmKind { kLinear, kLinearBf16, kAttention };

  /// The precision of the linear layers lowered next: the plan's, or bf16 for a layer its
  /// recipe keeps in higher precision (recipe_keeps_layer_in_bf16).
  void set_layer_precision(Precision p) { linear_ = p; }

  void gemm(const char* name, double m, double k, double n, double batch = 1,
            GemmKind kind = GemmKind::kLinear) {
    GemmShape fwd{ll(m), ll(n), ll(k), ll(batch)};
    GemmShape dgrad{ll(m), ll(k), ll(n), ll(batch)};
    GemmShape wgrad{ll(k), ll(n), ll(m), ll(batch)};
    const bool quantized =
        kind == GemmKind::kLinear && (linear_ == Precision::kFp8 || is_block_scaled(linear_));
    const Precision prec = quantized                          ? linear_
                           : p_.precision == Precision::kFp32 ? Precision::kFp32
                                                              : Precision::kBf16;
    KernelTime f = compute_.gemm(fwd, prec), dg = compute_.gemm(dgrad, prec),
               wg = compute_.gemm(wgrad, prec);
    if (quantized) {
      auto casts = [&](GemmPass pass) {
        return prec == Precision::kFp8
                   ? compute_.fp8_casts(fwd, pass, microbatches_).time_s
                   : compute_.block_scaled_casts(fwd, pass, microbatches_, prec).time_s;
      };
      f.time_s += casts(GemmPass::kForward);
      dg.time_s += casts(GemmPass::kDataGradient);
      wg.time_s += casts(GemmPass::kWeightGradient);
    }
    fwd_.push_back(compute_op(name, f));
    bwd_in_.push_back(compute_op(std::string(name) + ".dgrad", dg));
    (kind == GemmKind::kAttention ? bwd_in_ : bwd_w_)
        .push_back(compute_op(std::string(name) + ".wgrad", wg));
    last_gemm_fwd_s_ = f.time_s;
    last_gemm_bwd_s_ = dg.time_s;
    last_gemm_wgrad_s_ = wg.time_s;
  }

  /// fp8 recipes keep attention in bf16; an fp32 plan runs it in fp32.
  Precision attention_precision() const {
    return p_.precision == Precision::kFp32 ? Precision::kFp32 : Precision::kBf16;
  }

  void memory(const char* name, double bytes_fwd, double bwd_factor = 2.0) {
    fwd_.push_back(compute_op(name, compute_.memory_bound(bytes_fwd)));
    bwd_in_.push_back(
        compute_op(std::string(name) + ".bwd", compute_.memory_bound(bytes_fwd * bwd_factor)));
  }

  /// An op PyTorch eager runs as a chain of memory-bound kernels over `elems` elements: the bytes
  /// per element of each forward kernel and of each kernel its autograd runs in backward.
  void eager_kernels(const char* name, double elems, const std::vector<double>& fwd_bytes,
                     const std::vector<double>& bwd_bytes) {
    auto chain = [&](const std::vector<double>& bytes) {
      KernelTime t;
      for (const double b : bytes) {
        const KernelTime k = compute_.memory_bound(b * elems);
        t.time_s += k.time_s;
        t.bytes += k.bytes;
      }
      return t;
    };
    fwd_.push_back(compute_op(name, chain(fwd_bytes)));
    bwd_in_.push_back(compute_op(std::string(name) + ".bwd", chain(bwd_bytes)));
  }

  /// RMSNorm over rows x width. Fused: the kernel reads and writes the activation; backward reads
  /// it and the gradient and writes the input gradient (twice the bytes). Eager: torch.nn.RMSNorm
  /// is ATen's composite rms_norm, one kernel per op: cast to fp32 (a + 4 bytes per element for
  /// activations of a bytes), square (4 + 4), mean (4), scale by the reciprocal root (4 + 4),
  /// cast back (4 + a), times the weight (2a): 36 bytes in bf16. Its autograd replays each op's
  /// backward: the weight product (2a) and the weight gradient (product 3a, sum a), the casts
  /// (a + 4, 4 + a), the scale's two gradients (4 + 4; product 12, sum 4), the mean's (4), the
  /// square's (8 + 12) and the sum of the two paths into the input (12): 84 bytes in bf16. An
  /// fp32 plan has no casts.
  void norm(const char* name, double rows, double width) {
    const double a = act_, elems = rows * width;
    if (!p_.eager) {
      memory(name, 2 * elems * a);
      return;
    }
    const bool casts = a < kFp32;
    std::vector<double> f = {8, 4, 8, 2 * a}, b = {2 * a, 3 * a, a, 8, 12, 4, 4, 8, 12, 12};
    if (casts) {
      f.insert(f.end(), {a + kFp32, kFp32 + a});
      b.insert(b.end(), {a + kFp32, kFp32 + a});
    }
    eager_kernels(name, elems, f, b);
  }

  /// Rotary embeddings on this rank's query and key heads. Fused: read and write each element.
  /// Eager (TorchTitan's apply_rotary_emb): cast to fp32 (a + 4), complex product with the
  /// frequencies (4 + 4), cast back (4 + a), and the same three in backward.
  void rope(double elems) {
    if (!p_.eager) {
      memory("rope", 2 * elems * act_);
      return;
    }
    const double a = act_;
    const std::vector<double> k =
        a < kFp32 ? std::vector<double>{a + kFp32, 8, kFp32 + a} : std::vector<double>{8};
    eager_kernels("rope", elems, k, k);
  }

  /// The MLP activation over rows x width (width: the up projection's output per branch). Fused
  /// SwiGLU reads gate and up and writes their product (3a; backward twice that); GELU reads and
  /// writes (2a). Eager SwiGLU (silu(gate) * up): silu (2a) and the product (3a); backward the
  /// product's two gradients (3a each) and silu's (3a). Eager GELU: 2a, backward 3a.
  void activation(const char* name, double elems, bool glu) {
    const double a = act_;
    if (!p_.eager) {
      memory(name, elems * (glu ? 3 : 2) * a);
      return;
    }
    if (glu)
      eager_kernels(name, elems, {2 * a, 3 * a}, {3 * a, 3 * a, 3 * a});
    else
      eager_kernels(name, elems, {2 * a}, {3 * a});
  }

  void attention() {
    const double bh = static_cast<double>(p_.micro_batch) * d_.q_heads;
    const int64_t sq = p_.seq_len / p_.cp, skv = p_.seq_len;
    const size_t fwd_before = fwd_.size(), bwd_before = bwd_in_.size();
    if (p_.attention != AttentionImpl::kUnfused) {
      // Load-balanced context parallelism: of a rank's cp calls of equal work, the one on its own
      // chunks is masked, the others (against earlier chunks) are not.
      const double masked = 1.0 / p_.cp;
      const KernelTime f = compute_.attention(ll(bh), sq, skv, ll(d_.d_qk), ll(d_.d_v), true, false,
                                              attention_precision(), p_.attention, masked);
      const KernelTime b = compute_.attention(ll(bh), sq, skv, ll(d_.d_qk), ll(d_.d_v), true, true,
                                              attention_precision(), p_.attention, masked);
      fwd_.push_back(compute_op("attention", f));
      bwd_in_.push_back(compute_op("attention.bwd", b));
    } else {
      // Unfused: scores = Q K^T over the whole s x s (the causal mask is applied, not skipped),
      // softmax reads the bf16 scores and writes the probabilities, context = P V. Backward
      // reads the probabilities and their gradient and writes the score gradient.
      gemm("attn_scores", static_cast<double>(sq), d_.d_qk, static_cast<double>(skv), bh,
           GemmKind::kAttention);
      memory("attn_softmax", 2 * act_ * bh * sq * skv, 1.5);
      // Dropout on the probabilities: read them, write the result and a 1-byte mask.
      if (m_.dropout > 0) memory("attn_dropout", (2 * act_ + 1) * bh * sq * skv, 1.0);
      gemm("attn_context", static_cast<double>(sq), static_cast<double>(skv), d_.d_v, bh,
           GemmKind::kAttention);
    }
    core_fwd_.assign(fwd_.begin() + fwd_before, fwd_.end());
    double f_s = 0, b_s = 0;
    for (size_t i = fwd_before; i < fwd_.size(); ++i) f_s += fwd_[i].time_s;
    for (size_t i = bwd_before; i < bwd_in_.size(); ++i) b_s += bwd_in_[i].time_s;
    if (p_.cp > 1) context_parallel_exchange(f_s, b_s);
  }

  /// K and V of the whole sequence reach every context-parallel rank.
  void context_parallel_exchange(double attn_fwd_s, double attn_bwd_s) {
    const double kv_bytes = d_.tokens * attention_kv_heads(d_, p_) * (d_.d_qk + d_.d_v) * act_;
    if (p_.cp_comm == CpComm::kRing) {
      // cp-1 exchanges of the local K,V chunk, each hidden behind one chunk of attention;
      // backward also returns dK, dV (twice the bytes).
      const double step =
          comm_.time(CollectiveOp::kSendRecv, kv_bytes, neighbour_pair(cp_shape_)).time_s;
      const double f_hide = attn_fwd_s / p_.cp, b_hide = attn_bwd_s / p_.cp;
      push_comm(&fwd_, "cp_kv_ring", CostCategory::kCpComm, (p_.cp - 1) * step,
                (p_.cp - 1) * hidden(step, f_hide));
      push_comm(&bwd_in_, "cp_kv_ring.bwd", CostCategory::kCpComm, 2 * (p_.cp - 1) * step,
                (p_.cp - 1) * hidden(2 * step, b_hide));
      return;
    }
    // All-gather before attention; backward gathers again and reduce-scatters dK, dV.
    const double full = kv_bytes * p_.cp;
    const double ag = comm_.time(CollectiveOp::kAllGather, full, cp_shape_).time_s;
    const double rs = comm_.time(CollectiveOp::kReduceScatter, full, cp_shape_).time_s;
    push_comm(&fwd_, "cp_kv_allgather", CostCategory::kCpComm, ag, ag);
    push_comm(&bwd_in_, "cp_kv_allgather.bwd", CostCategory::kCpComm, ag + rs, ag + rs);
  }

  /// Tensor-parallel communication entering (`gather`) or leaving (`reduce`) a TP region.
  /// With SP: all-gather / reduce-scatter; without: identity / all-reduce (forward), mirrored in
  /// backward. With TP comm overlap the collective hides behind its neighbouring GEMM.
  void tp_enter(const char* name) {
    if (p_.tp == 1) return;
    const double bytes = d_.tokens * d_.h * act_;
    if (p_.sequence_parallel) {
      const double ag = comm_.time(CollectiveOp::kAllGather, bytes, tp_shape_).time_s;
      const double rs = comm_.time(CollectiveOp::kReduceScatter, bytes, tp_shape_).time_s;
      pending_fwd_ = {name, ag};  // exposed part settled by the next GEMM
      pending_bwd_ = {std::string(name) + ".bwd_rs", rs};
      // Megatron stores the sharded input and all-gathers it again for the weight gradient,
      // overlapped with the data-gradient GEMM.
      regather_s_ = ag;
    } else {
      const double ar = comm_.time(CollectiveOp::kAllReduce, bytes, tp_shape_).time_s;
      pending_fwd_ = {"", 0};
      pending_bwd_ = {std::string(name) + ".bwd_ar", ar};
      regather_s_ = 0;
    }
  }

  /// Call right after the GEMM that follows tp_enter.
  void settle_enter() {
    if (p_.tp == 1) return;
    if (pending_fwd_.second > 0)
      push_comm(&fwd_, pending_fwd_.first, CostCategory::kTpComm, pending_fwd_.second,
                overlap(pending_fwd_.second, last_gemm_fwd_s_));
    // The input gradient's reduce-scatter (all-reduce without SP) is launched asynchronously
    // and runs beside the weight-gradient GEMM (Megatron's default), except in zero-bubble
    // schedules, where the weight gradient is deferred, and where the plan has it block.
    if (pending_bwd_.second > 0) {
      const double c = pending_bwd_.second;
      const bool wgrad_follows = p_.schedule != ScheduleKind::kZeroBubbleH1;
      push_comm(&bwd_in_, pending_bwd_.first, CostCategory::kTpComm, c,
                !p_.async_tp_grad ? c
                : wgrad_follows   ? hidden(c, last_gemm_wgrad_s_)
                                  : overlap(c, last_gemm_bwd_s_));
    }
    if (regather_s_ > 0)
      push_comm(&bwd_in_, "tp_regather", CostCategory::kTpComm, regather_s_,
                hidden(regather_s_, last_gemm_bwd_s_));
  }

  /// Leaving a TP region after a row-parallel GEMM.
  void tp_exit(const char* name) {
    if (p_.tp == 1) return;
    const double bytes = d_.tokens * d_.h * act_;
    if (p_.sequence_parallel) {
      const double rs = comm_.time(CollectiveOp::kReduceScatter, bytes, tp_shape_).time_s;
      const double ag = comm_.time(CollectiveOp::kAllGather, bytes, tp_shape_).time_s;
      push_comm(&fwd_, name, CostCategory::kTpComm, rs, overlap(rs, last_gemm_fwd_s_));
      push_comm(&bwd_in_, std::string(name) + ".bwd_ag", CostCategory::kTpComm, ag,
                overlap(ag, last_gemm_bwd_s_));
    } else {
      const double ar = comm_.time(CollectiveOp::kAllReduce, bytes, tp_shape_).time_s;
      push_comm(&fwd_, name, CostCategory::kTpComm, ar, overlap(ar, last_gemm_fwd_s_));
    }
  }

  void all_to_all(const char* name, double bytes) {
    if (p_.ep == 1) return;
    const double t = comm_.time(CollectiveOp::kAllToAll, bytes, ep_shape_).time_s;
    push_comm(&fwd_, name, CostCategory::kEpComm, t, t);
    push_comm(&bwd_in_, std::string(name) + ".bwd", CostCategory::kEpComm, t, t);
  }

  /// A collective over the expert-tensor-parallel group in forward and its mirror in backward.
  void etp_collective(const char* name, CollectiveOp fwd, CollectiveOp bwd, double bytes) {
    if (p_.etp == 1) return;
    const double f = comm_.time(fwd, bytes, etp_shape_).time_s;
    const double b = comm_.time(bwd, bytes, etp_shape_).time_s;
    push_comm(&fwd_, name, CostCategory::kEpComm, f, f);
    push_comm(&bwd_in_, std::string(name) + ".bwd", CostCategory::kEpComm, b, b);
  }

  /// Residual add after a block (bias-dropout-add when the model has dropout: it also writes a
  /// 1-byte mask, which backward reads).
  void residual_add(double tokens) {
    const double mask = m_.dropout > 0 ? 1.0 : 0.0;
    memory("residual_add", tokens * d_.h * (3 * act_ + mask));
  }

  // --- blocks -----------------------------------------------------------------------------------
  void attention_block() {
    const Dims& d = d_;
    norm("input_norm", d.tokens_sp, d.h);
    tp_enter("tp_gather.attn");
    if (m_.mla) {
      const auto& a = *m_.mla;
      // Down projections are replicated across TP ranks; up projections split by heads.
      if (a.q_lora_rank > 0) {
        gemm("q_down", d.tokens, d.h, a.q_lora_rank);
        settle_enter();
        norm("q_norm", d.tokens, a.q_lora_rank);
        gemm("q_up", d.tokens, a.q_lora_rank, d.q_heads * d.d_qk);
      } else {
        gemm("q_proj", d.tokens, d.h, d.q_heads * d.d_qk);
        settle_enter();
      }
      gemm("kv_down", d.tokens, d.h, a.kv_lora_rank + a.qk_rope_head_dim);
      norm("kv_norm", d.tokens, a.kv_lora_rank);
      gemm("kv_up", d.tokens, a.kv_lora_rank, d.q_heads * (a.qk_nope_head_dim + a.v_head_dim));
    } else {
      gemm("qkv_proj", d.tokens, d.h, (d.q_heads + 2 * d.kv_heads) * d.d_qk);
      settle_enter();
    }
    rope(d.tokens * (d.q_heads + d.kv_heads) * d.d_qk);
    if (const double heads = attention_kv_heads(d, p_); heads > d.kv_heads) {
      // repeat_kv copies K and V to the query heads; backward sums the copies' gradients.
      memory("repeat_kv", d.tokens * (d.kv_heads + heads) * (d.d_qk + d.d_v) * act_, 1.0);
    }
    attention();
    gemm("out_proj", d.tokens, d.q_heads * d.d_v, d.h);
    tp_exit("tp_reduce.attn");
    residual_add(d.tokens_sp);
  }

  void dense_mlp(int64_t width) {
    const Dims& d = d_;
    const double w = static_cast<double>(width) / d.tp;
    const bool glu = m_.ffn_act == FfnAct::kSwiglu;
    norm("post_attn_norm", d.tokens_sp, d.h);
    tp_enter("tp_gather.mlp");
    gemm(glu ? "mlp_gate_up" : "mlp_up", d.tokens, d.h, (glu ? 2 : 1) * w);
    settle_enter();
    activation(glu ? "swiglu" : "gelu", d.tokens * w, glu);
    gemm("mlp_down", d.tokens, w, d.h);
    tp_exit("tp_reduce.mlp");
    residual_add(d.tokens_sp);
  }

  void moe_mlp() {
    const Dims& d = d_;
    const MoeSpec& e = *m_.moe;
    const bool glu = m_.ffn_act == FfnAct::kSwiglu;
    // Tokens of this rank entering the MoE block: the sequence-parallel shard (Megatron requires
    // SP with TP for MoE); routed copies are spread evenly over the expert-parallel group.
    const double t = d.tokens / p_.tp;
    norm("post_attn_norm", t, d.h);
    gemm("router", t, d.h, e.experts, 1, GemmKind::kLinearBf16);
    memory("router_topk", t * e.experts * 3 * kFp32);
    memory("permute", 2 * t * e.top_k * d.h * act_);
    // The busiest rank receives its imbalance's share of the copies, and the others wait for it.
    const double rows_in = routed_rows(m_, p_, d.tokens);  // over the etp group
    all_to_all("ep_dispatch", rows_in / p_.etp * d.h * act_);
    // Expert tensor parallelism: the etp ranks sharing an expert exchange their dispatched tokens
    // (all-gather before the expert GEMMs, reduce-scatter of the partial outputs after).
    const double etp_bytes = rows_in * d.h * act_;
    etp_collective("etp_gather", CollectiveOp::kAllGather, CollectiveOp::kReduceScatter, etp_bytes);
    const double local_experts = static_cast<double>(e.experts) / p_.ep;
    const double rows = rows_in / local_experts;  // tokens per local expert
    const double w = static_cast<double>(e.expert_ffn_hidden) / p_.etp;
    gemm(glu ? "experts_gate_up" : "experts_up", rows, d.h, (glu ? 2 : 1) * w, local_experts);
    activation(glu ? "experts_swiglu" : "experts_gelu", rows * local_experts * w, glu);
    gemm("experts_down", rows, w, d.h, local_experts);
    etp_collective("etp_reduce", CollectiveOp::kReduceScatter, CollectiveOp::kAllGather, etp_bytes);
    all_to_all("ep_combine", rows_in / p_.etp * d.h * act_);
    memory("unpermute", 2 * t * e.top_k * d.h * act_);
    if (e.shared_experts > 0) {
      const double ws = static_cast<double>(e.shared_experts) * e.expert_ffn_hidden / p_.tp;
      tp_enter("tp_gather.shared");
      gemm("shared_gate_up", d.tokens, d.h, (glu ? 2 : 1) * ws);
      settle_enter();
      activation("shared_act", d.tokens * ws, glu);
      gemm("shared_down", d.tokens, ws, d.h);
      tp_exit("tp_reduce.shared");
    }
    residual_add(t);
  }

  void embedding() {
    const Dims& d = d_;
    memory("embedding", 2 * d.tokens * d.h * act_, 1.0);
    tp_exit("tp_reduce.embedding");  // vocab-parallel lookup ends in an all-reduce / reduce-scatter
  }

  void output_layer() {
    const Dims& d = d_;
    const double v = static_cast<double>(m_.vocab) / d.tp;
    norm("final_norm", d.tokens_sp, d.h);
    tp_enter("tp_gather.logits");
    gemm("logits", d.tokens, d.h, v, 1, GemmKind::kLinearBf16);
    settle_enter();
    // Vocab-parallel cross-entropy in fp32 (Megatron's _VocabParallelCrossEntropy), bytes per
    // logit: max over bf16 logits (2), cast to fp32 (2 + 4), subtract max (4 + 4), exp (4 + 4),
    // sum (4), normalise to the softmax kept for backward (4 + 4) = 40; backward scales the
    // saved softmax by the loss gradient (4 + 4) and casts it to bf16 for the logits GEMM
    // (4 + 2) = 14. Partial max and sum are all-reduced across TP (t floats each).
    memory("cross_entropy", d.tokens * v * 40.0, 14.0 / 40.0);
    if (p_.tp > 1) {
      const double ar =
          comm_.time(CollectiveOp::kAllReduce, 2 * d.tokens * kFp32, tp_shape_).time_s;
      push_comm(&fwd_, "tp_ce_stats", CostCategory::kTpComm, ar, ar);
    }
  }

  /// FSDP / ZeRO-3: gather this layer's parameters before its forward and backward, reduce-
  /// scatter its gradients after backward; each overlaps with the neighbouring layer's compute.
  /// Only without pipelining: with pp > 1 the stage stays gathered across microbatches and
  /// reduces once per step (simulate's data-parallel sync).
  void fsdp_layer(double params) {
    if (!p_.shards_params() || p_.pp > 1 || fsdp_shape_.size == 1) return;
    const double ag = comm_.time(CollectiveOp::kAllGather, params * act_, fsdp_shape_).time_s;
    const double rs = comm_.time(CollectiveOp::kReduceScatter, params * kFp32, fsdp_shape_).time_s;
    fsdp_fwd_comm_ = ag;
    fsdp_bwd_comm_ = ag + rs;  // regathered for backward (resharded after forward)
  }

  /// Moves the ops built so far into the passes, settling FSDP overlap against layer compute.
  /// `sac_share`: under selective-op recompute, the share of each GEMM op's forward recomputed.
  void flush_layer(PassCost* fwd, PassCost* bwd_in, PassCost* bwd_w, PassCost* recompute_into,
                   Recompute rc,
                   const std::vector<std::pair<std::string, double>>& sac_share = {}) {
    const double f_compute = sum(fwd_), b_compute = sum(bwd_in_) + sum(bwd_w_);
    for (auto& op : fwd_) fwd->add(op);
    if (rc == Recompute::kFull && recompute_into) {
      for (auto op : fwd_) {
        op.name += ".recompute";
        recompute_into->add(op);
      }
    } else if (rc == Recompute::kSelective && recompute_into) {
      for (auto op : core_fwd_) {
        op.name += ".recompute";
        recompute_into->add(op);
      }
    } else if (rc == Recompute::kSelectiveOp && recompute_into) {
      // Every compute op but the saved matmul outputs and fused attention (whose output is
      // saved); the unfused core's batched GEMMs and softmax are not matmuls PyTorch saves.
      // Collectives are not replayed.
      const bool fused = p_.attention != AttentionImpl::kUnfused;
      for (auto op : fwd_) {
        if (op.category != CostCategory::kCompute) continue;
        const bool core = std::any_of(core_fwd_.begin(), core_fwd_.end(),
                                      [&](const OpCost& c) { return c.name == op.name; });
        if (core && fused) continue;
        auto it = std::find_if(sac_share.begin(), sac_share.end(),
                               [&](const auto& s) { return s.first == op.name; });
        const double share = it == sac_share.end() ? 1.0 : it->second;
        if (share <= 0) continue;
        op.time_s *= share;
        op.busy_s *= share;
        op.flops *= share;
        op.name += ".recompute";
        recompute_into->add(op);
      }
    }
    for (auto& op : bwd_in_) bwd_in->add(op);
    for (auto& op : bwd_w_) bwd_w->add(op);
    if (fsdp_fwd_comm_ > 0) {
      OpCost f{"fsdp_allgather", CostCategory::kDpComm, hidden(fsdp_fwd_comm_, f_compute),
               fsdp_fwd_comm_, 0};
      fwd->add(f);
      OpCost b{"fsdp_gather_reduce", CostCategory::kDpComm, hidden(fsdp_bwd_comm_, b_compute),
               fsdp_bwd_comm_, 0};
      bwd_w->add(b);
    }
    fwd_.clear();
    bwd_in_.clear();
    bwd_w_.clear();
    core_fwd_.clear();
    fsdp_fwd_comm_ = fsdp_bwd_comm_ = 0;
  }

 private:
  static int64_t ll(double x) { return static_cast<int64_t>(std::llround(std::max(1.0, x))); }
  static double sum(const std::vector<OpCost>& ops) {
    double s = 0;
    for (const auto& o : ops)
      if (o.category == CostCategory::kCompute) s += o.time_s;
    return s;
  }
  OpCost compute_op(std::string name, const KernelTime& k) const {
    return OpCost{std::move(name), CostCategory::kCompute, k.time_s, k.time_s, k.flops};
  }
  void push_comm(std::vector<OpCost>* ops, std::string name, CostCategory c, double busy,
                 double exposed) {
    ops->push_back(OpCost{std::move(name), c, exposed, busy, 0});
  }
  /// Exposed part of a TP collective next to a GEMM of duration g: all of it without overlap;
  /// with overlap, the first of tp chunks plus whatever the GEMM cannot hide.
  double overlap(double comm, double g) const {
    if (!p_.overlap_tp_comm) return comm;
    return comm / p_.tp + hidden(comm * (p_.tp - 1) / p_.tp, g);
  }
  /// Cost on the compute stream of `comm` run beside `compute`: the part that does not fit,
  /// plus the slowdown of the compute it overlaps (the SMs the communication kernels occupy).
  double hidden(double comm, double compute) const {
    return std::max(0.0, comm - compute) + comm_.overlap_slowdown() * std::min(comm, compute);
  }

  const ModelSpec& m_;
  const ParallelPlan& p_;
  ComputeCost compute_;
  CollectiveCost comm_;
  GroupShape tp_shape_, cp_shape_, ep_shape_, etp_shape_, fsdp_shape_;
  Dims d_;
  double act_ = kBf16Bytes;  ///< act_bytes(p_)
  std::vector<OpCost> fwd_, bwd_in_, bwd_w_;
  std::vector<OpCost> core_fwd_;  ///< the attention core, recomputed by selective recompute
  std::pair<std::string, double> pending_fwd_, pending_bwd_;
  double regather_s_ = 0;
  double last_gemm_fwd_s_ = 0, last_gemm_bwd_s_ = 0, last_gemm_wgrad_s_ = 0;
  int64_t microbatches_ = 1;  ///< microbatches that reuse one fp8 weight cast
  Precision linear_;          ///< the current layer's linear-layer precision
  double fsdp_fwd_comm_ = 0, fsdp_bwd_comm_ = 0;
};

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
  for (int l = 0; l < m.layers; ++l) {
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
  const double logits_fwd = 2 * h * static_cast<double>(m.vocab);
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
