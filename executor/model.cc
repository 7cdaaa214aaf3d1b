// Transformer<T>'s forward and backward passes (whole model or pipeline stage), composed from the
// operators of model_ops.h and the routed experts of moe.h. GEMMs go through Eigen maps over the
// flat buffers, so parameters and gradients are never copied. The layout and initialisation are
// in model_layout.cc.

#include "executor/model.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "executor/model_ops.h"  // also Eigen, with the alignment every user here must share
#include "executor/moe.h"
#include "executor/op_times.h"

namespace parallax::exec {

namespace {

using ops::RowMatrix;

using detail::BlockSlots;

// Logits are computed this many entries at a time (rows of vocab), so that a large vocabulary
// does not hold tokens x vocab floats at once.
constexpr int64_t kLogitChunk = int64_t{1} << 21;

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
/// A MoE layer's router and this rank's experts in `buf` (parameters or gradients).
template <typename S>
auto moe_weights(std::span<S> buf, const std::vector<TensorSlot>& layout, const BlockSlots& b) {
  auto at = [&](int64_t i) { return mat(buf, layout[static_cast<size_t>(i)]); };
  return MoeWeights<decltype(at(0))>{at(b.router), at(b.experts_gate), at(b.experts_up),
                                     at(b.experts_down)};
}

}  // namespace

namespace detail {

/// What one block's backward needs from its forward; rows are tokens.
template <typename T>
struct BlockActs {
  RowMatrix<T> x_attn, x_mlp;  // the block's inputs to its two norms (training only)
  RowMatrix<T> q, k, v;        // after rotary embedding
  RowMatrix<T> attn;           // attention output, before wo
  RowMatrix<T> gate, up;       // dense MLP or shared experts, before SwiGLU
  std::vector<T> rstd_attn, rstd_mlp, lse;
  MoeActs<T> moe;  // routed experts
};

template <typename T>
struct PassInput {
  std::span<const T> params;
  std::span<const int32_t> tokens;  ///< batch rows of seq + 1 ids
  int64_t batch = 0, seq = 0;
  bool train = false;  ///< keep every block's activations and allocate backward buffers
  ParamUnits units{};  ///< told where the pass uses each parameter unit
  /// Generation: attention against this cache (K and V of positions [pos, pos + seq) added);
  /// `tokens` then holds batch rows of seq inputs (no targets), or nothing on a stage without
  /// the embedding.
  KvCache<T>* cache = nullptr;
  int64_t pos = 0;
};

/// One forward (and, when training, backward) pass of a Transformer (or of one pipeline stage
/// of it) over one batch. The residual stream h_ turns into its gradient during the backward.
template <typename T>
class Pass {
 public:
  Pass(const Transformer<T>& model, const PassInput<T>& in);

  /// Embedding (or `input`, the previous stage's output), blocks and, on the head stage, the
  /// final norm. grad_scale weighs the load-balancing losses in the backward.
  void forward(std::span<const T> input = {}, T grad_scale = T(0));
  /// The summed loss; with `grads` (training), also the gradient of the final norm's output,
  /// scaled by grad_scale, and the output layer's (or tied embedding's) gradient.
  double head(T grad_scale, std::span<T> grads, std::span<double> row_losses);
  /// batch * full_seq * the stage's load-balancing losses on cp rank 0, else 0 (after forward).
  // Every context-parallel (and, under sequence parallelism, tensor-parallel) rank computes the
  // same load-balancing term from the summed statistics: the first one counts it.
  double aux() const {
    return cp_.rank == 0 && (!sp_ || tp_.rank == 0) ? static_cast<double>(moe_tokens()) * aux_
                                                    : 0.0;
  }
  /// From the final norm (head() must have run with grads) or from `d_output` down to the
  /// embedding or the stage's input.
  void backward(std::span<T> grads, std::span<const T> d_output = {});
  /// The routing of the forward (training passes keep every layer's).
  Routing routing() const;
  /// After forward on the head stage: the logits of each sequence's last position.
  std::vector<T> last_logits() const;
  const StageRange& stage() const { return stage_; }
  /// The residual stream: the stage's output after forward, its input gradient after backward.
  std::span<const T> stream() const { return {h_.data(), static_cast<size_t>(h_.size())}; }

 private:
  const TensorSlot& at(int64_t index) const { return layout_[static_cast<size_t>(index)]; }
  // ParamUnits' calls, where set.
  void unit_gather(int64_t u) const {
    if (in_.units.gather) in_.units.gather(u);
  }
  void unit_release(int64_t u) const {
    if (in_.units.release) in_.units.release(u);
  }
  void unit_done(int64_t u) const {
    if (in_.units.grads_done) in_.units.grads_done(u);
  }
  const BlockSlots& block(int64_t layer) const {
    return blocks_[static_cast<size_t>(layer - stage_.first_layer)];
  }
  // Tokens of the microbatch over the context-parallel group.
  int64_t moe_tokens() const { return n_ * cp_.size; }
  // Split experts whose tp ranks route their own rows (sequence parallelism) gather the rows
  // over the group and return whole outputs and input gradients; without sequence parallelism
  // they see the same rows on every tp rank and leave partial sums to be all-reduced.
  bool experts_gathered() const { return sp_ && ep_.tensor > 1; }
  bool experts_partial() const { return !sp_ && ep_.tensor > 1; }
  MoeConfig moe_config() const {
    const MoeShape& m = shape_.moe;
    return {m.experts,         m.top_k,          m.expert_ffn_hidden / ep_.tensor,
            shape_.hidden,     m.aux_loss_coeff, moe_tokens(),
            experts_gathered()};
  }
  void forward_block(int64_t layer, BlockActs<T>& a);
  /// Adds the block's K and V to the cache and attends to it.
  void attend_cached(int64_t layer, BlockActs<T>& a);
  /// h += swiglu(xn w_gate, xn w_up) w_down, summed over the tensor-parallel group.
  void forward_mlp(const BlockSlots& b, BlockActs<T>& a);
  void backward_ffn(int64_t layer, const BlockActs<T>& a, std::span<T> grads);
  /// Given h_ = d/d(MLP output) and xn_ = the MLP's input: its weights' gradients, and d_xn_.
  /// dy: d/d(MLP output) for all n_ rows. Leaves d_xn_ unreduced over the group.
  void backward_mlp(const BlockSlots& b, const BlockActs<T>& a, const RowMatrix<T>& dy,
                    std::span<T> grads);
  void backward_attention(int64_t layer, const BlockActs<T>& a, std::span<T> grads);

