#include "simulator/layer_builder.h"

namespace parallax::lowering {

double act_bytes(const ParallelPlan& p) {
  return p.precision == Precision::kFp32 ? kFp32Bytes : kBf16Bytes;
}

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

double attention_kv_heads(const Dims& d, const ParallelPlan& p) {
  return p.attention == AttentionImpl::kFlash2 ? std::max(d.kv_heads, d.q_heads) : d.kv_heads;
}

void LayerBuilder::gemm(const char* name, double m, double k, double n, double batch,
                        GemmKind kind) {
  GemmShape fwd{ll(m), ll(n), ll(k), ll(batch)};
  GemmShape dgrad{ll(m), ll(k), ll(n), ll(batch)};
  GemmShape wgrad{ll(k), ll(n), ll(m), ll(batch)};
  const bool linear = kind == GemmKind::kLinear || kind == GemmKind::kExperts;
  const bool quantized = linear && (linear_ == Precision::kFp8 || is_block_scaled(linear_));
  const Precision prec = quantized                          ? linear_
                         : p_.precision == Precision::kFp32 ? Precision::kFp32
                                                            : Precision::kBf16;
  auto price = [&](const GemmShape& s) {
    return kind == GemmKind::kExperts ? compute_.grouped_gemm(s, prec) : compute_.gemm(s, prec);
  };
  KernelTime f = price(fwd), dg = price(dgrad), wg = price(wgrad);
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

void LayerBuilder::memory(const char* name, double bytes_fwd, double bwd_factor) {
  fwd_.push_back(compute_op(name, compute_.memory_bound(bytes_fwd)));
  bwd_in_.push_back(
      compute_op(std::string(name) + ".bwd", compute_.memory_bound(bytes_fwd * bwd_factor)));
}

/// An op PyTorch eager runs as a chain of memory-bound kernels over `elems` elements: the bytes
/// per element of each forward kernel and of each kernel its autograd runs in backward.
void LayerBuilder::eager_kernels(const char* name, double elems,
                                 const std::vector<double>& fwd_bytes,
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
void LayerBuilder::norm(const char* name, double rows, double width) {
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
void LayerBuilder::rope(double elems) {
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
void LayerBuilder::activation(const char* name, double elems, bool glu) {
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

void LayerBuilder::attention() {
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
void LayerBuilder::context_parallel_exchange(double attn_fwd_s, double attn_bwd_s) {
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
void LayerBuilder::tp_enter(const char* name) {
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
void LayerBuilder::settle_enter() {
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
void LayerBuilder::tp_exit(const char* name) {
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

/// Expert-parallel communication taking `fwd_s` in forward and `bwd_s` in its backward mirror.
void LayerBuilder::ep_comm(const char* name, double fwd_s, double bwd_s) {
  push_comm(&fwd_, name, CostCategory::kEpComm, fwd_s, fwd_s);
  push_comm(&bwd_in_, std::string(name) + ".bwd", CostCategory::kEpComm, bwd_s, bwd_s);
}

void LayerBuilder::all_to_all(const char* name, double bytes) {
  if (p_.ep == 1) return;
  const double t = comm_.time(CollectiveOp::kAllToAll, bytes, ep_shape_).time_s;
  ep_comm(name, t, t);
}

/// A collective over the expert-tensor-parallel group in forward and its mirror in backward.
void LayerBuilder::etp_collective(const char* name, CollectiveOp fwd, CollectiveOp bwd,
                                  double bytes) {
  if (p_.etp == 1) return;
  const double f = comm_.time(fwd, bytes, etp_shape_).time_s;
  const double b = comm_.time(bwd, bytes, etp_shape_).time_s;
  push_comm(&fwd_, name, CostCategory::kEpComm, f, f);
  push_comm(&bwd_in_, std::string(name) + ".bwd", CostCategory::kEpComm, b, b);
}

/// Residual add after a block (bias-dropout-add when the model has dropout: it also writes a
/// 1-byte mask, which backward reads).
void LayerBuilder::residual_add(double tokens) {
  const double mask = m_.dropout > 0 ? 1.0 : 0.0;
  memory("residual_add", tokens * d_.h * (3 * act_ + mask));
}

// --- blocks -----------------------------------------------------------------------------------
void LayerBuilder::attention_block() {
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

void LayerBuilder::dense_mlp(int64_t width) {
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

void LayerBuilder::embedding() {
  const Dims& d = d_;
  memory("embedding", 2 * d.tokens * d.h * act_, 1.0);
  tp_exit("tp_reduce.embedding");  // vocab-parallel lookup ends in an all-reduce / reduce-scatter
}

void LayerBuilder::output_layer() {
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
    const double ar = comm_.time(CollectiveOp::kAllReduce, 2 * d.tokens * kFp32, tp_shape_).time_s;
    push_comm(&fwd_, "tp_ce_stats", CostCategory::kTpComm, ar, ar);
  }
}

/// FSDP / ZeRO-3: gather this layer's parameters before its forward and backward, reduce-
/// scatter its gradients after backward; each overlaps with the neighbouring layer's compute.
/// Only without pipelining: with pp > 1 the stage stays gathered across microbatches and
/// reduces once per step (simulate's data-parallel sync).
void LayerBuilder::fsdp_layer(double params) {
  if (!p_.shards_params() || p_.pp > 1 || fsdp_shape_.size == 1) return;
  const double ag = comm_.time(CollectiveOp::kAllGather, params * act_, fsdp_shape_).time_s;
  const double rs = comm_.time(CollectiveOp::kReduceScatter, params * kFp32, fsdp_shape_).time_s;
  fsdp_fwd_comm_ = ag;
  fsdp_bwd_comm_ = ag + rs;  // regathered for backward (resharded after forward)
}

/// Moves the ops built so far into the passes, settling FSDP overlap against layer compute.
/// `sac_share`: under selective-op recompute, the share of each GEMM op's forward recomputed.
void LayerBuilder::flush_layer(PassCost* fwd, PassCost* bwd_in, PassCost* bwd_w,
                               PassCost* recompute_into, Recompute rc,
                               const std::vector<std::pair<std::string, double>>& sac_share) {
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

void LayerBuilder::push_comm(std::vector<OpCost>* ops, std::string name, CostCategory c,
                             double busy, double exposed) {
  ops->push_back(OpCost{std::move(name), c, exposed, busy, 0});
}

/// Exposed part of a TP collective next to a GEMM of duration g: all of it without overlap;
/// with overlap, the first of tp chunks plus whatever the GEMM cannot hide.
double LayerBuilder::overlap(double comm, double g) const {
  if (!p_.overlap_tp_comm) return comm;
  return comm / p_.tp + hidden(comm * (p_.tp - 1) / p_.tp, g);
}

}  // namespace parallax::lowering
