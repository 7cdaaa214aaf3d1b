// Transformer<T>: the layout of the flat parameter buffer, deterministic initialisation, and the
// forward and backward passes, composed from the operators of model_ops.h. GEMMs go through
// Eigen maps over the flat buffers, so parameters and gradients are never copied.

#include "executor/model.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <numbers>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "executor/model_ops.h"  // also Eigen, with the alignment every user here must share

namespace parallax::exec {

Result<ModelShape> executable_shape(const ModelSpec& m) {
  const std::string where = m.name.empty() ? std::string("model") : m.name;
  Diagnostics d = validate_model(m, where);
  const char* hint = "the executor runs dense Llama-style decoders (GQA, RoPE, SwiGLU)";
  if (m.moe) d.push_back({where + "/moe", "MoE layers are not executed yet", hint});
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
  return s;  // rope_theta and norm_eps keep their defaults: ModelSpec does not record them
}

namespace {

using ops::RowMatrix;

// The tensors of one block, in layout order: block i's tensor t is layout()[1 + 9 i + t].
enum class BlockTensor { kAttnNorm, kWq, kWk, kWv, kWo, kMlpNorm, kWGate, kWUp, kWDown };
constexpr int64_t kPerBlock = 9;
constexpr const char* kBlockTensorNames[kPerBlock] = {"attn_norm", "wq",     "wk",   "wv",    "wo",
                                                      "mlp_norm",  "w_gate", "w_up", "w_down"};

// Logits are computed this many entries at a time (rows of vocab), so that a large vocabulary
// does not hold tokens x vocab floats at once.
constexpr int64_t kLogitChunk = int64_t{1} << 21;

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

template <typename T>
Eigen::Map<const RowMatrix<T>> mat(std::span<const T> buf, const TensorSlot& s) {
  return Eigen::Map<const RowMatrix<T>>(buf.data() + s.offset, s.rows, s.cols);
}
template <typename T>
Eigen::Map<RowMatrix<T>> mat(std::span<T> buf, const TensorSlot& s) {
  return Eigen::Map<RowMatrix<T>>(buf.data() + s.offset, s.rows, s.cols);
}
template <typename S>
std::span<S> vec(std::span<S> buf, const TensorSlot& s) {
  return buf.subspan(static_cast<size_t>(s.offset), static_cast<size_t>(s.size()));
}

}  // namespace

namespace detail {

/// What one block's backward needs from its forward; rows are tokens.
template <typename T>
struct BlockActs {
  RowMatrix<T> x_attn, x_mlp;  // the block's inputs to its two norms (training only)
  RowMatrix<T> q, k, v;        // after rotary embedding
  RowMatrix<T> attn;           // attention output, before wo
  RowMatrix<T> gate, up;       // before SwiGLU
  std::vector<T> rstd_attn, rstd_mlp, lse;
};

template <typename T>
struct PassInput {
  std::span<const T> params;
  std::span<const int32_t> tokens;  ///< batch rows of seq + 1 ids
  int64_t batch = 0, seq = 0;
  bool train = false;  ///< keep every block's activations and allocate backward buffers
};

/// One forward (and, when training, backward) pass of a Transformer (or of one pipeline stage
/// of it) over one batch. The residual stream h_ turns into its gradient during the backward.
template <typename T>
class Pass {
 public:
  Pass(const Transformer<T>& model, const PassInput<T>& in);

  /// Embedding (or `input`, the previous stage's output), blocks and, on the head stage, the
  /// final norm.
  void forward(std::span<const T> input = {});
  /// The summed loss; with `grads` (training), also the gradient of the final norm's output,
  /// scaled by grad_scale, and the output layer's (or tied embedding's) gradient.
  double head(T grad_scale, std::span<T> grads, std::span<double> row_losses);
  /// From the final norm (head() must have run with grads) or from `d_output` down to the
  /// embedding or the stage's input.
  void backward(std::span<T> grads, std::span<const T> d_output = {});
  const StageRange& stage() const { return stage_; }
  /// The residual stream: the stage's output after forward, its input gradient after backward.
  std::span<const T> stream() const { return {h_.data(), static_cast<size_t>(h_.size())}; }

