// Transformer<T>'s layout of the flat parameter buffer (which tensors, where, and which block
// of each a tensor- or expert-parallel rank holds), its deterministic initialisation, and the
// executable shape of a ModelSpec. The passes are in model.cc.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "executor/model.h"

namespace parallax::exec {

Result<ModelShape> executable_shape(const ModelSpec& m) {
  const std::string where = m.name.empty() ? std::string("model") : m.name;
  Diagnostics d = validate_model(m, where);
  const char* hint = "the executor runs Llama-style decoders (GQA, RoPE, SwiGLU), dense or MoE";
  if (m.mla)
    d.push_back({where + "/mla", "MLA (multi-head latent attention) is not executed yet", hint});
  if (m.ffn_act != FfnAct::kSwiglu)
    d.push_back({where + "/ffn_act", "only SwiGLU MLPs are executed, got gelu", hint});
  if (!m.mla && m.head_dim % 2 != 0)
    d.push_back({where + "/head_dim",
                 "rotary embeddings need an even head_dim, got " + std::to_string(m.head_dim), ""});
  if (!d.empty()) return d;
  ModelShape s;
  s.layers = m.layers;
  s.hidden = m.hidden;
  s.heads = m.heads;
  s.kv_heads = m.kv_heads;
  s.head_dim = m.head_dim;
  s.ffn_hidden = m.ffn_hidden;
  s.vocab = m.vocab;
  s.tied_embeddings = m.tied_embeddings;
  if (m.moe) {  // validate_model checked the ranges (top_k in [1, experts], ...)
    s.moe.experts = m.moe->experts;
    s.moe.top_k = m.moe->top_k;
    s.moe.expert_ffn_hidden = m.moe->expert_ffn_hidden;
    s.moe.shared_experts = m.moe->shared_experts;
    s.moe.dense_layers = m.moe->dense_layers;
  }
  // rope_theta, norm_eps and aux_loss_coeff keep their defaults: ModelSpec does not record them.
  return s;
}

namespace {

using detail::BlockSlots;

// How a tensor is split: replicated over tp; column or row blocks over tp; row blocks over ep
// (replicated over tp).
/// How a tensor is cut: by tensor-parallel columns or rows, or by experts (rows, expert-major)
/// and, under expert tensor parallelism, also by tensor-parallel columns (experts' gate and up,
/// kExpertColumns) or rows (experts' down projection, stored width x (experts * hidden) so that
/// both cuts are blocks, kExpertRows: the experts are then column blocks).
enum class Split { kNone, kColumns, kRows, kExperts, kExpertColumns, kExpertRows };

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Standard normal samples by Box-Muller over std::mt19937_64, whose output sequence the C++
/// standard fixes (std::normal_distribution's algorithm is left to the library).
class NormalSampler {
 public:
  explicit NormalSampler(uint64_t seed) : rng_(seed) {}
  double operator()() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = uniform(), u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2 * std::numbers::pi * u2);
    has_spare_ = true;
    return r * std::cos(2 * std::numbers::pi * u2);
  }

 private:
  double uniform() { return (static_cast<double>(rng_() >> 11) + 0.5) * 0x1.0p-53; }  // (0, 1)
  std::mt19937_64 rng_;
  double spare_ = 0;
  bool has_spare_ = false;
};

}  // namespace

