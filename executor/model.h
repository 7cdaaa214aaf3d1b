#pragma once
/// The executor's workload: a Llama-style decoder (token embedding, pre-norm blocks of RMSNorm,
/// rotary grouped-query causal attention and a SwiGLU MLP, a final RMSNorm, an output layer tied
/// to the embedding or not, cross-entropy) with forward and backward written by hand. Parameters
/// and gradients live in flat buffers with one fixed layout, so that data-parallel reduction,
/// optimizer sharding and checkpoints see one contiguous array. Templated on the scalar: float
/// for runs, double for gradient checks.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/result.h"

namespace parallax::exec {

/// The model's dimensions (dense Llama-style; MoE and MLA are not executed yet). head_dim must be
/// even (rotary embeddings turn pairs) and kv_heads must divide heads.
struct ModelShape {
  int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn_hidden = 0, vocab = 0;
  bool tied_embeddings = false;
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
};

/// The shape of a zoo or JSON model, or why the executor cannot run it (MoE, MLA, GELU MLP, odd
/// head_dim, and whatever validate_model finds), every problem listed. ModelSpec records neither
/// rope_theta nor norm_eps, so they keep ModelShape's defaults; dropout is not applied.
Result<ModelShape> executable_shape(const ModelSpec& m);

/// One named tensor of the flat parameter buffer: row-major rows x cols at `offset`. Linear
/// weights are stored in x @ W form (rows = inputs, cols = outputs); norm weights are 1 x hidden.
/// Under tensor parallelism the slot is a block of the whole (logical) tensor: rows x cols at
/// (row0, col0) of full_rows x full_cols; without it, the whole tensor.
struct TensorSlot {
  std::string name;  ///< "embed", "layers.3.wq", "final_norm", "output"
  int64_t offset = 0, rows = 0, cols = 0;
  int64_t index = 0;  ///< place in the whole model's layout (its initialisation stream)
  int64_t full_rows = 0, full_cols = 0, row0 = 0, col0 = 0;
  /// Every tensor-parallel rank holds the whole tensor (embedding, norms, output layer).
  bool replicated = true;
  int64_t size() const { return rows * cols; }
};

/// Megatron-style tensor parallelism of the blocks: rank `rank` of `size` holds heads/size query
/// heads and kv_heads/size KV heads (the column blocks of wq, wk, wv and the row block of wo) and
/// ffn_hidden/size of the MLP (column blocks of w_gate, w_up; row block of w_down). Embedding,
/// norms and the output layer are replicated, so every rank computes the same logits and loss.
/// Each block's forward ends, and its backward's input gradient ends, in an all-reduce (sum)
/// over the group, which `all_reduce` performs in place on every rank alike.
template <typename T>
struct TensorParallel {
  int size = 1, rank = 0;
  std::function<void(std::span<T>)> all_reduce;
};

/// Context parallelism: rank `rank` of `size` holds positions [rank * L, (rank + 1) * L) of every
/// sequence, L = seq / size (a contiguous split: the causal work is not balanced across ranks,
/// unlike Megatron's two-chunk split). Attention all-gathers K and V over the group, in forward
/// and again in backward, and reduce-scatters their gradients; everything else is per position.
template <typename T>
struct ContextParallel {
  int size = 1, rank = 0;
  /// Every rank's `local` in rank order into `out` (size * local.size() values).
  std::function<void(std::span<const T> local, std::span<T> out)> all_gather;
  /// Sums `full` (size equal chunks) over the group and leaves chunk `rank` in `out`.
  std::function<void(std::span<const T> full, std::span<T> out)> reduce_scatter;
};

/// The part of the model a pipeline stage holds: blocks [first_layer, end_layer) (end_layer -1:
/// through the last), the token embedding (`embed`, the first stage) and the final norm, output
/// layer and loss (`head`, the last stage). A head stage of a tied model holds its own copy of
/// the embedding as the output layer; the trainer sums the two copies' gradients.
struct StageRange {
  int64_t first_layer = 0, end_layer = -1;
  bool embed = true, head = true;
};

namespace detail {
template <typename T>
class Pass;
}

template <typename T>
class Transformer {
 public:
  /// The whole model (tp.size == 1), or rank tp.rank's shard of it; tp.size must divide
  /// kv_heads (hence heads) and ffn_hidden, and all_reduce must be set when tp.size > 1.
  explicit Transformer(const ModelShape& shape, TensorParallel<T> tp = {}, StageRange stage = {},
                       ContextParallel<T> cp = {});