  /// Sums a block's partial output (or input gradient) over the tensor-parallel group.
  void tp_reduce(RowMatrix<T>& m) const {
    if (tp_.size > 1) tp_.all_reduce(std::span<T>(m.data(), static_cast<size_t>(m.size())));
  }
  // Sequence parallelism (TensorParallel): the stream holds rows_ of the n_ rows.
  /// xn_ = norm(x) for all n_ rows, x being the stream's rows: gathered under sequence
  /// parallelism.
  void norm_all_rows(const RowMatrix<T>& x, int64_t norm, std::span<T> rstd);
  /// h_ += the group's sum of `partial` (n_ x hidden; reduce-scattered to the stream's rows
  /// under sequence parallelism). `partial`'s storage may be reused.
  void add_reduced(RowMatrix<T>& partial);
  /// d(objective)/d(the block's output) for all n_ rows: h_, or h_ gathered.
  const RowMatrix<T>& stream_grad_all_rows();
  /// Sums d_xn_ (the n_ rows' partial input gradient) over the group into rows_grad().
  void reduce_input_grad();
  /// The input gradient of the stream's rows: d_xn_, or d_xs_ under sequence parallelism.
  RowMatrix<T>& rows_grad() { return sp_ ? d_xs_ : d_xn_; }

  /// K or V of every context-parallel rank, in sequence order: `local` is this rank's
  /// (batch * seq) rows, `full` receives batch * seq * cp rows.
  void cp_gather(const RowMatrix<T>& local, RowMatrix<T>& full);
  /// The gradient of gathered rows back to their owners, summed over the group.
  void cp_scatter(const RowMatrix<T>& full, RowMatrix<T>& local);

