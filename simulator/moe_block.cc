// LayerBuilder's MoE block: Megatron-LM's MoELayer (megatron/core/transformer/moe/moe_layer.py)
// as the plan's dispatcher runs it, and the input of a multi-token-prediction module.

#include "simulator/layer_builder.h"

namespace parallax::lowering {

// --- MoE block (Megatron-LM's MoELayer: router, dispatch, experts, combine) ------------------
void LayerBuilder::moe_mlp() {
  const Dims& d = d_;
  const MoeSpec& e = *m_.moe;
  const bool glu = m_.ffn_act == FfnAct::kSwiglu;
  // Tokens of this rank entering the MoE block: the sequence-parallel shard (Megatron requires
  // SP with TP for MoE).
  const double t = d.tokens / p_.tp;
  norm("post_attn_norm", t, d.h);
  gemm("router", t, d.h, e.experts, 1, GemmKind::kLinearBf16);
  kernel_chain("router_topk", router_kernels(m_, t, act_, fused_moe_ops()));
  // The busiest rank receives its imbalance's share of the copies, and the others wait for it.
  const double rows_in = routed_rows(m_, p_, d.tokens);  // over the etp group
  const double received = moe_dispatch(t, rows_in);
  const double local_experts = static_cast<double>(e.experts) / p_.ep;
  const double rows = rows_in / local_experts;  // tokens per local expert
  const double w = static_cast<double>(e.expert_ffn_hidden) / p_.etp;
  gemm(glu ? "experts_gate_up" : "experts_up", rows, d.h, (glu ? 2 : 1) * w, local_experts,
       GemmKind::kExperts);
  activation(glu ? "experts_swiglu" : "experts_gelu", rows * local_experts * w, glu);
  gemm("experts_down", rows, w, d.h, local_experts, GemmKind::kExperts);
  moe_combine(t, rows_in, received);
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

void LayerBuilder::kernel_chain(const char* name, const KernelChain& c) {
  eager_kernels(name, 1.0, c.fwd, c.bwd);
}

/// The dispatchers copy the per-expert token counts to the host (tokens_per_expert.cpu(), or
/// DeepEP's received counts): the stream drains and the next kernel waits for its launch.
void LayerBuilder::host_sync() {
  fwd_.push_back(compute_op("moe_host_sync", compute_.memory_bound(0)));
}

/// Token dispatch by the plan's dispatcher (token_dispatcher.py), up to the expert input of
/// `rows_in` copies; returns the distinct tokens the rank received (the rows unpermute writes).
double LayerBuilder::moe_dispatch(double t, double rows_in) {
  const Dims& d = d_;
  const MoeSpec& e = *m_.moe;
  const double a = act_, local = static_cast<double>(e.experts) / p_.ep;
  const double copies = t * e.top_k;
  const double etp_bytes = rows_in * d.h * a;
  if (p_.moe_dispatcher == MoeDispatcher::kAllGather) {
    // MoEAllGatherTokenDispatcher: every token, its routing map (1 byte) and probabilities
    // (fp32) gathered over the etp x ep ranks, then the copies for the local experts permuted.
    const double n = etp_ep_shape_.size, gathered = t * n;
    const double bytes = gathered * (d.h * a + e.experts * (1 + kFp32));
    ep_comm("ep_allgather", comm_.time(CollectiveOp::kAllGather, bytes, etp_ep_shape_).time_s,
            comm_.time(CollectiveOp::kReduceScatter, gathered * d.h * a, etp_ep_shape_).time_s);
    host_sync();
    kernel_chain("permute", permute_kernels(gathered, rows_in, local, d.h, a, fused_moe_ops()));
    return gathered;
  }
  if (p_.moe_dispatcher == MoeDispatcher::kFlex) {
    // MoEFlexTokenDispatcher over DeepEP: each token once to each destination rank, then the
    // received tokens permuted into the local experts' copies.
    const double received = deepep_exchange("deepep_dispatch", t, rows_in);
    host_sync();
    etp_collective("etp_gather", CollectiveOp::kAllGather, CollectiveOp::kReduceScatter, etp_bytes);
    kernel_chain("permute", permute_kernels(received, rows_in, local, d.h, a, fused_moe_ops()));
    return received;
  }
  // MoEAlltoAllTokenDispatcher: permutation 1 (by expert), the all-to-all, the etp all-gather,
  // permutation 2 (received chunks sorted by local expert, when there are several).
  host_sync();
  kernel_chain("permute", permute_kernels(t, copies, e.experts, d.h, a, fused_moe_ops()));
  all_to_all("ep_dispatch", rows_in / p_.etp * d.h * a);
  // Expert tensor parallelism: the etp ranks sharing an expert exchange their dispatched tokens
  // (all-gather before the expert GEMMs, reduce-scatter of the partial outputs after).
  etp_collective("etp_gather", CollectiveOp::kAllGather, CollectiveOp::kReduceScatter, etp_bytes);
  if (local > 1 && p_.ep > 1) memory("sort_chunks", 2 * etp_bytes, 1.0);
  return t;
}

/// The mirror of moe_dispatch after the experts.
void LayerBuilder::moe_combine(double t, double rows_in, double received) {
  const Dims& d = d_;
  const MoeSpec& e = *m_.moe;
  const double a = act_, local = static_cast<double>(e.experts) / p_.ep;
  const double etp_bytes = rows_in * d.h * a;
  if (p_.moe_dispatcher == MoeDispatcher::kAllGather) {
    kernel_chain("unpermute", unpermute_kernels(received, rows_in, d.h, a, fused_moe_ops()));
    const double bytes = received * d.h * a;
    ep_comm("ep_reduce_scatter",
            comm_.time(CollectiveOp::kReduceScatter, bytes, etp_ep_shape_).time_s,
            comm_.time(CollectiveOp::kAllGather, bytes, etp_ep_shape_).time_s);
    return;
  }
  if (p_.moe_dispatcher == MoeDispatcher::kFlex) {
    kernel_chain("unpermute", unpermute_kernels(received, rows_in, d.h, a, fused_moe_ops()));
    etp_collective("etp_reduce", CollectiveOp::kReduceScatter, CollectiveOp::kAllGather, etp_bytes);
    deepep_exchange("deepep_combine", t, rows_in);
    return;
  }
  if (local > 1 && p_.ep > 1) memory("unsort_chunks", 2 * etp_bytes, 1.0);
  etp_collective("etp_reduce", CollectiveOp::kReduceScatter, CollectiveOp::kAllGather, etp_bytes);
  all_to_all("ep_combine", rows_in / p_.etp * d.h * a);
  kernel_chain("unpermute", unpermute_kernels(t, t * e.top_k, d.h, a, fused_moe_ops()));
}

/// DeepEP's normal kernels for `t` tokens of this rank (CollectiveCost::deepep): each token
/// once per distinct destination node over RDMA (the other nodes' share of the nodes it
/// reaches) and once per distinct destination rank over NVLink, except the GPU that received
/// it; the busiest rank's load scaled by the plan's imbalance. The combine moves the same rows
/// back, and each backward mirrors its forward. Returns the distinct tokens the busiest rank
/// receives.
double LayerBuilder::deepep_exchange(const char* name, double t, double rows_in) {
  if (p_.ep == 1) return t;
  const TokenFanout fan = token_fanout(m_, p_, ep_shape_);
  const double load = rows_in / (t * m_.moe->top_k * p_.etp);  // the busiest rank's imbalance
  const double row = d_.h * act_, domains = ep_shape_.domains, kd = ep_shape_.per_domain;
  const double out = t * load * fan.domains * (domains - 1) / domains * row;
  const double up = t * load * fan.ranks * (kd - 1) / kd * row;
  const double s = comm_.deepep(CollectiveCost::DeepEpKernel::kNormal, out, up, ep_shape_).time_s;
  ep_comm(name, s, s);
  return t * load * fan.ranks;
}

/// The input of a multi-token-prediction module (DeepSeek-V3 Sec. 2.2; Megatron's
/// MultiTokenPredictionLayer): the next tokens' embeddings from the shared table, the RMSNorms
/// of the previous depth's hidden state and of those embeddings, and the projection of their
/// concatenation [2h -> h], replicated over the TP ranks and run on each rank's tokens.
void LayerBuilder::mtp_input() {
  const Dims& d = d_;
  memory("mtp_embedding", 2 * d.tokens_sp * d.h * act_, 1.0);
  norm("mtp_hnorm", d.tokens_sp, d.h);
  norm("mtp_enorm", d.tokens_sp, d.h);
  gemm("mtp_eh_proj", d.tokens_sp, 2 * d.h, d.h);
}

}  // namespace parallax::lowering
