#include "simulator/moe_layer.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "core/units.h"

namespace parallax {

double routed_rows(const ModelSpec& m, const ParallelPlan& p, double tokens) {
  double imbalance = std::clamp(p.moe_imbalance, 1.0, static_cast<double>(p.ep));
  if (p.moe_capacity_factor > 0) imbalance = std::min(imbalance, p.moe_capacity_factor);
  return tokens / p.tp * m.moe->top_k * p.etp * imbalance;
}

int routed_domain_limit(const ModelSpec& m, const ParallelPlan& p, const GroupShape& ep) {
  const int domains = std::max(1, ep.domains);
  if (p.moe_max_nodes > 0) return std::min(domains, p.moe_max_nodes);
  const RouterSpec& r = m.moe->router;
  if (r.groups <= 0 || r.group_topk <= 0) return domains;
  // Contiguous groups over contiguous ranks: a group spans domains / groups domains (at least
  // one), so group_topk groups reach at most group_topk times that.
  const int span = std::max(1, domains / r.groups);
  return std::min(domains, r.group_topk * span);
}

namespace {

/// Probability that none of k draws without repeats from `pool` items falls among `hit` of them.
double none_of(double pool, double hit, int k) {
  double p = 1;
  for (int i = 0; i < k; ++i) {
    if (pool - i <= 0) return 0;
    p *= std::max(0.0, (pool - hit - i) / (pool - i));
  }
  return p;
}

}  // namespace

TokenFanout token_fanout(const ModelSpec& m, const ParallelPlan& p, const GroupShape& ep) {
  TokenFanout f;
  if (p.ep <= 1) return f;
  const double experts = m.moe->experts, domains = std::max(1, ep.domains);
  const double allowed = routed_domain_limit(m, p, ep);
  const double pool = experts * allowed / domains;
  const int k = m.moe->top_k;
  f.domains = allowed * (1 - none_of(pool, experts / domains, k));
  f.ranks = allowed * p.ep / domains * (1 - none_of(pool, experts / p.ep, k));
  return f;
}

KernelChain router_kernels(const ModelSpec& m, double tokens, double a, bool fused) {
  const MoeSpec& e = *m.moe;
  const double n = tokens * e.experts;  // scores, one per token and expert
  constexpr double f = kFp32Bytes;
  KernelChain c;
  if (fused) {
    // fused_topk_with_score_function and fused_compute_score_for_moe_aux_loss each read the
    // logits and write probabilities (fp32) and a map (1 byte); the aux loss reads the scores.
    // Backward: each fused kernel reads its saved scores and gradient and writes the logits'
    // gradient; autograd sums the two.
    c.fwd = {n * (a + f + 1), n * (a + f + 1), n * f};
    c.bwd = {n * (2 * f + a), n * (2 * f + a), n * 3 * a};
    return c;
  }
  const bool sigmoid = e.router.score == RouterScore::kSigmoid;
  // topk_routing_with_score_function, op by op: the score (sigmoid: cast to fp32, sigmoid, cast
  // back; softmax: softmax to fp32, cast back), the expert bias, the group-limited top-k (top
  // scores per group, the group mask built and applied), the top-k, the probabilities scattered
  // into zeros, the routing map (zeros, to int, scatter, to bool).
  std::vector<double> fwd;
  auto kernels = [&](std::initializer_list<double> bytes) {
    for (const double b : bytes) fwd.push_back(b);
  };
  if (sigmoid)
    kernels({a + f, 2 * f, f + a});
  else
    kernels({a + f, f + a});
  if (e.router.expert_bias) kernels({2 * a});
  if (e.router.groups > 0) kernels({a, 1, 2 * a + 1});
  kernels({a, a, 2 * a, a, a + 4, 8, 4 + 1});
  // compute_routing_scores_for_aux_loss: the score again (sigmoid normalised by its sum), top-k,
  // the map (zeros, int, scatter, bool); the loss sums the scores over tokens.
  kernels({a + f, f, 2 * f, f, a, a + 4, 8, 4 + 1, f});
  // Backward: the probabilities' scatter (a gather), the score's chain back to the logits (fp32
  // gradient, activation derivative, cast), the aux-loss scores' chain, and their sum.
  std::vector<double> bwd = {2 * a, a + f, 3 * f, f + a, 2 * f, 3 * f, f + a, 3 * a};
  for (double& b : fwd) b *= n;
  for (double& b : bwd) b *= n;
  c.fwd = std::move(fwd);
  c.bwd = std::move(bwd);
  return c;
}

KernelChain permute_kernels(double tokens, double copies, double experts, double width, double a,
                            bool fused) {
  const double rows = copies * width * a;  // the copies' bytes
  const double out = tokens * width * a;   // one row per token
  if (fused) {
    // TE moe_permute: the row map from the routing map (tokens x experts, int32), then one
    // kernel copying each token into its slots; backward gathers the copies back per token.
    return {{tokens * experts * (1 + 4), 2 * rows}, {rows + out}};
  }
  // routing_map.T.contiguous(), masked_select of the token indices, index_select; backward:
  // zeros for the input gradient, index_add of the copies (read each, read and write its row).
  return {{tokens * experts * 2, tokens * experts * (1 + 8) + copies * 8, 2 * rows},
          {out, 3 * rows}};
}

KernelChain unpermute_kernels(double tokens, double copies, double width, double a, bool fused) {
  const double rows = copies * width * a, out = tokens * width * a;
  // Fused (TE moe_unpermute): read every copy, write each token's sum; backward the reverse.
  if (fused) return {{rows + out}, {rows + out}};
  // torch.zeros + scatter_add_ (read each copy, read and write its token's row); backward a
  // gather of the token gradients into the copies.
  return {{out, 3 * rows}, {out + rows}};
}

}  // namespace parallax