  const ModelShape& shape_;
  const TensorParallel<T>& tp_;
  const ContextParallel<T>& cp_;
  const ExpertParallel<T>& ep_;
  const StageRange& stage_;
  const std::vector<BlockSlots>& blocks_;  // the stage's blocks' tensors
  const int64_t final_norm_;               // in layout_, on the head stage
  const int64_t heads_, kv_heads_;         // this rank's share of the attention heads
  const std::vector<TensorSlot>& layout_;
  const PassInput<T> in_;
  const int64_t n_;  // tokens in the batch: batch * seq rows
  // Sequence parallelism: the stream (h_, norms, embedding, head) holds rows_ rows of the n_,
  // from row0_; without it, all of them.
  const bool sp_;
  const int64_t rows_, row0_;
  const T eps_;
  // The rows of a rank come in parts_ parts of (batch / parts_) sequences x seq positions: one,
  // or under load-balanced context parallelism two (the rank's early and late chunk of every
  // sequence), each with its own positions: attention shape (q_offset) and rotary table.
  int64_t parts_ = 1;
  std::vector<ops::AttentionShape> part_shape_;
  std::vector<ops::RotaryTable<T>> part_rope_;
  /// Where chunk j of a sequence lives: (rank, part).
  std::pair<int64_t, int64_t> chunk_home(int64_t j) const {
    if (parts_ == 1) return {j, 0};
    return j < cp_.size ? std::pair<int64_t, int64_t>{j, 0}
                        : std::pair<int64_t, int64_t>{2 * cp_.size - 1 - j, 1};
  }
  void rotate(RowMatrix<T>& x, int64_t heads, bool inverse) const {
    const int64_t rows = n_ / parts_;
    for (int64_t h = 0; h < parts_; ++h)
      part_rope_[static_cast<size_t>(h)].rotate(x.middleRows(h * rows, rows), heads, inverse);
  }
  std::vector<int32_t> inputs_, targets_;
  std::vector<BlockActs<T>> acts_;  // one per block when training, else one reused by all
  RowMatrix<T> h_, x_final_, xf_;   // residual stream; final norm's input and output
  std::vector<T> rstd_final_;
  // Per-call workspace shared by the blocks (normed input, SwiGLU output, gradients).
  RowMatrix<T> xn_, act_, d_xn_, d_q_, d_k_, d_v_, d_attn_, d_act_, d_gate_, d_up_;
  // Context parallelism: gathered K, V, their gradients, and the rank-ordered staging buffer.
  RowMatrix<T> k_all_, v_all_, dk_all_, dv_all_, cp_buf_;
  // Sequence parallelism: the stream rows' norm output and input gradient; the gathered
  // gradient of the stream.
  RowMatrix<T> xs_, d_xs_, d_full_;
  std::vector<T> rstd_;
  // MoE: the routed experts' output (forward) or input gradient (backward); the sum of the
  // stage's load-balancing losses; the backward's weight on them; no router statistics to sum
  // without context parallelism.
  RowMatrix<T> moe_out_;
  std::span<T> moe_out_span() {
    return std::span<T>(moe_out_.data(), static_cast<size_t>(moe_out_.size()));
  }
  double aux_ = 0;
  T grad_scale_ = 0;
  const std::function<void(std::span<T>)> no_stats_;
  /// Under sequence parallelism: the router statistics summed over tp, then over cp.
  const std::function<void(std::span<T>)> sp_stats_ = [this](std::span<T> x) {
    tp_.all_reduce(x);
    if (cp_.size > 1) cp_.all_reduce(x);
  };
};

template <typename T>
Pass<T>::Pass(const Transformer<T>& model, const PassInput<T>& in)
    : shape_(model.shape()),
      tp_(model.tensor_parallel()),
      cp_(model.context_parallel()),
      ep_(model.expert_parallel()),
      stage_(model.stage()),
      blocks_(model.blocks_),
      final_norm_(model.final_norm_),
      heads_(shape_.heads / tp_.size),
      kv_heads_(shape_.kv_heads / tp_.size),
      layout_(model.layout()),
      in_(in),
      n_(in.batch * in.seq),
      sp_(tp_.sequence_parallel && tp_.size > 1),
      rows_(sp_ ? n_ / tp_.size : n_),
      row0_(sp_ ? tp_.rank * rows_ : 0),
      eps_(static_cast<T>(model.shape().norm_eps)) {
  PX_CHECK(in.batch > 0 && in.seq > 0,
           "batch and seq must be positive, got batch=" << in.batch << " seq=" << in.seq);
  parts_ = cp_.size > 1 && cp_.balanced ? 2 : 1;
  PX_CHECK(!sp_ || n_ % tp_.size == 0,
           "sequence parallelism splits the batch * seq = " << n_ << " rows over tp=" << tp_.size);
  PX_CHECK(in.batch % parts_ == 0,
           "load-balanced context parallelism wants both chunks of each sequence, got batch="
               << in.batch);
  const int64_t seq_full = in.seq * parts_ * cp_.size;
  PX_CHECK(!in.cache || (cp_.size == 1 && !sp_ && in.batch == in.cache->batch() &&
                         in.pos + in.seq <= in.cache->max_len()),
           "a cached pass of positions [" << in.pos << ", " << in.pos + in.seq
                                          << ") needs a cache of the batch that holds them");
  for (int64_t h = 0; h < parts_; ++h) {
    int64_t chunk = cp_.rank;  // contiguous: this rank's chunk; balanced: rank and 2cp-1-rank
    if (h == 1) chunk = 2 * cp_.size - 1 - cp_.rank;
    const int64_t offset = in.cache ? in.pos : chunk * in.seq;
    const int64_t keys = in.cache ? in.cache->max_len() : cp_.size > 1 ? seq_full : 0;
    part_shape_.push_back(
        {in.batch / parts_, in.seq, heads_, kv_heads_, shape_.head_dim, keys, offset});
    part_rope_.emplace_back(in.seq, shape_.head_dim, shape_.rope_theta, offset);
  }
  PX_CHECK(static_cast<int64_t>(in.params.size()) == model.num_params(),
           "params has " << in.params.size() << " values, the model " << model.num_params());
  // A row of ids: seq inputs and the next id (the last target); a cached pass has no targets.
  const int64_t row = in.cache ? in.seq : in.seq + 1;
  const bool no_ids = in.cache && !stage_.embed && in.tokens.empty();
  PX_CHECK(no_ids || static_cast<int64_t>(in.tokens.size()) == in.batch * row,
           "tokens has " << in.tokens.size() << " ids, want " << in.batch * row);
  const int64_t h = shape_.hidden, q_cols = heads_ * shape_.head_dim,
                kv_cols = kv_heads_ * shape_.head_dim;
  inputs_.resize(static_cast<size_t>(n_));
  targets_.resize(static_cast<size_t>(n_));
  for (int64_t b = 0; b < in.batch && !no_ids; ++b) {
    for (int64_t s = 0; s < in.seq; ++s) {
      inputs_[b * in.seq + s] = in.tokens[b * row + s];
      targets_[b * in.seq + s] = in.cache ? 0 : in.tokens[b * row + s + 1];
    }
  }
  for (int32_t t : in.tokens)
    PX_CHECK(t >= 0 && t < shape_.vocab, "token " << t << " outside [0, " << shape_.vocab << ")");
  acts_.resize(in.train ? blocks_.size() : 1);
  const auto rows = static_cast<size_t>(rows_);
  for (BlockActs<T>& a : acts_) {  // the MLP's activations are sized per block, in forward
    if (in.train) {
      a.x_attn.resize(rows_, h);
      a.x_mlp.resize(rows_, h);
    }
    a.q.resize(n_, q_cols);
    a.k.resize(n_, kv_cols);
    a.v.resize(n_, kv_cols);
    a.attn.resize(n_, q_cols);
    a.rstd_attn.resize(rows);
    a.rstd_mlp.resize(rows);
    a.lse.resize(static_cast<size_t>(n_ * heads_));
  }
  for (RowMatrix<T>* m : {&h_, &xf_}) m->resize(rows_, h);
  xn_.resize(n_, h);
  if (sp_) xs_.resize(rows_, h);
  if (std::any_of(blocks_.begin(), blocks_.end(),
                  [](const BlockSlots& b) { return b.router >= 0; }))
    moe_out_.resize(rows_, h);  // the rank's own rows (all n_ rows without sequence parallelism)
  if (cp_.size > 1) {
    for (RowMatrix<T>* m : {&k_all_, &v_all_, &cp_buf_}) m->resize(n_ * cp_.size, kv_cols);
    if (in.train)
      for (RowMatrix<T>* m : {&dk_all_, &dv_all_}) m->resize(n_ * cp_.size, kv_cols);
  }
  rstd_final_.resize(rows);
  rstd_.resize(rows);
  if (!in.train) return;
  x_final_.resize(rows_, h);
  d_xn_.resize(n_, h);
  if (sp_)
    for (RowMatrix<T>* m : {&d_xs_, &d_full_}) m->resize(m == &d_xs_ ? rows_ : n_, h);
  for (RowMatrix<T>* m : {&d_q_, &d_attn_}) m->resize(n_, q_cols);
  for (RowMatrix<T>* m : {&d_k_, &d_v_}) m->resize(n_, kv_cols);
}

template <typename T>
void Pass<T>::cp_gather(const RowMatrix<T>& local, RowMatrix<T>& full) {
  const int64_t seq = in_.seq, cols = local.cols();
  cp_.all_gather(std::span<const T>(local.data(), static_cast<size_t>(local.size())),
                 std::span<T>(cp_buf_.data(), static_cast<size_t>(cp_buf_.size())));
  // cp_buf_ holds rank r's rows at r * n_ (its parts one after the other); full wants chunk j of
  // sequence b at (b * chunks + j) * seq.
  const int64_t batch = in_.batch / parts_, chunks = parts_ * cp_.size;
  for (int64_t j = 0; j < chunks; ++j) {
    const auto [r, part] = chunk_home(j);
    for (int64_t b = 0; b < batch; ++b)
      full.block((b * chunks + j) * seq, 0, seq, cols) =
          cp_buf_.block(r * n_ + (part * batch + b) * seq, 0, seq, cols);
  }
}

template <typename T>
void Pass<T>::cp_scatter(const RowMatrix<T>& full, RowMatrix<T>& local) {
  const int64_t seq = in_.seq, cols = full.cols();
  const int64_t batch = in_.batch / parts_, chunks = parts_ * cp_.size;
  for (int64_t j = 0; j < chunks; ++j) {
    const auto [r, part] = chunk_home(j);
    for (int64_t b = 0; b < batch; ++b)
      cp_buf_.block(r * n_ + (part * batch + b) * seq, 0, seq, cols) =
          full.block((b * chunks + j) * seq, 0, seq, cols);
  }
  cp_.reduce_scatter(std::span<const T>(cp_buf_.data(), static_cast<size_t>(cp_buf_.size())),
                     std::span<T>(local.data(), static_cast<size_t>(local.size())));
}

template <typename T>
void Pass<T>::forward(std::span<const T> input, T grad_scale) {
  grad_scale_ = grad_scale;
  OpClock::set_backward(false);
  aux_ = 0;
  if (stage_.embed) {
    unit_gather(ParamUnits::kEmbedUnit);
    const OpScope timed(OpKind::kEmbedding, false);
    const auto embed = mat(in_.params, layout_.front());
    for (int64_t r = 0; r < rows_; ++r) h_.row(r) = embed.row(inputs_[row0_ + r]);
    unit_release(ParamUnits::kEmbedUnit);
  } else {
    PX_CHECK(static_cast<int64_t>(input.size()) == h_.size(),
             "stage input has " << input.size() << " values, want " << h_.size());
    h_ = Eigen::Map<const RowMatrix<T>>(input.data(), rows_, shape_.hidden);
  }
  for (int64_t l = stage_.first_layer; l < stage_.end_layer; ++l) {
    unit_gather(l);
    forward_block(l, acts_[in_.train ? l - stage_.first_layer : 0]);
    unit_release(l);
  }
  if (!stage_.head) return;
  unit_gather(ParamUnits::kHeadUnit);  // released at the end of head()
  const OpScope timed(OpKind::kNorm, false);
  if (in_.train) x_final_ = h_;
  ops::rms_norm_forward<T>(h_, vec(in_.params, at(final_norm_)), eps_, xf_, rstd_final_);
}

// h += attention(rope(norm(h) wq), rope(norm(h) wk), norm(h) wv) wo;
// h += swiglu(norm(h) w_gate, norm(h) w_up) w_down, or in a MoE layer
// h += routed_experts(norm(h)) + the shared experts' swiglu MLP   (rows are tokens: x W).
template <typename T>
void Pass<T>::forward_block(int64_t layer, BlockActs<T>& a) {
  const BlockSlots& b = block(layer);
  const auto& p = in_.params;
  if (in_.train) a.x_attn = h_;
  norm_all_rows(h_, b.attn_norm, a.rstd_attn);
  {
    const OpScope timed(OpKind::kQkvProj, false);
    a.q.noalias() = xn_ * mat(p, at(b.wq));
    a.k.noalias() = xn_ * mat(p, at(b.wk));
    a.v.noalias() = xn_ * mat(p, at(b.wv));
  }
  {
    const OpScope timed(OpKind::kRope, false);
    rotate(a.q, heads_, false);
    rotate(a.k, kv_heads_, false);
  }
  if (in_.cache) {
    attend_cached(layer, a);
  } else if (cp_.size == 1) {
    const OpScope timed(OpKind::kAttention, false);
    ops::attention_forward<T>(part_shape_[0], a.q, a.k, a.v, a.attn, a.lse);
  } else {
    cp_gather(a.k, k_all_);
    cp_gather(a.v, v_all_);
    const OpScope timed(OpKind::kAttention, false);
    const int64_t rows = n_ / parts_;
    for (int64_t h = 0; h < parts_; ++h)
      ops::attention_forward<T>(part_shape_[static_cast<size_t>(h)], a.q.middleRows(h * rows, rows),
                                k_all_, v_all_, a.attn.middleRows(h * rows, rows),
                                std::span<T>(a.lse).subspan(static_cast<size_t>(h * rows * heads_),
                                                            static_cast<size_t>(rows * heads_)));
  }
  if (tp_.size == 1) {
    const OpScope timed(OpKind::kOutProj, false);
    h_.noalias() += a.attn * mat(p, at(b.wo));
  } else {  // this rank's heads' share of the projection, summed over the group
    {
      const OpScope timed(OpKind::kOutProj, false);
      xn_.noalias() = a.attn * mat(p, at(b.wo));
    }
    add_reduced(xn_);
  }

  if (in_.train) a.x_mlp = h_;
  norm_all_rows(h_, b.mlp_norm, a.rstd_mlp);
  if (b.router >= 0) {
    // Without sequence parallelism every tp rank runs its ep rank's experts on the same rows;
    // with it, each routes its own rows (the router statistics then summed over tp as well),
    // which split experts gather over tp around their GEMMs.
    const auto& stats = sp_ ? sp_stats_ : cp_.size > 1 ? cp_.all_reduce : no_stats_;
    const OpScope timed(OpKind::kMoe, false);
    moe_forward<T>(moe_config(), ep_, stats, sp_ ? xs_ : xn_, moe_weights(p, layout_, b), a.moe,
                   moe_out_);
    aux_ += a.moe.aux;
  }
  if (b.w_gate >= 0) forward_mlp(b, a);
  if (b.router >= 0) {
    if (experts_partial()) ep_.tensor_all_reduce(moe_out_span());  // partial sums
    h_ += moe_out_;
  }
}

template <typename T>
void Pass<T>::forward_mlp(const BlockSlots& b, BlockActs<T>& a) {
  const auto& p = in_.params;
  const int64_t f = at(b.w_gate).cols;
  a.gate.resize(n_, f);
  a.up.resize(n_, f);
  act_.resize(n_, f);
  {
    const OpScope timed(OpKind::kMlpGateUp, false);
    a.gate.noalias() = xn_ * mat(p, at(b.w_gate));
    a.up.noalias() = xn_ * mat(p, at(b.w_up));
  }
  {
    const OpScope timed(OpKind::kActivation, false);
    ops::swiglu_forward<T>(a.gate, a.up, act_);
  }
  if (tp_.size == 1) {
    const OpScope timed(OpKind::kMlpDown, false);
    h_.noalias() += act_ * mat(p, at(b.w_down));
  } else {
    {
      const OpScope timed(OpKind::kMlpDown, false);
      xn_.noalias() = act_ * mat(p, at(b.w_down));
    }
    add_reduced(xn_);
  }
}

template <typename T>
void Pass<T>::attend_cached(int64_t layer, BlockActs<T>& a) {
  KvCache<T>& c = *in_.cache;
  const auto i = static_cast<size_t>(layer - stage_.first_layer);
  const int64_t n = in_.seq, rows = c.batch() * c.max_len(), cols = c.kv_cols();
  Eigen::Map<RowMatrix<T>> k(c.k(i).data(), rows, cols), v(c.v(i).data(), rows, cols);
  for (int64_t b = 0; b < c.batch(); ++b) {
    k.middleRows(b * c.max_len() + in_.pos, n) = a.k.middleRows(b * n, n);
    v.middleRows(b * c.max_len() + in_.pos, n) = a.v.middleRows(b * n, n);
  }
  ops::attention_forward<T>(part_shape_[0], a.q, k, v, a.attn, a.lse);
}

template <typename T>
void Pass<T>::norm_all_rows(const RowMatrix<T>& x, int64_t norm, std::span<T> rstd) {
  const std::span<const T> w = vec(in_.params, at(norm));
  if (!sp_) {
    const OpScope timed(OpKind::kNorm);
    ops::rms_norm_forward<T>(x, w, eps_, xn_, rstd);
    return;
  }
  {
    const OpScope timed(OpKind::kNorm);
    ops::rms_norm_forward<T>(x, w, eps_, xs_, rstd);
  }
  tp_.all_gather(std::span<const T>(xs_.data(), static_cast<size_t>(xs_.size())),
                 std::span<T>(xn_.data(), static_cast<size_t>(xn_.size())));
}

template <typename T>
void Pass<T>::add_reduced(RowMatrix<T>& partial) {
  if (!sp_) {
    tp_reduce(partial);
    h_ += partial;
    return;
  }
  tp_.reduce_scatter(std::span<const T>(partial.data(), static_cast<size_t>(partial.size())),
                     std::span<T>(xs_.data(), static_cast<size_t>(xs_.size())));
  h_ += xs_;
}

template <typename T>
const RowMatrix<T>& Pass<T>::stream_grad_all_rows() {
  if (!sp_) return h_;
  tp_.all_gather(std::span<const T>(h_.data(), static_cast<size_t>(h_.size())),
                 std::span<T>(d_full_.data(), static_cast<size_t>(d_full_.size())));
  return d_full_;
}

template <typename T>
void Pass<T>::reduce_input_grad() {
  if (!sp_) {
    tp_reduce(d_xn_);
    return;
  }
  tp_.reduce_scatter(std::span<const T>(d_xn_.data(), static_cast<size_t>(d_xn_.size())),
                     std::span<T>(d_xs_.data(), static_cast<size_t>(d_xs_.size())));
}

template <typename T>
double Pass<T>::head(T grad_scale, std::span<T> grads, std::span<double> row_losses) {
  const bool tied = shape_.tied_embeddings;
  if (tied) unit_gather(ParamUnits::kEmbedUnit);
  const TensorSlot& out_slot = tied ? layout_.front() : layout_.back();
  const auto w = mat(in_.params, out_slot);  // hidden x vocab; vocab x hidden when tied
  PX_CHECK(!sp_ || row_losses.empty(), "per-position losses need the whole stream (no sp)");
  const int64_t chunk = std::clamp<int64_t>(kLogitChunk / shape_.vocab, 1, rows_);
  RowMatrix<T> logits(chunk, shape_.vocab);
  RowMatrix<T>& dx = rows_grad();
  double total = 0;
  for (int64_t r0 = 0; r0 < rows_; r0 += chunk) {
    const int64_t rows = std::min(chunk, rows_ - r0);
    auto z = logits.topRows(rows);
    const auto x = xf_.middleRows(r0, rows);
    {
      const OpScope timed(OpKind::kLogits, false);
      if (tied) {
        z.noalias() = x * w.transpose();
      } else {
        z.noalias() = x * w;
      }
    }
    const std::span<const int32_t> t(targets_.data() + row0_ + r0, static_cast<size_t>(rows));
    if (grads.empty()) {
      const OpScope timed(OpKind::kCrossEntropy, false);
      total += ops::cross_entropy_forward<T>(
          z, t, row_losses.empty() ? row_losses : row_losses.subspan(r0, rows));
      continue;
    }
    {  // forward and backward in one pass over the logits
      const OpScope timed(OpKind::kCrossEntropy, false);
      total += ops::cross_entropy_backward<T>(z, t, grad_scale, z);  // z now holds dlogits
    }
    const OpScope timed(OpKind::kLogits, true);
    auto gw = mat(grads, out_slot);
    if (tied) {
      gw.noalias() += z.transpose() * x;
      dx.middleRows(r0, rows).noalias() = z * w;
    } else {
      gw.noalias() += x.transpose() * z;
      dx.middleRows(r0, rows).noalias() = z * w.transpose();
    }
  }
  if (tied) unit_release(ParamUnits::kEmbedUnit);
  unit_release(ParamUnits::kHeadUnit);
  return total;
}

template <typename T>
void Pass<T>::backward(std::span<T> grads, std::span<const T> d_output) {
  // From here on, h_ is d(loss)/d(residual stream).
  OpClock::set_backward(true);
  if (stage_.head) {
    unit_gather(ParamUnits::kHeadUnit);
    const OpScope timed(OpKind::kNorm, true);
    h_.setZero();
    const TensorSlot& norm = at(final_norm_);
    ops::rms_norm_backward<T>(x_final_, vec(in_.params, norm), rstd_final_, rows_grad(), h_,
                              vec(grads, norm));
    unit_release(ParamUnits::kHeadUnit);
    unit_done(ParamUnits::kHeadUnit);
  } else {
    PX_CHECK(static_cast<int64_t>(d_output.size()) == h_.size(),
             "output gradient has " << d_output.size() << " values, want " << h_.size());
    h_ = Eigen::Map<const RowMatrix<T>>(d_output.data(), rows_, shape_.hidden);
  }
  for (int64_t l = stage_.end_layer - 1; l >= stage_.first_layer; --l) {
    const BlockActs<T>& a = acts_[static_cast<size_t>(l - stage_.first_layer)];
    unit_gather(l);
    backward_ffn(l, a, grads);
    backward_attention(l, a, grads);
    unit_release(l);
    unit_done(l);
  }
  if (stage_.embed) {
    const OpScope timed(OpKind::kEmbedding, true);
    auto g_embed = mat(grads, layout_.front());
    for (int64_t r = 0; r < rows_; ++r) g_embed.row(inputs_[row0_ + r]) += h_.row(r);
  }
  // A tied head stage's copy of the embedding had its gradient from head().
  if (stage_.embed || (stage_.head && shape_.tied_embeddings)) unit_done(ParamUnits::kEmbedUnit);
}

template <typename T>
void Pass<T>::backward_ffn(int64_t layer, const BlockActs<T>& a, std::span<T> grads) {
  const BlockSlots& b = block(layer);
  const auto& p = in_.params;
  // Recomputed rather than kept: elementwise, and a block's worth of memory less.
  norm_all_rows(a.x_mlp, b.mlp_norm, rstd_);
  const RowMatrix<T>& dy = stream_grad_all_rows();
  if (b.router >= 0) {
    // The objective counts the layer's load-balancing loss batch * full_seq times, and the
    // backward is scaled by grad_scale throughout.
    const auto aux_weight =
        static_cast<T>(static_cast<double>(grad_scale_) * static_cast<double>(moe_tokens()));
    // h_ is the stream gradient of the rank's rows: all of them without sequence parallelism.
    const OpScope timed(OpKind::kMoe, true);
    moe_backward<T>(moe_config(), ep_, sp_ ? xs_ : xn_, h_, aux_weight, moe_weights(p, layout_, b),
                    moe_weights(grads, layout_, b), a.moe, moe_out_);
    if (experts_partial()) ep_.tensor_all_reduce(moe_out_span());  // the gradient's parts
  }
  if (b.w_gate >= 0) {
    backward_mlp(b, a, dy, grads);
    reduce_input_grad();  // each rank's MLP columns contribute to the input gradient
    if (b.router >= 0) rows_grad() += moe_out_;  // the rank's rows (summed above if split)
  } else {
    rows_grad() = moe_out_;
  }
  const OpScope timed(OpKind::kNorm, true);
  ops::rms_norm_backward<T>(a.x_mlp, vec(p, at(b.mlp_norm)), a.rstd_mlp, rows_grad(), h_,
                            vec(grads, at(b.mlp_norm)));
}

template <typename T>
void Pass<T>::backward_mlp(const BlockSlots& b, const BlockActs<T>& a, const RowMatrix<T>& dy,
                           std::span<T> grads) {
  const auto& p = in_.params;
  const int64_t f = a.gate.cols();
  for (RowMatrix<T>* m : {&act_, &d_act_, &d_gate_, &d_up_}) m->resize(n_, f);
  {
    const OpScope timed(OpKind::kActivation, true);
    ops::swiglu_forward<T>(a.gate, a.up, act_);
  }
  {
    const OpScope timed(OpKind::kMlpDown, true);
    mat(grads, at(b.w_down)).noalias() += act_.transpose() * dy;
    d_act_.noalias() = dy * mat(p, at(b.w_down)).transpose();
  }
  {
    const OpScope timed(OpKind::kActivation, true);
    d_gate_.setZero();
    d_up_.setZero();
    ops::swiglu_backward<T>(a.gate, a.up, d_act_, d_gate_, d_up_);
  }
  const OpScope timed(OpKind::kMlpGateUp, true);
  mat(grads, at(b.w_gate)).noalias() += xn_.transpose() * d_gate_;
  mat(grads, at(b.w_up)).noalias() += xn_.transpose() * d_up_;
  d_xn_.noalias() = d_gate_ * mat(p, at(b.w_gate)).transpose();
  d_xn_.noalias() += d_up_ * mat(p, at(b.w_up)).transpose();
}

template <typename T>
void Pass<T>::backward_attention(int64_t layer, const BlockActs<T>& a, std::span<T> grads) {
  const BlockSlots& b = block(layer);
  const auto& p = in_.params;
  const RowMatrix<T>& dy = stream_grad_all_rows();
  {
    const OpScope timed(OpKind::kOutProj, true);
    mat(grads, at(b.wo)).noalias() += a.attn.transpose() * dy;
    d_attn_.noalias() = dy * mat(p, at(b.wo)).transpose();
  }
  if (cp_.size == 1) {
    const OpScope timed(OpKind::kAttention, true);
    d_q_.setZero();
    d_k_.setZero();
    d_v_.setZero();
    ops::attention_backward<T>(part_shape_[0], a.q, a.k, a.v, a.attn, a.lse, d_attn_, d_q_, d_k_,
                               d_v_);
  } else {  // K and V gathered again rather than kept: a block's worth of memory less
    cp_gather(a.k, k_all_);
    cp_gather(a.v, v_all_);
    {
      const OpScope timed(OpKind::kAttention, true);
      d_q_.setZero();
      d_k_.setZero();
      d_v_.setZero();
      dk_all_.setZero();
      dv_all_.setZero();
      const int64_t rows = n_ / parts_;
      for (int64_t h = 0; h < parts_; ++h)
        ops::attention_backward<T>(
            part_shape_[static_cast<size_t>(h)], a.q.middleRows(h * rows, rows), k_all_, v_all_,
            a.attn.middleRows(h * rows, rows),
            std::span<const T>(a.lse).subspan(static_cast<size_t>(h * rows * heads_),
                                              static_cast<size_t>(rows * heads_)),
            d_attn_.middleRows(h * rows, rows), d_q_.middleRows(h * rows, rows), dk_all_, dv_all_);
    }
    cp_scatter(dk_all_, d_k_);
    cp_scatter(dv_all_, d_v_);
  }
  {
    const OpScope timed(OpKind::kRope, true);
    rotate(d_q_, heads_, true);
    rotate(d_k_, kv_heads_, true);
  }
  norm_all_rows(a.x_attn, b.attn_norm, rstd_);
  {
    const OpScope timed(OpKind::kQkvProj, true);
    mat(grads, at(b.wq)).noalias() += xn_.transpose() * d_q_;
    mat(grads, at(b.wk)).noalias() += xn_.transpose() * d_k_;
    mat(grads, at(b.wv)).noalias() += xn_.transpose() * d_v_;
    d_xn_.noalias() = d_q_ * mat(p, at(b.wq)).transpose();
    d_xn_.noalias() += d_k_ * mat(p, at(b.wk)).transpose();
    d_xn_.noalias() += d_v_ * mat(p, at(b.wv)).transpose();
  }
  reduce_input_grad();
  const OpScope timed(OpKind::kNorm, true);
  ops::rms_norm_backward<T>(a.x_attn, vec(p, at(b.attn_norm)), a.rstd_attn, rows_grad(), h_,
                            vec(grads, at(b.attn_norm)));
}

template <typename T>
Routing Pass<T>::routing() const {
  PX_CHECK(in_.train, "routing needs a training pass (every layer's activations)");
  Routing r;
  r.margin = std::numeric_limits<double>::infinity();
  const int64_t k = shape_.moe.top_k;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    if (blocks_[i].router < 0) continue;
    const MoeActs<T>& a = acts_[i].moe;
    r.experts.insert(r.experts.end(), a.expert.begin(), a.expert.end());
    for (int64_t t = 0; t < a.probs.rows(); ++t) {
      // The k-th largest probability is the smallest chosen one; the (k+1)-th the largest other.
      double kth = std::numeric_limits<double>::infinity(), next = 0;
      std::vector<char> chosen(static_cast<size_t>(a.probs.cols()), 0);
      for (int64_t j = 0; j < k; ++j) {
        const int32_t e = a.expert[static_cast<size_t>(t * k + j)];
        chosen[static_cast<size_t>(e)] = 1;
        kth = std::min(kth, static_cast<double>(a.probs(t, e)));
      }
      for (int64_t e = 0; e < a.probs.cols(); ++e)
        if (!chosen[static_cast<size_t>(e)])
          next = std::max(next, static_cast<double>(a.probs(t, e)));
      if (next > 0) r.margin = std::min(r.margin, std::log(kth / next));
    }
  }
  return r;
}

template <typename T>
std::vector<T> Pass<T>::last_logits() const {
  PX_CHECK(stage_.head, "logits on a stage without the output layer");
  const bool tied = shape_.tied_embeddings;
  const auto w = mat(in_.params, tied ? layout_.front() : layout_.back());
  const int64_t batch = in_.batch, n = in_.seq;
  RowMatrix<T> last(batch, shape_.hidden), z(batch, shape_.vocab);
  for (int64_t b = 0; b < batch; ++b) last.row(b) = xf_.row(b * n + n - 1);
  if (tied) {
    z.noalias() = last * w.transpose();
  } else {
    z.noalias() = last * w;
  }
  return std::vector<T>(z.data(), z.data() + z.size());
}

}  // namespace detail