template <typename T>
Transformer<T>::Transformer(const ModelShape& shape, TensorParallel<T> tp, StageRange stage,
                            ContextParallel<T> cp, ExpertParallel<T> ep)
    : shape_(shape), tp_(std::move(tp)), stage_(stage), cp_(std::move(cp)), ep_(std::move(ep)) {
  const ModelShape& s = shape;
  const MoeShape& moe = s.moe;
  const bool any_dense = moe.experts == 0 || moe.dense_layers > 0;
  PX_CHECK(s.layers > 0 && s.hidden > 0 && s.heads > 0 && s.kv_heads > 0 && s.head_dim > 0 &&
               (s.ffn_hidden > 0 || !any_dense) && s.vocab > 0,
           "every dimension of the model shape must be positive");
  PX_CHECK(s.heads % s.kv_heads == 0,
           "kv_heads=" << s.kv_heads << " must divide heads=" << s.heads);
  PX_CHECK(s.head_dim % 2 == 0, "rotary embeddings need an even head_dim, got " << s.head_dim);
  PX_CHECK(moe.experts >= 0, "moe experts must be >= 0, got " << moe.experts);
  if (moe.experts > 0) {
    PX_CHECK(moe.top_k >= 1 && moe.top_k <= moe.experts,
             "moe top_k=" << moe.top_k << " must be in [1, experts=" << moe.experts << "]");
    PX_CHECK(moe.expert_ffn_hidden > 0 && moe.shared_experts >= 0,
             "moe expert_ffn_hidden=" << moe.expert_ffn_hidden
                                      << " must be positive, shared_experts=" << moe.shared_experts
                                      << " >= 0");
    PX_CHECK(
        moe.dense_layers >= 0 && moe.dense_layers < s.layers,
        "moe dense_layers=" << moe.dense_layers << " must be in [0, layers=" << s.layers << ")");
    PX_CHECK(moe.aux_loss_coeff >= 0,
             "moe aux_loss_coeff must be >= 0, got " << moe.aux_loss_coeff);
  }
  const int64_t tps = tp_.size;
  const int64_t width = moe.expert_ffn_hidden, shared = moe.shared_experts * width;
  PX_CHECK(tps >= 1 && tp_.rank >= 0 && tp_.rank < tps,
           "tensor-parallel rank " << tp_.rank << " of " << tps);
  PX_CHECK(
      s.kv_heads % tps == 0 && (!any_dense || s.ffn_hidden % tps == 0),
      "tp=" << tps << " must divide kv_heads=" << s.kv_heads << " and ffn_hidden=" << s.ffn_hidden);
  PX_CHECK(moe.experts == 0 || shared % tps == 0,
           "tp=" << tps << " must divide the shared experts' width " << shared);
  PX_CHECK(tps == 1 || tp_.all_reduce, "tensor parallelism needs an all-reduce");
  PX_CHECK(cp_.size >= 1 && cp_.rank >= 0 && cp_.rank < cp_.size &&
               (cp_.size == 1 || (cp_.all_gather && cp_.reduce_scatter)),
           "context-parallel rank " << cp_.rank << " of " << cp_.size
                                    << " needs an all-gather and a reduce-scatter");
  PX_CHECK(ep_.size >= 1 && ep_.rank >= 0 && ep_.rank < ep_.size &&
               (moe.experts == 0 || moe.experts % ep_.size == 0),
           "expert-parallel rank " << ep_.rank << " of " << ep_.size
                                   << ": ep must divide experts=" << moe.experts);
  PX_CHECK(ep_.tensor == 1 || (ep_.tensor == tps && ep_.tensor_all_reduce && moe.experts > 0 &&
                               width % ep_.tensor == 0),
           "expert tensor parallelism " << ep_.tensor << " needs a MoE model, etp = tp (" << tps
                                        << ") dividing the expert width " << width
                                        << " and an all-reduce");
  if (stage_.end_layer < 0) stage_.end_layer = s.layers;
  PX_CHECK(
      0 <= stage_.first_layer && stage_.first_layer <= stage_.end_layer &&
          stage_.end_layer <= s.layers,
      "stage layers [" << stage_.first_layer << ", " << stage_.end_layer << ") of " << s.layers);
  const bool stage_moe =
      moe.experts > 0 && stage_.end_layer > std::max(stage_.first_layer, moe.dense_layers);
  PX_CHECK(!stage_moe || cp_.size == 1 || cp_.all_reduce,
           "context parallelism of MoE layers needs an all-reduce (the router statistics)");
  PX_CHECK(!stage_moe || ep_.size == 1 || (ep_.all_to_all && ep_.all_to_all_counts),
           "expert parallelism needs an all-to-all and an all-to-all of counts");
  PX_CHECK(!tp_.sequence_parallel || tps == 1 || (tp_.all_gather && tp_.reduce_scatter),
           "sequence parallelism needs an all-gather and a reduce-scatter");
  PX_CHECK(!stage_moe || !tp_.sequence_parallel || ep_.tensor == 1 ||
               (ep_.tensor_all_gather && ep_.tensor_reduce_scatter && ep_.tensor_all_gather_counts),
           "sequence parallelism with split experts needs the expert tensor group's all-gather, "
           "reduce-scatter and all-gather of counts");

  using enum Split;
  int64_t index = 0;  // in the whole model's layout
  auto add = [&](std::string name, int64_t rows, int64_t cols, Split split, bool here) {
    const int64_t i = index++;
    if (!here) return int64_t{-1};
    TensorSlot t{std::move(name),
                 num_params_,
                 rows,
                 cols,
                 i,
                 rows,
                 cols,
                 0,
                 0,
                 split == kNone || (split >= kExperts && ep_.tensor == 1),
                 split >= kExperts};
    if (split == kColumns) {
      t.cols = cols / tps;
      t.col0 = t.cols * tp_.rank;
    } else if (split == kRows) {
      t.rows = rows / tps;
      t.row0 = t.rows * tp_.rank;
    } else if (split == kExperts || split == kExpertColumns) {
      t.rows = rows / ep_.size;
      t.row0 = t.rows * ep_.rank;
      if (split == kExpertColumns) {
        t.cols = cols / ep_.tensor;
        t.col0 = t.cols * (ep_.tensor > 1 ? tp_.rank : 0);
      }
    } else if (split == kExpertRows) {
      t.cols = cols / ep_.size;
      t.col0 = t.cols * ep_.rank;
      t.rows = rows / ep_.tensor;
      t.row0 = t.rows * (ep_.tensor > 1 ? tp_.rank : 0);
    }
    num_params_ += t.size();
    layout_.push_back(std::move(t));
    return static_cast<int64_t>(layout_.size()) - 1;
  };
  const int64_t h = s.hidden, q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim;
  add("embed", s.vocab, h, kNone, stage_.embed || (stage_.head && s.tied_embeddings));
  for (int64_t l = 0; l < s.layers; ++l) {
    const bool here = l >= stage_.first_layer && l < stage_.end_layer;
    const std::string prefix = "layers." + std::to_string(l) + ".";
    BlockSlots b;
    b.attn_norm = add(prefix + "attn_norm", 1, h, kNone, here);
    b.wq = add(prefix + "wq", h, q, kColumns, here);
    b.wk = add(prefix + "wk", h, kv, kColumns, here);
    b.wv = add(prefix + "wv", h, kv, kColumns, here);
    b.wo = add(prefix + "wo", q, h, kRows, here);
    b.mlp_norm = add(prefix + "mlp_norm", 1, h, kNone, here);
    if (!s.is_moe_layer(l)) {
      b.w_gate = add(prefix + "w_gate", h, s.ffn_hidden, kColumns, here);
      b.w_up = add(prefix + "w_up", h, s.ffn_hidden, kColumns, here);
      b.w_down = add(prefix + "w_down", s.ffn_hidden, h, kRows, here);
    } else {
      const int64_t e = moe.experts;
      b.router = add(prefix + "router", h, e, kNone, here);
      b.experts_gate = add(prefix + "experts.w_gate", e * h, width, kExpertColumns, here);
      b.experts_up = add(prefix + "experts.w_up", e * h, width, kExpertColumns, here);
      b.experts_down = add(prefix + "experts.w_down", width, e * h, kExpertRows, here);
      if (shared > 0) {
        b.w_gate = add(prefix + "shared.w_gate", h, shared, kColumns, here);
        b.w_up = add(prefix + "shared.w_up", h, shared, kColumns, here);
        b.w_down = add(prefix + "shared.w_down", shared, h, kRows, here);
      }
    }
    if (here) blocks_.push_back(b);
  }
  final_norm_ = add("final_norm", 1, h, kNone, stage_.head);
  if (!s.tied_embeddings) add("output", h, s.vocab, kNone, stage_.head);
}

