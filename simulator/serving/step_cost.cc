#include "simulator/serving/step_cost.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "core/parallel_plan.h"
#include "core/rank_map.h"
#include "core/text.h"
#include "core/units.h"

namespace parallax::serving {
namespace {

/// Bytes of an activation element: fp32 plans run in fp32, everything else in bf16 (fp8
/// recipes quantise only the GEMM operands).
double act_bytes(Precision p) { return p == Precision::kFp32 ? kFp32Bytes : kBf16Bytes; }
/// Bytes of a weight element: fp8 checkpoints store fp8 weights.
double weight_bytes(Precision p) {
  return p == Precision::kFp8 ? 1.0 : p == Precision::kFp32 ? kFp32Bytes : kBf16Bytes;
}

/// Layers [first, end) of pipeline stage s of pp (an even split, the remainder to the last
/// stages).
std::pair<int, int> stage_layers(int layers, int pp, int s) {
  return {static_cast<int>(static_cast<int64_t>(layers) * s / pp),
          static_cast<int>(static_cast<int64_t>(layers) * (s + 1) / pp)};
}

/// A deployment's ranks as the training RankMap lays them: tp fastest, then dp, then pp; the
/// expert-parallel group folds over the tp ranks.
ParallelPlan as_plan(const Deployment& d) {
  ParallelPlan p;
  p.tp = d.tp;
  p.pp = d.pp;
  p.dp = d.dp;
  p.ep = d.ep;
  p.precision = d.precision;
  return p;
}

}  // namespace

int64_t KvBudget::tokens() const { return blocks * block_size; }

int64_t StepShape::tokens() const {
  int64_t t = decodes;
  for (const Chunk& c : prefills) t += c.new_tokens;
  return t;
}

Deployment wide_ep_pool(const Deployment& d, int replicas) {
  Deployment p = d;
  p.dp = replicas;
  p.ep = d.tp * replicas;
  return p;
}

Diagnostics check_deployment(const ModelSpec& m, const Deployment& d, int gpus) {
  Diagnostics out;
  auto bad = [&](const char* field, std::string what, std::string hint = "") {
    out.push_back({field, std::move(what), std::move(hint)});
  };
  if (d.tp < 1 || d.pp < 1 || d.dp < 1 || d.ep < 1) {
    bad("--tp", "tp, pp, dp and ep must be at least 1, got tp=" + std::to_string(d.tp) +
                    " pp=" + std::to_string(d.pp) + " dp=" + std::to_string(d.dp) +
                    " ep=" + std::to_string(d.ep));
    return out;
  }
  // Past this, tp*pp*dp overflows int and the replicas would take hours to simulate.
  if (gpus > kMaxGpus || !within_max_gpus({d.tp, d.pp, d.dp}) || !within_max_gpus({d.ep})) {
    bad("--gpus",
        "gpus=" + std::to_string(gpus) + ", tp*pp*dp=" + std::to_string(d.tp) + "*" +
            std::to_string(d.pp) + "*" + std::to_string(d.dp) + ", ep=" + std::to_string(d.ep) +
            ": beyond the largest cluster modelled",
        "at most " + std::to_string(kMaxGpus) + " GPUs");
    return out;
  }
  if (gpus > 0 && d.gpus() != gpus)
    bad("--gpus", "gpus=" + std::to_string(gpus) + " but tp*pp*dp = " + std::to_string(d.gpus()),
        "--dp " + std::to_string(std::max(1, gpus / (d.tp * d.pp))) + " or --gpus " +
            std::to_string(d.gpus()));
  if (m.heads % d.tp != 0)
    bad("--tp", "tp=" + std::to_string(d.tp) + " must divide heads=" + std::to_string(m.heads),
        "each tensor-parallel rank holds whole attention heads");
  else if (!m.mla && m.kv_heads % d.tp != 0 && d.tp % m.kv_heads != 0)
    bad("--tp",
        "tp=" + std::to_string(d.tp) + " and kv_heads=" + std::to_string(m.kv_heads) +
            ": one must divide the other",
        "KV heads are split over tp, or replicated when tp exceeds them");
  if (m.ffn_hidden > 0 && m.ffn_hidden % d.tp != 0 && (!m.moe || m.moe->dense_layers > 0))
    bad("--tp",
        "tp=" + std::to_string(d.tp) + " must divide ffn_hidden=" + std::to_string(m.ffn_hidden));
  if (d.pp > m.layers)
    bad("--pp",
        "pp=" + std::to_string(d.pp) + " exceeds the " + std::to_string(m.layers) + " layers");
  if (d.ep > 1) {
    const int wide = d.tp * d.dp;
    if (!m.moe)
      bad("--ep", "ep=" + std::to_string(d.ep) + " needs a MoE model", "--ep 1");
    else if (d.ep > d.tp && (d.ep != wide || d.pp != 1 || m.moe->experts % d.ep != 0))
      bad("--ep",
          "ep=" + std::to_string(d.ep) +
              " above tp spreads the experts over every replica: it must be tp*dp=" +
              std::to_string(wide) + " with pp=1 and divide the experts (" +
              std::to_string(m.moe->experts) + "), got pp=" + std::to_string(d.pp),
          "--ep " + std::to_string(d.tp) + " (inside each replica) or --ep " +
              std::to_string(wide) + " --pp 1 (across the replicas)");
    else if (d.ep <= d.tp && (d.tp % d.ep != 0 || m.moe->experts % d.ep != 0))
      bad("--ep",
          "ep=" + std::to_string(d.ep) + " must divide tp=" + std::to_string(d.tp) +
              " and the experts (" + std::to_string(m.moe->experts) + ")",
          "expert parallelism spreads each replica's experts over its tensor-parallel ranks, "
          "or with ep = tp*dp over every replica");
  }
  if (d.two_batch_overlap && !d.wide_ep())
    bad("--two-batch-overlap",
        "overlaps the experts' all-to-alls, which only run with the experts spread over every "
        "replica (ep = tp*dp), got ep=" +
            std::to_string(d.ep) + " tp=" + std::to_string(d.tp) + " dp=" + std::to_string(d.dp),
        "--ep " + std::to_string(d.tp * d.dp) + " --pp 1, or leave it out");
  if (m.moe && !d.wide_ep() && m.moe->expert_ffn_hidden % (d.tp / std::max(1, d.ep)) != 0)
    bad("--tp", "tp/ep=" + std::to_string(d.tp / std::max(1, d.ep)) +
                    " must divide the expert width " + std::to_string(m.moe->expert_ffn_hidden));
  if (!(d.gpu_memory_utilization > 0 && d.gpu_memory_utilization <= 1))
    bad("--gpu-memory-utilization",
        "must be in (0, 1], got " + std::to_string(d.gpu_memory_utilization));
  if (d.block_size < 1)
    bad("--block-size", "must be at least 1, got " + std::to_string(d.block_size));
  if (d.max_num_seqs < 1)
    bad("--max-num-seqs", "must be at least 1, got " + std::to_string(d.max_num_seqs));
  if (d.max_num_batched_tokens < d.max_num_seqs)
    bad("--max-num-batched-tokens",
        std::to_string(d.max_num_batched_tokens) +
            " is below max-num-seqs=" + std::to_string(d.max_num_seqs),
        "every running sequence must fit one token in a step's budget (vLLM's rule)");
  return out;
}

double kv_bytes_per_token_layer(const ModelSpec& m, int tp) {
  if (m.mla) return kBf16Bytes * (m.mla->kv_lora_rank + m.mla->qk_rope_head_dim);
  const double kv_heads = std::max(1.0, static_cast<double>(m.kv_heads) / tp);
  return 2.0 * kv_heads * m.head_dim * kBf16Bytes;
}

Result<KvBudget> kv_budget(const ModelSpec& m, const HwProfile& hw, const Deployment& d) {
  // Weights of one GPU per layer kind: attention and MLPs split by tp (experts by tp as well:
  // ep ranks hold E/ep whole experts split tp/ep ways, the same share), routers replicated.
  const double wb = weight_bytes(d.precision), tp = d.tp;
  const double attn = attention_params_per_layer(m) / tp;
  const double dense = m.ffn_hidden > 0 ? mlp_params(m, m.ffn_hidden) / tp : 0;
  double moe = 0;
  if (m.moe) {
    const MoeSpec& e = *m.moe;
    const double expert = mlp_params(m, e.expert_ffn_hidden);
    // Wide ep: E/ep whole experts a GPU; the shared experts stay tensor-parallel in a replica.
    const double routed = d.wide_ep() ? e.experts * expert / d.ep : e.experts * expert / tp;
    moe = routed + e.shared_experts * expert / tp + static_cast<double>(m.hidden) * e.experts;
  }
  const double vocab_part = static_cast<double>(m.vocab) * m.hidden / tp;  // vocab-parallel
  // Activations of vLLM's profiling forward over max_num_batched_tokens tokens: the residual
  // and the normed input, the MLP's gate/up output and its activation (the widest layer), and
  // the fp32 logits and probabilities of max_num_seqs sampled rows.
  const double ab = act_bytes(d.precision), t = static_cast<double>(d.max_num_batched_tokens);
  double width = static_cast<double>(m.ffn_hidden);
  if (m.moe)
    width = std::max(width, static_cast<double>(m.moe->top_k + m.moe->shared_experts) *
                                m.moe->expert_ffn_hidden);
  const double act = t * (2.0 * m.hidden + 3.0 * width / tp) * ab +
                     static_cast<double>(d.max_num_seqs) * m.vocab * 2.0 * kFp32Bytes;
  auto gib = [](double x) { return format_fixed(x, 1) + " GiB"; };
  KvBudget best;
  best.blocks = -1;
  for (int s = 0; s < d.pp; ++s) {
    const auto [first, end] = stage_layers(m.layers, d.pp, s);
    double params = 0;
    for (int l = first; l < end; ++l) params += attn + (m.is_moe_layer(l) ? moe : dense);
    if (s == 0) params += vocab_part;
    if (s == d.pp - 1 && (!m.tied_embeddings || d.pp > 1)) params += vocab_part;
    KvBudget b;
    b.block_size = d.block_size;
    b.usable_gib = hw.hbm_gib * d.gpu_memory_utilization;
    b.weights_gib = params * wb / kGiB;
    b.activation_gib = act / kGiB;
    b.reserved_gib = hw.reserved_gib;
    b.kv_gib = b.usable_gib - b.weights_gib - b.activation_gib - b.reserved_gib;
    b.kv_bytes_per_token = kv_bytes_per_token_layer(m, d.tp) * (end - first);
    b.blocks = b.kv_gib > 0 ? static_cast<int64_t>(std::floor(
                                  b.kv_gib * kGiB / (b.kv_bytes_per_token * d.block_size)))
                            : 0;
    if (best.blocks < 0 || b.blocks < best.blocks) best = b;  // the engine takes the minimum
  }
  if (best.blocks <= 0)
    return Diagnostic{"--model",
                      m.name + " does not fit: weights " + gib(best.weights_gib) +
                          " + activations " + gib(best.activation_gib) + " + reserved " +
                          gib(best.reserved_gib) + " leave no KV cache in " + gib(best.usable_gib) +
                          " (" + hw.name + " x " + format_fixed(d.gpu_memory_utilization, 2) + ")",
                      "more --tp or --pp, fp8 weights, or a smaller --max-num-batched-tokens"};
  return best;
}

StepCost::StepCost(const ModelSpec& m, const HwProfile& hw, const Deployment& d)
    : m_(m), d_(d), compute_(hw), comm_(hw) {
  ParallelPlan plan = as_plan(d);
  if (d.wide_ep()) plan.ep = 1;  // the training map folds ep inside dp; wide ep is every GPU
  const RankMap ranks(plan, hw.scale_up_domain);
  tp_shape_ = ranks.shape(GroupKind::kTp);
  pp_pair_ = neighbour_pair(ranks.shape(GroupKind::kPp));
  if (d.wide_ep()) {
    // Every GPU of the deployment, numbered consecutively: whole scale-up domains.
    ep_shape_.size = d.ep;
    ep_shape_.per_domain = hw.scale_up_domain > 0 ? std::min(d.ep, hw.scale_up_domain) : d.ep;
    ep_shape_.domains = (d.ep + ep_shape_.per_domain - 1) / ep_shape_.per_domain;
  }
  moe_layers_ = m.num_moe_layers();
  dense_layers_ = m.layers - moe_layers_;
}

double StepCost::time_s(const StepShape& s) const { return parts(s).total(); }

double StepCost::gemm(double m, double k, double n, double batch) const {
  auto ll = [](double x) { return static_cast<int64_t>(std::llround(std::max(1.0, x))); };
  const GemmShape g{ll(m), ll(n), ll(k), ll(batch)};
  if (d_.precision != Precision::kFp8) return compute_.gemm(g, d_.precision).time_s;
  // fp8 weights: the activation is quantised per step (the weight cast is not repeated).
  return compute_.gemm(g, Precision::kFp8).time_s +
         compute_.fp8_casts(g, GemmPass::kForward, int64_t{1} << 40).time_s;
}

StepCost::Priced StepCost::price(const StepShape& s, bool routed) const {
  Priced out;
  const double t = static_cast<double>(s.tokens());
  if (t <= 0) return out;
  const double ab = act_bytes(d_.precision), h = static_cast<double>(m_.hidden);
  // Every dense layer costs the same, and every MoE layer: each kind is priced once.
  if (dense_layers_ > 0) layer(s, false, false, &out.dense);
  if (moe_layers_ > 0) layer(s, true, routed, &out.moe);
  // Embedding lookup (vocab-parallel: its partial rows are all-reduced over tp).
  out.embed.memory_s += compute_.memory_bound(2 * t * h * ab).time_s;
  if (d_.tp > 1) out.embed.comm_s += comm_.engine_all_reduce(t * h * ab, tp_shape_).time_s;
  // Activations from one pipeline stage to the next.
  if (d_.pp > 1) out.send_s = comm_.time(CollectiveOp::kSendRecv, t * h * ab, pp_pair_).time_s;
  // Output layer on the sampled rows only, their logits gathered over tp, then the sampler
  // (fp32 softmax, top-k/top-p and the draw: about four passes over the logits).
  const double rows = static_cast<double>(std::max<int64_t>(s.sampled, 0));
  if (rows > 0) {
    const double v = static_cast<double>(m_.vocab) / d_.tp;
    double& head = out.head.head_s;
    head += compute_.memory_bound(2 * rows * h * ab).time_s;
    head += compute_
                .gemm(GemmShape{static_cast<int64_t>(rows), static_cast<int64_t>(v), m_.hidden, 1},
                      d_.precision == Precision::kFp32 ? Precision::kFp32 : Precision::kBf16)
                .time_s;
    if (d_.tp > 1)
      head += comm_.time(CollectiveOp::kAllGather, rows * m_.vocab * ab, tp_shape_).time_s;
    head += compute_.memory_bound(4 * rows * m_.vocab * kFp32Bytes).time_s;
  }
  return out;
}

namespace {

void add(StepCost::Parts* to, const StepCost::Parts& p, double times = 1) {
  to->gemm_s += p.gemm_s * times;
  to->attention_s += p.attention_s * times;
  to->memory_s += p.memory_s * times;
  to->comm_s += p.comm_s * times;
  to->head_s += p.head_s * times;
}

}  // namespace

StepCost::Parts StepCost::sum(const Priced& q) const {
  Parts p;
  add(&p, q.dense, dense_layers_);
  add(&p, q.moe, moe_layers_);
  add(&p, q.embed);
  p.comm_s += (d_.pp - 1) * q.send_s;
  add(&p, q.head);
  return p;
}

StepCost::Parts StepCost::parts(const StepShape& s) const { return sum(price(s)); }

void StepCost::stage_times(const StepShape& s, std::vector<double>* stage_s) const {
  const Priced q = price(s);
  stage_s->assign(static_cast<size_t>(d_.pp), 0.0);
  for (int st = 0; st < d_.pp; ++st) {
    const auto [first, end] = stage_layers(m_.layers, d_.pp, st);
    int moe = 0;
    for (int l = first; l < end; ++l) moe += m_.is_moe_layer(l) ? 1 : 0;
    double& x = (*stage_s)[static_cast<size_t>(st)];
    x = (end - first - moe) * q.dense.total() + moe * q.moe.total();
    if (st == 0) x += q.embed.total();
    if (st < d_.pp - 1) x += q.send_s;
    if (st == d_.pp - 1) x += q.head.total();
  }
}

void StepCost::attention(const StepShape& s, Parts* p) const {
  const int64_t qh = m_.heads / d_.tp;
  const int64_t dqk = m_.mla ? m_.mla->qk_nope_head_dim + m_.mla->qk_rope_head_dim : m_.head_dim;
  const int64_t dv = m_.mla ? m_.mla->v_head_dim : m_.head_dim;
  const Precision prec = d_.precision == Precision::kFp32 ? Precision::kFp32 : Precision::kBf16;
  // A prefill chunk attends to the context before it (every pair) and to itself (causally).
  for (const StepShape::Chunk& c : s.prefills) {
    if (c.new_tokens <= 0) continue;
    if (c.context > 0)
      p->attention_s +=
          compute_.attention(qh, c.new_tokens, c.context, dqk, dv, false, false, prec).time_s;
    p->attention_s +=
        compute_.attention(qh, c.new_tokens, c.new_tokens, dqk, dv, true, false, prec).time_s;
  }
  // Decoding sequences read their whole KV cache once (the query heads of a group share it;
  // MLA's heads share the latent): memory-bound unless the math is the longer part.
  if (s.decodes > 0 && s.decode_context > 0) {
    // MLA decodes in the latent space: each head's query meets the latent (and rotary key) of
    // every cached token, and its output is formed there.
    const int64_t d_k = m_.mla ? m_.mla->kv_lora_rank + m_.mla->qk_rope_head_dim : dqk;
    const int64_t d_o = m_.mla ? m_.mla->kv_lora_rank : dv;
    p->attention_s += compute_
                          .decode_attention(s.decode_context, qh, d_k, d_o,
                                            kv_bytes_per_token_layer(m_, d_.tp), prec)
                          .time_s;
  }
}

void StepCost::routed_experts(double tokens, double local, Parts* p) const {
  const MoeSpec& e = *m_.moe;
  const double experts = e.experts, k = e.top_k, h = static_cast<double>(m_.hidden);
  const double ab = act_bytes(d_.precision);
  const bool glu = m_.ffn_act == FfnAct::kSwiglu;
  // This rank's experts (E/ep of them, each split tp/ep ways inside a replica, whole under wide
  // ep) and the tokens routed to them; an expert with no token this step is skipped: of n local
  // experts, n (1 - (1 - k/E)^t) are expected to get one.
  const double n = experts / d_.ep;
  const double w = d_.wide_ep() ? e.expert_ffn_hidden : e.expert_ffn_hidden * d_.ep / d_.tp;
  const double rows = tokens * k * n / experts;
  const double active = std::max(1.0, n * (1 - std::pow(1 - k / experts, tokens)));
  p->gemm_s +=
      gemm(rows / active, h, (glu ? 2 : 1) * w, active) + gemm(rows / active, w, h, active);
  p->memory_s += compute_.memory_bound(rows * w * (glu ? 3 : 2) * ab).time_s;  // activation
  p->memory_s += compute_.memory_bound(2 * local * k * h * ab).time_s;         // unpermute
  if (!d_.wide_ep()) return;
  // Dispatch and combine: each GPU sends its share of its replica's tokens (the tp ranks of a
  // replica hold the same rows), top_k copies of each, and gets the results back; an fp8
  // deployment dispatches fp8 and combines in bf16 (as DeepEP does).
  const double rows_out = local / d_.tp * k * h;
  const double dispatch_b = d_.precision == Precision::kFp8 ? 1.0 : ab;
  p->comm_s += comm_.time(CollectiveOp::kAllToAll, rows_out * dispatch_b, ep_shape_).time_s +
               comm_.time(CollectiveOp::kAllToAll, rows_out * ab, ep_shape_).time_s;
}

double StepCost::lockstep_time_s(const std::vector<StepShape>& shapes) const {
  // One replica alone (a pool of one in a disaggregated wide-ep deployment: its experts over
  // its own tp ranks) steps by itself.
  if (d_.dp == 1 && d_.pp == 1 && shapes.size() == 1 && !d_.wide_ep()) return time_s(shapes[0]);
  PX_CHECK(d_.wide_ep() && d_.pp == 1 && static_cast<int>(shapes.size()) == d_.dp,
           "StepCost::lockstep_time_s: " << shapes.size() << " shapes for dp=" << d_.dp
                                         << " ep=" << d_.ep << " pp=" << d_.pp);
  auto own = [&](const StepShape& s) { return sum(price(s, /*routed=*/false)).total(); };
  double slowest = 0, tokens = 0, most = 0;
  for (const StepShape& s : shapes) {
    const auto t = static_cast<double>(s.tokens());
    tokens += t;
    most = std::max(most, t);
    if (!d_.two_batch_overlap) {
      slowest = std::max(slowest, own(s));
      continue;
    }
    // Two micro-batches, each about half the sequences, run one after the other.
    StepShape half[2];
    for (size_t i = 0; i < s.prefills.size(); ++i) half[i % 2].prefills.push_back(s.prefills[i]);
    half[0].decodes = (s.decodes + 1) / 2;
    half[1].decodes = s.decodes - half[0].decodes;
    const double per_decode = s.decodes > 0 ? s.decode_context / static_cast<double>(s.decodes) : 0;
    for (StepShape& x : half) x.decode_context = per_decode * static_cast<double>(x.decodes);
    half[0].sampled = (s.sampled + 1) / 2;
    half[1].sampled = s.sampled - half[0].sampled;
    slowest = std::max(slowest, own(half[0]) + own(half[1]));
  }
  if (tokens <= 0 || moe_layers_ == 0) return slowest;
  if (!d_.two_batch_overlap) {
    // The all-to-alls wait for the replica with the most tokens.
    Parts routed;
    routed_experts(tokens, most, &routed);
    return slowest + moe_layers_ * routed.total();
  }
  // Two-batch overlap (vLLM's DBO, SGLang's TBO): one micro-batch's dispatch and combine run
  // while the other computes, so the step is the longer of all the compute and all the
  // all-to-alls, plus the shorter one's share of one layer (the pipeline's fill).
  Parts half;
  routed_experts(tokens / 2, most / 2, &half);
  const double compute = slowest + 2 * moe_layers_ * (half.total() - half.comm_s);
  const double comm = 2 * moe_layers_ * half.comm_s;
  return std::max(compute, comm) + std::min(compute, comm) / (2 * moe_layers_);
}

void StepCost::layer(const StepShape& s, bool moe, bool routed, Parts* p) const {
  const double t = static_cast<double>(s.tokens());
  const double ab = act_bytes(d_.precision), h = static_cast<double>(m_.hidden), tp = d_.tp;
  const double qh = static_cast<double>(m_.heads) / tp;
  const double kvh = m_.mla ? qh : std::max(1.0, static_cast<double>(m_.kv_heads) / tp);
  const double all_reduce = d_.tp > 1 ? comm_.engine_all_reduce(t * h * ab, tp_shape_).time_s : 0;
  auto mem = [&](double bytes) { p->memory_s += compute_.memory_bound(bytes).time_s; };
  // Attention block: norm, projections, rotary, attention, output projection, all-reduce, add.
  mem(2 * t * h * ab);
  if (m_.mla) {
    const MlaSpec& a = *m_.mla;
    if (a.q_lora_rank > 0) {
      p->gemm_s += gemm(t, h, a.q_lora_rank) +
                   gemm(t, a.q_lora_rank, qh * (a.qk_nope_head_dim + a.qk_rope_head_dim));
      mem(2 * t * a.q_lora_rank * ab);
    } else {
      p->gemm_s += gemm(t, h, qh * (a.qk_nope_head_dim + a.qk_rope_head_dim));
    }
    p->gemm_s += gemm(t, h, a.kv_lora_rank + a.qk_rope_head_dim);
    mem(2 * t * a.kv_lora_rank * ab);
    p->gemm_s += gemm(t, a.kv_lora_rank, qh * (a.qk_nope_head_dim + a.v_head_dim));
    p->gemm_s += gemm(t, qh * a.v_head_dim, h);
  } else {
    p->gemm_s += gemm(t, h, (qh + 2 * kvh) * m_.head_dim);
    mem(2 * t * (qh + kvh) * m_.head_dim * ab);  // rotary on q and k
    p->gemm_s += gemm(t, qh * m_.head_dim, h);
  }
  attention(s, p);
  p->comm_s += all_reduce;
  mem(3 * t * h * ab);
  // MLP block: norm, then a dense SwiGLU/GELU MLP or routed experts plus shared experts.
  mem(2 * t * h * ab);
  const bool glu = m_.ffn_act == FfnAct::kSwiglu;
  if (!moe) {
    const double w = static_cast<double>(m_.ffn_hidden) / tp;
    p->gemm_s += gemm(t, h, (glu ? 2 : 1) * w) + gemm(t, w, h);
    mem(t * w * (glu ? 3 : 2) * ab);
  } else {
    const MoeSpec& e = *m_.moe;
    const double experts = e.experts, k = e.top_k;
    p->gemm_s +=
        compute_.gemm(GemmShape{static_cast<int64_t>(t), e.experts, m_.hidden, 1}, Precision::kBf16)
            .time_s;
    mem(t * experts * 3 * kFp32Bytes + 2 * t * k * h * ab);  // top-k, permute
    if (routed) routed_experts(t, t, p);
    if (e.shared_experts > 0) {
      const double ws = static_cast<double>(e.shared_experts) * e.expert_ffn_hidden / tp;
      p->gemm_s += gemm(t, h, (glu ? 2 : 1) * ws) + gemm(t, ws, h);
      mem(t * ws * (glu ? 3 : 2) * ab);
    }
  }
  p->comm_s += all_reduce;  // the MLP's (or the experts' and shared experts') partial sums
  mem(3 * t * h * ab);
}

}  // namespace parallax::serving