  const ModelShape& shape() const { return shape_; }
  const TensorParallel<T>& tensor_parallel() const { return tp_; }
  const ContextParallel<T>& context_parallel() const { return cp_; }
  /// The stage this model is (end_layer resolved).
  const StageRange& stage() const { return stage_; }
  /// Every tensor in buffer order; the last one ends at num_params(). The order, and nothing else:
  ///   embed [vocab x hidden];
  ///   per layer i, prefixed "layers.i.": attn_norm [1 x hidden], wq [hidden x heads*head_dim],
  ///     wk, wv [hidden x kv_heads*head_dim], wo [heads*head_dim x hidden], mlp_norm [1 x hidden],
  ///     w_gate, w_up [hidden x ffn_hidden], w_down [ffn_hidden x hidden];
  ///   final_norm [1 x hidden]; output [hidden x vocab], absent when tied (logits = h embed^T).
  const std::vector<TensorSlot>& layout() const { return layout_; }
  int64_t num_params() const { return num_params_; }

  /// Deterministic initialisation from `seed`: linear weights and the embedding ~ N(0, 0.02^2)
  /// (the output projections of attention and MLP scaled by 1/sqrt(2 layers)), norm weights 1.
  /// Samples are drawn in double (one random stream per tensor, independent of the standard
  /// library's distributions) and rounded, so float and double models start from the same point.
  /// A tensor-parallel shard gets its block of the whole model's values.
  void init(std::span<T> params, uint64_t seed) const;

  /// Sum over the batch of the next-token cross-entropy (nats), summed over the batch * seq
  /// positions in double before the final rounding to T. `tokens` holds `batch` rows of seq + 1
  /// ids each, every id in [0, vocab): inputs are ids [0, seq), targets ids [1, seq]; rotary
  /// positions restart at 0 in each row. Forward only. Sizes and ids out of range are programmer
  /// errors (PX_CHECK). The model holds no state that a call changes; buffers are per call.
  T loss(std::span<const T> params, std::span<const int32_t> tokens, int64_t batch,
         int64_t seq) const;

  /// The same summed loss, and grads += grad_scale * d(summed loss)/d(params): grads accumulate
  /// over calls (microbatches); zero them once per step. Callers pass grad_scale = 1 / (tokens
  /// in the global batch) to get the gradient of the mean loss. Keeps every layer's activations
  /// for the duration of the call: 2 hidden + 2 (heads + kv_heads) head_dim + 2 ffn_hidden +
  /// heads + 2 values a token per layer, plus per-call workspace (logits go in chunks of tokens).
  T loss_and_grad(std::span<const T> params, std::span<const int32_t> tokens, int64_t batch,
                  int64_t seq, T grad_scale, std::span<T> grads) const;

 private:
  ModelShape shape_;
  TensorParallel<T> tp_;
  StageRange stage_;
  ContextParallel<T> cp_;
  std::vector<TensorSlot> layout_;
  int64_t num_params_ = 0;
};

/// One microbatch in flight through one pipeline stage: its forward, then (training) its
/// backward, holding the stage's activations in between.
template <typename T>
class StagePass {
 public:
  /// `tokens`: batch rows of seq + 1 ids (the embedding stage reads the inputs, the head stage
  /// the targets); under context parallelism, this rank's slice: seq = its positions, and each
  /// row its seq inputs and the next id. Keeps references to `model`, `params` and `tokens`.
  StagePass(const Transformer<T>& model, std::span<const T> params, std::span<const int32_t> tokens,
            int64_t batch, int64_t seq);
  ~StagePass();
  StagePass(const StagePass&) = delete;
  StagePass& operator=(const StagePass&) = delete;

  /// The stage's forward from `input` (the previous stage's output(), batch * seq * hidden
  /// values; empty on the embedding stage). On the head stage it also computes the summed loss,
  /// which it returns (0 elsewhere), and starts the backward: grads += grad_scale * the output
  /// layer's gradient.
  double forward(std::span<const T> input, T grad_scale, std::span<T> grads);
  /// The residual stream leaving the stage (not on the head stage).
  std::span<const T> output() const;
  /// grads += grad_scale * d(loss)/d(stage parameters), given d(loss)/d(output()) (empty on the
  /// head stage, whose forward seeded it).
  void backward(std::span<const T> d_output, std::span<T> grads);
  /// d(loss)/d(input) after backward (not on the embedding stage).
  std::span<const T> input_grad() const;

 private:
  std::unique_ptr<detail::Pass<T>> pass_;
};

extern template class Transformer<float>;
extern template class Transformer<double>;
extern template class StagePass<float>;
extern template class StagePass<double>;

}  // namespace parallax::exec