using detail::Pass;
using detail::PassInput;

// ---- Transformer ----------------------------------------------------------------------------

// The constructor and init() are instantiated in model_layout.cc.
template <typename T>
T Transformer<T>::loss(std::span<const T> params, std::span<const int32_t> tokens, int64_t batch,
                       int64_t seq) const {
  Pass<T> pass(*this, {params, tokens, batch, seq, false});
  pass.forward();
  return static_cast<T>(pass.head(T(0), {}, {}) + pass.aux());
}

template <typename T>
T Transformer<T>::loss_and_grad(std::span<const T> params, std::span<const int32_t> tokens,
                                int64_t batch, int64_t seq, T grad_scale,
                                std::span<T> grads) const {
  PX_CHECK(static_cast<int64_t>(grads.size()) == num_params_,
           "grads has " << grads.size() << " values, the model " << num_params_);
  Pass<T> pass(*this, {params, tokens, batch, seq, true});
  pass.forward({}, grad_scale);
  // grad_scale seeds the backward (dlogits), which is linear: every gradient comes out scaled.
  const double total = pass.head(grad_scale, grads, {}) + pass.aux();
  pass.backward(grads);
  return static_cast<T>(total);
}

template <typename T>
std::vector<T> Transformer<T>::decode(std::span<const T> params, KvCache<T>& cache,
                                      std::span<const int32_t> tokens, std::span<const T> input,
                                      int64_t n, int64_t pos) const {
  PassInput<T> in{params, tokens, cache.batch(), n, false};
  in.cache = &cache;
  in.pos = pos;
  Pass<T> pass(*this, in);
  pass.forward(input);
  if (!stage_.head) return std::vector<T>(pass.stream().begin(), pass.stream().end());
  return pass.last_logits();
}