template <typename T>
void Transformer<T>::init(std::span<T> params, uint64_t seed) const {
  init(params, seed, 0, num_params_);
}

template <typename T>
void Transformer<T>::init(std::span<T> params, uint64_t seed, int64_t begin, int64_t end) const {
  PX_CHECK(static_cast<int64_t>(params.size()) == num_params_,
           "params has " << params.size() << " values, the model " << num_params_);
  constexpr double kStd = 0.02;
  // GPT-2's scaling: the projections that write into the residual stream, once per block.
  const double residual_std = kStd / std::sqrt(2.0 * static_cast<double>(shape_.layers));
  for (const TensorSlot& t : layout_) {
    if (t.offset + t.size() <= begin || t.offset >= end) continue;
    const std::span<T> out =
        params.subspan(static_cast<size_t>(t.offset), static_cast<size_t>(t.size()));
    // attn_norm, mlp_norm, final_norm; wo, w_down, experts.w_down, shared.w_down.
    if (t.name.ends_with("norm")) {
      std::fill(out.begin(), out.end(), T(1));
      continue;
    }
    const bool residual = t.name.ends_with(".wo") || t.name.ends_with("w_down");
    const double sd = residual ? residual_std : kStd;
    // One stream per tensor, from its index in the whole model's layout: a tensor's values
    // depend on the seed and its place only. A shard draws the whole tensor's stream (up to its
    // last row) and keeps its block.
    NormalSampler normal(splitmix64(seed ^ splitmix64(static_cast<uint64_t>(t.index) + 1)));
    for (int64_t r = 0; r < t.row0 + t.rows; ++r) {
      for (int64_t c = 0; c < t.full_cols; ++c) {
        const double x = sd * normal();
        if (r >= t.row0 && c >= t.col0 && c < t.col0 + t.cols)
          out[static_cast<size_t>((r - t.row0) * t.cols + (c - t.col0))] = static_cast<T>(x);
      }
    }
  }
}

