#pragma once
/// What an MoE layer moves, as Megatron-LM's MoE layer runs it (megatron/core/transformer/moe/:
/// router.py, token_dispatcher.py, moe_utils.py, fused_a2a.py): the routed copies each rank's
/// experts run, how far one token's copies spread over the expert-parallel group, and the
/// memory-bound kernels of routing and permutation. Pure sizes and byte counts; the lowering
/// (lower.cc) prices them with cost/.

#include <vector>

#include "core/model_spec.h"
#include "core/parallel_plan.h"
#include "core/rank_map.h"

namespace parallax {

/// Routed token copies the busiest expert-parallel rank's experts run on in one MoE layer, out of
/// `tokens` (before the tensor-parallel split): its share of tokens / tp * top_k, gathered over
/// the expert-tensor-parallel ranks, times the plan's imbalance (at most ep: every copy on one
/// rank), which a capacity factor caps (moe_utils.py get_capacity: each expert keeps at most
/// ceil(tokens * top_k / experts * factor) copies and drops the rest).
double routed_rows(const ModelSpec& m, const ParallelPlan& p, double tokens);

/// The most scale-up domains of the expert-parallel group (laid out `ep`) that one token's copies
/// reach: the plan's moe_max_nodes; else the model's group-limited routing (experts in `groups`
/// contiguous groups, a token in the top group_topk: DeepSeek-V3's 8 groups over EP 64 on 8
/// nodes are its node-limited routing, at most 4 nodes); else every domain.
int routed_domain_limit(const ModelSpec& m, const ParallelPlan& p, const GroupShape& ep);

/// Expected distinct destinations of one token's top_k copies in the expert-parallel group, its
/// own included: experts E split evenly over the ep ranks and the D domains, the token's copies
/// drawn without repeats among the experts of the M = routed_domain_limit domains it may reach:
///   domains = M (1 - prod_i (E_M - E/D - i) / (E_M - i)),
///   ranks   = M ep/D (1 - prod_i (E_M - E/ep - i) / (E_M - i)),   i < k, E_M = E M / D.
/// DeepSeek-V3 (256 experts, top 8, EP 64 on 8 nodes, 4 nodes a token): 3.6 nodes, 7.4 ranks.
struct TokenFanout {
  double ranks = 1;
  double domains = 1;
};
TokenFanout token_fanout(const ModelSpec& m, const ParallelPlan& p, const GroupShape& ep);

/// The bytes each memory-bound kernel of one op moves, forward and backward.
struct KernelChain {
  std::vector<double> fwd, bwd;
};

/// The router after its gating GEMM, over tokens x experts scores (fp32 in the kernels): the score
/// function, top-k (group-limited when the model routes by groups), the probabilities and routing
/// map, and the load-balancing loss's scores. Megatron with --moe-router-fusion runs TE's fused
/// kernels (fused_topk_with_score_function, fused_compute_score_for_moe_aux_loss and the aux
/// loss: 3 forward, 2 backward); without, each torch op of topk_routing_with_score_function and
/// compute_routing_scores_for_aux_loss is a kernel (moe_utils.py).
KernelChain router_kernels(const ModelSpec& m, double tokens, double act_bytes, bool fused);

/// Permutation of `copies` token copies of `width` elements out of (or back into) `tokens` rows,
/// moe_utils.py permute / unpermute. Fused (--moe-permute-fusion, TE's moe_permute): one kernel
/// reads and writes each copy; unpermute reads the copies and writes each token once (the k
/// copies summed). Unfused: the routing map transposed and its indices selected (tokens x
/// experts), index_select of the copies; unpermute zero-fills the output and scatter-adds the
/// copies into it (a read-modify-write per copy); backward runs the mirror ops.
KernelChain permute_kernels(double tokens, double copies, double experts, double width,
                            double act_bytes, bool fused);
KernelChain unpermute_kernels(double tokens, double copies, double width, double act_bytes,
                              bool fused);

}  // namespace parallax