template <typename T>
KvCache<T>::KvCache(const Transformer<T>& model, int64_t batch, int64_t max_len)
    : batch_(batch), max_len_(max_len) {
  PX_CHECK(batch > 0 && max_len > 0, "a KV cache of " << batch << " x " << max_len);
  const StageRange& st = model.stage();
  for (int64_t l = st.first_layer; l < st.end_layer; ++l) {
    const std::string wk = "layers." + std::to_string(l) + ".wk";
    for (const TensorSlot& t : model.layout())
      if (t.name == wk) kv_cols_ = t.cols;
    k_.emplace_back(static_cast<size_t>(batch * max_len * kv_cols_), T(0));
    v_.emplace_back(static_cast<size_t>(batch * max_len * kv_cols_), T(0));
  }
}

template class KvCache<float>;
template class KvCache<double>;
template class Transformer<float>;
template class Transformer<double>;

// ---- StagePass ------------------------------------------------------------------------------

template <typename T>
StagePass<T>::StagePass(const Transformer<T>& model, std::span<const T> params,
                        std::span<const int32_t> tokens, int64_t batch, int64_t seq,
                        ParamUnits units)
    : pass_(std::make_unique<Pass<T>>(
          model, PassInput<T>{params, tokens, batch, seq, true, std::move(units)})) {}

template <typename T>
StagePass<T>::~StagePass() = default;

template <typename T>
double StagePass<T>::forward(std::span<const T> input, T grad_scale, std::span<T> grads) {
  pass_->forward(input, grad_scale);
  return pass_->stage().head ? pass_->head(grad_scale, grads, {}) : 0.0;
}

template <typename T>
double StagePass<T>::aux() const {
  return pass_->aux();
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

template <typename T>
Routing routing(const Transformer<T>& model, std::span<const T> params,
                std::span<const int32_t> tokens, int64_t batch, int64_t seq) {
  Pass<T> pass(model, {params, tokens, batch, seq, true});
  pass.forward();
  return pass.routing();
}

template Routing routing<float>(const Transformer<float>&, std::span<const float>,
                                std::span<const int32_t>, int64_t, int64_t);
template Routing routing<double>(const Transformer<double>&, std::span<const double>,
                                 std::span<const int32_t>, int64_t, int64_t);

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