template <typename T>
std::pair<int64_t, int64_t> Transformer<T>::unit_range(int64_t unit) const {
  if (unit == ParamUnits::kEmbedUnit) {
    if (!stage_.embed && !(stage_.head && shape_.tied_embeddings)) return {0, 0};
    const TensorSlot& e = layout_.front();
    return {e.offset, e.offset + e.size()};
  }
  if (unit == ParamUnits::kHeadUnit) {
    if (!stage_.head) return {0, 0};
    return {layout_[static_cast<size_t>(final_norm_)].offset, num_params_};
  }
  PX_CHECK(unit >= stage_.first_layer && unit < stage_.end_layer,
           "unit " << unit << " outside the stage's layers [" << stage_.first_layer << ", "
                   << stage_.end_layer << ")");
  const detail::BlockSlots& b = blocks_[static_cast<size_t>(unit - stage_.first_layer)];
  int64_t begin = num_params_, end = 0;
  for (const int64_t i : {b.attn_norm, b.wq, b.wk, b.wv, b.wo, b.mlp_norm, b.w_gate, b.w_up,
                          b.w_down, b.router, b.experts_gate, b.experts_up, b.experts_down}) {
    if (i < 0) continue;
    const TensorSlot& t = layout_[static_cast<size_t>(i)];
    begin = std::min(begin, t.offset);
    end = std::max(end, t.offset + t.size());
  }
  return {begin, end};
}

template Transformer<float>::Transformer(const ModelShape&, TensorParallel<float>, StageRange,
                                         ContextParallel<float>, ExpertParallel<float>);
template Transformer<double>::Transformer(const ModelShape&, TensorParallel<double>, StageRange,
                                          ContextParallel<double>, ExpertParallel<double>);
template void Transformer<float>::init(std::span<float>, uint64_t) const;
template void Transformer<double>::init(std::span<double>, uint64_t) const;
template void Transformer<float>::init(std::span<float>, uint64_t, int64_t, int64_t) const;
template void Transformer<double>::init(std::span<double>, uint64_t, int64_t, int64_t) const;
template std::pair<int64_t, int64_t> Transformer<float>::unit_range(int64_t) const;
template std::pair<int64_t, int64_t> Transformer<double>::unit_range(int64_t) const;

}  // namespace parallax::exec