 private:
  const TensorSlot& slot(int64_t layer, BlockTensor t) const {
    return layout_[static_cast<size_t>(block_base_ + kPerBlock * (layer - stage_.first_layer) +
                                       static_cast<int64_t>(t))];
  }
  const TensorSlot& final_norm() const {
    return layout_[static_cast<size_t>(block_base_ +
                                       kPerBlock * (stage_.end_layer - stage_.first_layer))];
  }
  void forward_block(int64_t layer, BlockActs<T>& a);
  void backward_mlp(int64_t layer, const BlockActs<T>& a, std::span<T> grads);
  void backward_attention(int64_t layer, const BlockActs<T>& a, std::span<T> grads);

  /// Sums a block's partial output (or input gradient) over the tensor-parallel group.
  void tp_reduce(RowMatrix<T>& m) const {
    if (tp_.size > 1) tp_.all_reduce(std::span<T>(m.data(), static_cast<size_t>(m.size())));
  }

  /// K or V of every context-parallel rank, in sequence order: `local` is this rank's
  /// (batch * seq) rows, `full` receives batch * seq * cp rows.
  void cp_gather(const RowMatrix<T>& local, RowMatrix<T>& full);
  /// The gradient of gathered rows back to their owners, summed over the group.
  void cp_scatter(const RowMatrix<T>& full, RowMatrix<T>& local);

  const ModelShape& shape_;
  const TensorParallel<T>& tp_;
  const ContextParallel<T>& cp_;
  const StageRange& stage_;
  const int64_t block_base_;              // layout index of the stage's first block tensor
  const int64_t heads_, kv_heads_, ffn_;  // this rank's shard of the blocks
  const std::vector<TensorSlot>& layout_;
  const PassInput<T> in_;
  const int64_t n_;  // tokens in the batch: batch * seq rows
  const T eps_;
  ops::AttentionShape attn_shape_;
  ops::RotaryTable<T> rope_;
  std::vector<int32_t> inputs_, targets_;
  std::vector<BlockActs<T>> acts_;  // one per block when training, else one reused by all
  RowMatrix<T> h_, x_final_, xf_;   // residual stream; final norm's input and output
  std::vector<T> rstd_final_;
  // Per-call workspace shared by the blocks (normed input, SwiGLU output, gradients).
  RowMatrix<T> xn_, act_, d_xn_, d_q_, d_k_, d_v_, d_attn_, d_act_, d_gate_, d_up_;
  // Context parallelism: gathered K, V, their gradients, and the rank-ordered staging buffer.
  RowMatrix<T> k_all_, v_all_, dk_all_, dv_all_, cp_buf_;
  std::vector<T> rstd_;
};

template <typename T>
Pass<T>::Pass(const Transformer<T>& model, const PassInput<T>& in)
    : shape_(model.shape()),
      tp_(model.tensor_parallel()),
      cp_(model.context_parallel()),
      stage_(model.stage()),
      block_base_(model.layout().front().name == "embed" ? 1 : 0),
      heads_(shape_.heads / tp_.size),
      kv_heads_(shape_.kv_heads / tp_.size),
      ffn_(shape_.ffn_hidden / tp_.size),
      layout_(model.layout()),
      in_(in),
      n_(in.batch * in.seq),
      eps_(static_cast<T>(model.shape().norm_eps)),
      attn_shape_{in.batch,
                  in.seq,
                  heads_,
                  kv_heads_,
                  shape_.head_dim,
                  in.seq * model.context_parallel().size,
                  in.seq * model.context_parallel().rank},
      rope_(in.seq, shape_.head_dim, shape_.rope_theta, attn_shape_.q_offset) {
  PX_CHECK(in.batch > 0 && in.seq > 0,
           "batch and seq must be positive, got batch=" << in.batch << " seq=" << in.seq);
  PX_CHECK(static_cast<int64_t>(in.params.size()) == model.num_params(),
           "params has " << in.params.size() << " values, the model " << model.num_params());
  PX_CHECK(static_cast<int64_t>(in.tokens.size()) == in.batch * (in.seq + 1),
           "tokens has " << in.tokens.size()
                         << " ids, want batch * (seq + 1) = " << in.batch * (in.seq + 1));
  const int64_t h = shape_.hidden, q_cols = heads_ * shape_.head_dim,
                kv_cols = kv_heads_ * shape_.head_dim, f = ffn_;
  inputs_.resize(static_cast<size_t>(n_));
  targets_.resize(static_cast<size_t>(n_));
  for (int64_t b = 0; b < in.batch; ++b) {
    for (int64_t s = 0; s < in.seq; ++s) {
      inputs_[b * in.seq + s] = in.tokens[b * (in.seq + 1) + s];
      targets_[b * in.seq + s] = in.tokens[b * (in.seq + 1) + s + 1];
    }
  }
  for (int32_t t : in.tokens)
    PX_CHECK(t >= 0 && t < shape_.vocab, "token " << t << " outside [0, " << shape_.vocab << ")");
  acts_.resize(in.train ? static_cast<size_t>(stage_.end_layer - stage_.first_layer) : 1);
  const auto rows = static_cast<size_t>(n_);
  for (BlockActs<T>& a : acts_) {
    if (in.train) {
      a.x_attn.resize(n_, h);
      a.x_mlp.resize(n_, h);
    }
    a.q.resize(n_, q_cols);
    a.k.resize(n_, kv_cols);
    a.v.resize(n_, kv_cols);
    a.attn.resize(n_, q_cols);
    a.gate.resize(n_, f);
    a.up.resize(n_, f);
    a.rstd_attn.resize(rows);
    a.rstd_mlp.resize(rows);
    a.lse.resize(rows * static_cast<size_t>(heads_));
  }
  for (RowMatrix<T>* m : {&h_, &xf_, &xn_}) m->resize(n_, h);
  if (cp_.size > 1) {
    for (RowMatrix<T>* m : {&k_all_, &v_all_, &cp_buf_}) m->resize(n_ * cp_.size, kv_cols);
    if (in.train)
      for (RowMatrix<T>* m : {&dk_all_, &dv_all_}) m->resize(n_ * cp_.size, kv_cols);
  }
  act_.resize(n_, f);
  rstd_final_.resize(rows);
  rstd_.resize(rows);
  if (!in.train) return;
  for (RowMatrix<T>* m : {&x_final_, &d_xn_}) m->resize(n_, h);
  for (RowMatrix<T>* m : {&d_q_, &d_attn_}) m->resize(n_, q_cols);
  for (RowMatrix<T>* m : {&d_k_, &d_v_}) m->resize(n_, kv_cols);
  for (RowMatrix<T>* m : {&d_act_, &d_gate_, &d_up_}) m->resize(n_, f);
}

template <typename T>
void Pass<T>::cp_gather(const RowMatrix<T>& local, RowMatrix<T>& full) {
  const int64_t seq = in_.seq, cols = local.cols();
  cp_.all_gather(std::span<const T>(local.data(), static_cast<size_t>(local.size())),
                 std::span<T>(cp_buf_.data(), static_cast<size_t>(cp_buf_.size())));
  // cp_buf_ holds rank r's (batch x seq) rows at r * n_; full wants sequence b's positions of
  // rank r at b * seq * cp + r * seq.
  for (int64_t r = 0; r < cp_.size; ++r)
    for (int64_t b = 0; b < in_.batch; ++b)
      full.block((b * cp_.size + r) * seq, 0, seq, cols) =
          cp_buf_.block(r * n_ + b * seq, 0, seq, cols);
}

template <typename T>
void Pass<T>::cp_scatter(const RowMatrix<T>& full, RowMatrix<T>& local) {
  const int64_t seq = in_.seq, cols = full.cols();
  for (int64_t r = 0; r < cp_.size; ++r)
    for (int64_t b = 0; b < in_.batch; ++b)
      cp_buf_.block(r * n_ + b * seq, 0, seq, cols) =
          full.block((b * cp_.size + r) * seq, 0, seq, cols);
  cp_.reduce_scatter(std::span<const T>(cp_buf_.data(), static_cast<size_t>(cp_buf_.size())),
                     std::span<T>(local.data(), static_cast<size_t>(local.size())));
}

template <typename T>
void Pass<T>::forward(std::span<const T> input) {
  if (stage_.embed) {
    const auto embed = mat(in_.params, layout_.front());
    for (int64_t r = 0; r < n_; ++r) h_.row(r) = embed.row(inputs_[r]);
  } else {
    PX_CHECK(static_cast<int64_t>(input.size()) == h_.size(),
             "stage input has " << input.size() << " values, want " << h_.size());
    h_ = Eigen::Map<const RowMatrix<T>>(input.data(), n_, shape_.hidden);
  }
  for (int64_t l = stage_.first_layer; l < stage_.end_layer; ++l)
    forward_block(l, acts_[in_.train ? l - stage_.first_layer : 0]);
  if (!stage_.head) return;
  if (in_.train) x_final_ = h_;
  ops::rms_norm_forward<T>(h_, vec(in_.params, final_norm()), eps_, xf_, rstd_final_);
}

// h += attention(rope(norm(h) wq), rope(norm(h) wk), norm(h) wv) wo;
// h += swiglu(norm(h) w_gate, norm(h) w_up) w_down   (rows are tokens: x W throughout).
template <typename T>
void Pass<T>::forward_block(int64_t layer, BlockActs<T>& a) {
  using enum BlockTensor;
  const auto& p = in_.params;
  if (in_.train) a.x_attn = h_;
  ops::rms_norm_forward<T>(h_, vec(p, slot(layer, kAttnNorm)), eps_, xn_, a.rstd_attn);
  a.q.noalias() = xn_ * mat(p, slot(layer, kWq));
  a.k.noalias() = xn_ * mat(p, slot(layer, kWk));
  a.v.noalias() = xn_ * mat(p, slot(layer, kWv));
  rope_.rotate(a.q, heads_, false);
  rope_.rotate(a.k, kv_heads_, false);
  if (cp_.size == 1) {
    ops::attention_forward<T>(attn_shape_, a.q, a.k, a.v, a.attn, a.lse);
  } else {
    cp_gather(a.k, k_all_);
    cp_gather(a.v, v_all_);
    ops::attention_forward<T>(attn_shape_, a.q, k_all_, v_all_, a.attn, a.lse);
  }
  if (tp_.size == 1) {
    h_.noalias() += a.attn * mat(p, slot(layer, kWo));
  } else {  // this rank's heads' share of the projection, summed over the group
    xn_.noalias() = a.attn * mat(p, slot(layer, kWo));
    tp_reduce(xn_);
    h_ += xn_;
  }

  if (in_.train) a.x_mlp = h_;
  ops::rms_norm_forward<T>(h_, vec(p, slot(layer, kMlpNorm)), eps_, xn_, a.rstd_mlp);
  a.gate.noalias() = xn_ * mat(p, slot(layer, kWGate));
  a.up.noalias() = xn_ * mat(p, slot(layer, kWUp));
  ops::swiglu_forward<T>(a.gate, a.up, act_);
  if (tp_.size == 1) {
    h_.noalias() += act_ * mat(p, slot(layer, kWDown));
  } else {
    xn_.noalias() = act_ * mat(p, slot(layer, kWDown));
    tp_reduce(xn_);
    h_ += xn_;
  }
}

template <typename T>
double Pass<T>::head(T grad_scale, std::span<T> grads, std::span<double> row_losses) {
  const bool tied = shape_.tied_embeddings;
  const TensorSlot& out_slot = tied ? layout_.front() : layout_.back();
  const auto w = mat(in_.params, out_slot);  // hidden x vocab; vocab x hidden when tied
  const int64_t chunk = std::clamp<int64_t>(kLogitChunk / shape_.vocab, 1, n_);
  RowMatrix<T> logits(chunk, shape_.vocab);
  double total = 0;
  for (int64_t r0 = 0; r0 < n_; r0 += chunk) {
    const int64_t rows = std::min(chunk, n_ - r0);
    auto z = logits.topRows(rows);
    const auto x = xf_.middleRows(r0, rows);
    if (tied) {
      z.noalias() = x * w.transpose();
    } else {
      z.noalias() = x * w;
    }
    const std::span<const int32_t> t(targets_.data() + r0, static_cast<size_t>(rows));
    if (grads.empty()) {
      total += ops::cross_entropy_forward<T>(
          z, t, row_losses.empty() ? row_losses : row_losses.subspan(r0, rows));
      continue;
    }
    total += ops::cross_entropy_backward<T>(z, t, grad_scale, z);  // z now holds dlogits
    auto gw = mat(grads, out_slot);
    if (tied) {
      gw.noalias() += z.transpose() * x;
      d_xn_.middleRows(r0, rows).noalias() = z * w;
    } else {
      gw.noalias() += x.transpose() * z;
      d_xn_.middleRows(r0, rows).noalias() = z * w.transpose();
    }
  }
  return total;
}

template <typename T>
void Pass<T>::backward(std::span<T> grads, std::span<const T> d_output) {
  // From here on, h_ is d(loss)/d(residual stream).
  if (stage_.head) {
    h_.setZero();
    const TensorSlot& norm = final_norm();
    ops::rms_norm_backward<T>(x_final_, vec(in_.params, norm), rstd_final_, d_xn_, h_,
                              vec(grads, norm));
  } else {
    PX_CHECK(static_cast<int64_t>(d_output.size()) == h_.size(),
             "output gradient has " << d_output.size() << " values, want " << h_.size());
    h_ = Eigen::Map<const RowMatrix<T>>(d_output.data(), n_, shape_.hidden);
  }
  for (int64_t l = stage_.end_layer - 1; l >= stage_.first_layer; --l) {
    const BlockActs<T>& a = acts_[static_cast<size_t>(l - stage_.first_layer)];
    backward_mlp(l, a, grads);
    backward_attention(l, a, grads);
  }
  if (!stage_.embed) return;
  auto g_embed = mat(grads, layout_.front());
  for (int64_t r = 0; r < n_; ++r) g_embed.row(inputs_[r]) += h_.row(r);
}

template <typename T>
void Pass<T>::backward_mlp(int64_t layer, const BlockActs<T>& a, std::span<T> grads) {
  using enum BlockTensor;
  const auto& p = in_.params;
  // Recomputed rather than kept: elementwise, and a block's worth of memory less.
  ops::rms_norm_forward<T>(a.x_mlp, vec(p, slot(layer, kMlpNorm)), eps_, xn_, rstd_);
  ops::swiglu_forward<T>(a.gate, a.up, act_);
  mat(grads, slot(layer, kWDown)).noalias() += act_.transpose() * h_;
  d_act_.noalias() = h_ * mat(p, slot(layer, kWDown)).transpose();
  d_gate_.setZero();
  d_up_.setZero();
  ops::swiglu_backward<T>(a.gate, a.up, d_act_, d_gate_, d_up_);
  mat(grads, slot(layer, kWGate)).noalias() += xn_.transpose() * d_gate_;
  mat(grads, slot(layer, kWUp)).noalias() += xn_.transpose() * d_up_;
  d_xn_.noalias() = d_gate_ * mat(p, slot(layer, kWGate)).transpose();
  d_xn_.noalias() += d_up_ * mat(p, slot(layer, kWUp)).transpose();
  tp_reduce(d_xn_);  // each rank's MLP columns contribute to the input gradient
  ops::rms_norm_backward<T>(a.x_mlp, vec(p, slot(layer, kMlpNorm)), a.rstd_mlp, d_xn_, h_,
                            vec(grads, slot(layer, kMlpNorm)));
}

template <typename T>
void Pass<T>::backward_attention(int64_t layer, const BlockActs<T>& a, std::span<T> grads) {
  using enum BlockTensor;
  const auto& p = in_.params;
  mat(grads, slot(layer, kWo)).noalias() += a.attn.transpose() * h_;
  d_attn_.noalias() = h_ * mat(p, slot(layer, kWo)).transpose();
  d_q_.setZero();
  d_k_.setZero();
  d_v_.setZero();
  if (cp_.size == 1) {
    ops::attention_backward<T>(attn_shape_, a.q, a.k, a.v, a.attn, a.lse, d_attn_, d_q_, d_k_,
                               d_v_);
  } else {  // K and V gathered again rather than kept: a block's worth of memory less
    cp_gather(a.k, k_all_);
    cp_gather(a.v, v_all_);
    dk_all_.setZero();
    dv_all_.setZero();
    ops::attention_backward<T>(attn_shape_, a.q, k_all_, v_all_, a.attn, a.lse, d_attn_, d_q_,
                               dk_all_, dv_all_);
    cp_scatter(dk_all_, d_k_);
    cp_scatter(dv_all_, d_v_);
  }
  rope_.rotate(d_q_, heads_, true);
  rope_.rotate(d_k_, kv_heads_, true);
  ops::rms_norm_forward<T>(a.x_attn, vec(p, slot(layer, kAttnNorm)), eps_, xn_, rstd_);
  mat(grads, slot(layer, kWq)).noalias() += xn_.transpose() * d_q_;
  mat(grads, slot(layer, kWk)).noalias() += xn_.transpose() * d_k_;
  mat(grads, slot(layer, kWv)).noalias() += xn_.transpose() * d_v_;
  d_xn_.noalias() = d_q_ * mat(p, slot(layer, kWq)).transpose();
  d_xn_.noalias() += d_k_ * mat(p, slot(layer, kWk)).transpose();
  d_xn_.noalias() += d_v_ * mat(p, slot(layer, kWv)).transpose();
  tp_reduce(d_xn_);
  ops::rms_norm_backward<T>(a.x_attn, vec(p, slot(layer, kAttnNorm)), a.rstd_attn, d_xn_, h_,
                            vec(grads, slot(layer, kAttnNorm)));
}

}  // namespace detail

using detail::Pass;
using detail::PassInput;

// ---- Transformer ----------------------------------------------------------------------------

template <typename T>
Transformer<T>::Transformer(const ModelShape& shape, TensorParallel<T> tp, StageRange stage,
                            ContextParallel<T> cp)
    : shape_(shape), tp_(std::move(tp)), stage_(stage), cp_(std::move(cp)) {
  const ModelShape& s = shape;
  PX_CHECK(s.layers > 0 && s.hidden > 0 && s.heads > 0 && s.kv_heads > 0 && s.head_dim > 0 &&
               s.ffn_hidden > 0 && s.vocab > 0,
           "every dimension of the model shape must be positive");
  PX_CHECK(s.heads % s.kv_heads == 0,
           "kv_heads=" << s.kv_heads << " must divide heads=" << s.heads);
  PX_CHECK(s.head_dim % 2 == 0, "rotary embeddings need an even head_dim, got " << s.head_dim);
  const int64_t tps = tp_.size;
  PX_CHECK(tps >= 1 && tp_.rank >= 0 && tp_.rank < tps,
           "tensor-parallel rank " << tp_.rank << " of " << tps);
  PX_CHECK(
      s.kv_heads % tps == 0 && s.ffn_hidden % tps == 0,
      "tp=" << tps << " must divide kv_heads=" << s.kv_heads << " and ffn_hidden=" << s.ffn_hidden);
  PX_CHECK(tps == 1 || tp_.all_reduce, "tensor parallelism needs an all-reduce");
  PX_CHECK(cp_.size >= 1 && cp_.rank >= 0 && cp_.rank < cp_.size &&
               (cp_.size == 1 || (cp_.all_gather && cp_.reduce_scatter)),
           "context-parallel rank " << cp_.rank << " of " << cp_.size
                                    << " needs an all-gather and a reduce-scatter");
  if (stage_.end_layer < 0) stage_.end_layer = s.layers;
  PX_CHECK(
      0 <= stage_.first_layer && stage_.first_layer <= stage_.end_layer &&
          stage_.end_layer <= s.layers,
      "stage layers [" << stage_.first_layer << ", " << stage_.end_layer << ") of " << s.layers);
  // split: 0 replicated, 1 columns (column-parallel), 2 rows (row-parallel).
  int64_t index = 0;  // in the whole model's layout
  auto add = [this, tps, &index](std::string name, int64_t rows, int64_t cols, int split = 0,
                                 bool here = true) {
    const int64_t i = index++;
    if (!here) return;
    TensorSlot t{std::move(name), num_params_, rows, cols, i, rows, cols, 0, 0, split == 0};
    if (split == 1) {
      t.cols = cols / tps;
      t.col0 = t.cols * tp_.rank;
    } else if (split == 2) {
      t.rows = rows / tps;
      t.row0 = t.rows * tp_.rank;
    }
    num_params_ += t.size();
    layout_.push_back(std::move(t));
  };
  const int64_t q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim;
  add("embed", s.vocab, s.hidden, 0, stage_.embed || (stage_.head && s.tied_embeddings));
  for (int64_t l = 0; l < s.layers; ++l) {
    const bool here = l >= stage_.first_layer && l < stage_.end_layer;
    const std::string prefix = "layers." + std::to_string(l) + ".";
    const int64_t dims[kPerBlock][3] = {{1, s.hidden, 0},
                                        {s.hidden, q, 1},
                                        {s.hidden, kv, 1},
                                        {s.hidden, kv, 1},
                                        {q, s.hidden, 2},
                                        {1, s.hidden, 0},
                                        {s.hidden, s.ffn_hidden, 1},
                                        {s.hidden, s.ffn_hidden, 1},
                                        {s.ffn_hidden, s.hidden, 2}};
    for (int64_t t = 0; t < kPerBlock; ++t)
      add(prefix + kBlockTensorNames[t], dims[t][0], dims[t][1], static_cast<int>(dims[t][2]),
          here);
  }
  add("final_norm", 1, s.hidden, 0, stage_.head);
  if (!s.tied_embeddings) add("output", s.hidden, s.vocab, 0, stage_.head);
}

template <typename T>
void Transformer<T>::init(std::span<T> params, uint64_t seed) const {
  PX_CHECK(static_cast<int64_t>(params.size()) == num_params_,
           "params has " << params.size() << " values, the model " << num_params_);
  constexpr double kStd = 0.02;
  // GPT-2's scaling: the two projections that write into the residual stream, once per block.
  const double residual_std = kStd / std::sqrt(2.0 * static_cast<double>(shape_.layers));
  // Indices in the whole model's layout, which fix each tensor's stream.
  const auto final_norm = static_cast<size_t>(1 + kPerBlock * shape_.layers);
  for (const TensorSlot& t : layout_) {
    const auto i = static_cast<size_t>(t.index);
    const std::span<T> out = vec(params, t);
    bool norm = i == final_norm, residual = false;
    if (i >= 1 && i < final_norm) {
      const auto kind = static_cast<BlockTensor>((i - 1) % kPerBlock);
      norm = kind == BlockTensor::kAttnNorm || kind == BlockTensor::kMlpNorm;
      residual = kind == BlockTensor::kWo || kind == BlockTensor::kWDown;
    }
    if (norm) {
      std::fill(out.begin(), out.end(), T(1));
      continue;
    }
    const double sd = residual ? residual_std : kStd;
    // One stream per tensor: a tensor's values depend on the seed and its place only. A shard
    // draws the whole tensor's stream and keeps its block.
    NormalSampler normal(splitmix64(seed ^ splitmix64(i + 1)));
    for (int64_t r = 0; r < t.full_rows; ++r) {
      for (int64_t c = 0; c < t.full_cols; ++c) {
        const double x = sd * normal();
        if (r >= t.row0 && r < t.row0 + t.rows && c >= t.col0 && c < t.col0 + t.cols)
          out[static_cast<size_t>((r - t.row0) * t.cols + (c - t.col0))] = static_cast<T>(x);
      }
    }
  }
}

template <typename T>
T Transformer<T>::loss(std::span<const T> params, std::span<const int32_t> tokens, int64_t batch,
                       int64_t seq) const {
  Pass<T> pass(*this, {params, tokens, batch, seq, false});
  pass.forward();
  return static_cast<T>(pass.head(T(0), {}, {}));
}

template <typename T>
T Transformer<T>::loss_and_grad(std::span<const T> params, std::span<const int32_t> tokens,
                                int64_t batch, int64_t seq, T grad_scale,
                                std::span<T> grads) const {
  PX_CHECK(static_cast<int64_t>(grads.size()) == num_params_,
           "grads has " << grads.size() << " values, the model " << num_params_);
  Pass<T> pass(*this, {params, tokens, batch, seq, true});
  pass.forward();
  // grad_scale seeds the backward (dlogits), which is linear: every gradient comes out scaled.
  const double total = pass.head(grad_scale, grads, {});
  pass.backward(grads);
  return static_cast<T>(total);
}

template class Transformer<float>;
template class Transformer<double>;

// ---- StagePass ------------------------------------------------------------------------------

template <typename T>
StagePass<T>::StagePass(const Transformer<T>& model, std::span<const T> params,
                        std::span<const int32_t> tokens, int64_t batch, int64_t seq)
    : pass_(std::make_unique<Pass<T>>(model, PassInput<T>{params, tokens, batch, seq, true})) {}

template <typename T>
StagePass<T>::~StagePass() = default;

template <typename T>
double StagePass<T>::forward(std::span<const T> input, T grad_scale, std::span<T> grads) {
  pass_->forward(input);
  return pass_->stage().head ? pass_->head(grad_scale, grads, {}) : 0.0;
}

template <typename T>
std::span<const T> StagePass<T>::output() const {
  return pass_->stream();
}

template <typename T>
void StagePass<T>::backward(std::span<const T> d_output, std::span<T> grads) {
  pass_->backward(grads, d_output);
}

template <typename T>
std::span<const T> StagePass<T>::input_grad() const {
  return pass_->stream();
}

template class StagePass<float>;
template class StagePass<double>;

namespace ops {

template <typename T>
void position_losses(const Transformer<T>& model, std::span<const T> params,
                     std::span<const int32_t> tokens, int64_t batch, int64_t seq,
                     std::span<double> out) {
  PX_CHECK(static_cast<int64_t>(out.size()) == batch * seq,
           "out has " << out.size() << " entries, want batch * seq = " << batch * seq);
  Pass<T> pass(model, {params, tokens, batch, seq, false});
  pass.forward();
  pass.head(T(0), {}, out);
}

template void position_losses<float>(const Transformer<float>&, std::span<const float>,
                                     std::span<const int32_t>, int64_t, int64_t, std::span<double>);
template void position_losses<double>(const Transformer<double>&, std::span<const double>,
                                      std::span<const int32_t>, int64_t, int64_t,
                                      std::span<double>);

}  // namespace ops
}  // namespace parallax::exec
