#pragma once
/// The executor's workload: a Llama-style decoder (token embedding, pre-norm blocks of RMSNorm,
/// rotary grouped-query causal attention and a SwiGLU MLP or a mixture of SwiGLU experts, a
/// final RMSNorm, an output layer tied to the embedding or not, cross-entropy) with forward and
/// backward written by hand. Parameters and gradients live in flat buffers with one fixed
/// layout, so that data-parallel reduction, optimizer sharding and checkpoints see one
/// contiguous array. Templated on the scalar: float for runs, double for gradient checks.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/model_spec.h"
#include "core/result.h"

namespace parallax::exec {

/// Mixture-of-experts MLPs (executor/moe.h): layers [dense_layers, layers) are MoE when
/// experts > 0. Each token goes to its top_k of `experts` routed SwiGLU experts of width
/// expert_ffn_hidden, and every token through shared_experts more, run as one dense SwiGLU MLP of
/// width shared_experts * expert_ffn_hidden. aux_loss_coeff weighs the Switch load-balancing loss.
struct MoeShape {
  int64_t experts = 0, top_k = 0, expert_ffn_hidden = 0, shared_experts = 0, dense_layers = 0;
  double aux_loss_coeff = 0.01;
};

/// The model's dimensions (Llama-style, dense or MoE; MLA is not executed). head_dim must be
/// even (rotary embeddings turn pairs) and kv_heads must divide heads. ffn_hidden is the dense
/// MLP's width (unused when every layer is MoE).
struct ModelShape {
  int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn_hidden = 0, vocab = 0;
  bool tied_embeddings = false;
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  MoeShape moe;
  bool is_moe_layer(int64_t layer) const { return moe.experts > 0 && layer >= moe.dense_layers; }
};

/// The shape of a zoo or JSON model, or why the executor cannot run it (MLA, GELU MLP, odd
/// head_dim, and whatever validate_model finds, MoE fields included), every problem listed.
/// ModelSpec records neither rope_theta, norm_eps nor the MoE load-balancing coefficient, so they
/// keep ModelShape's defaults; dropout is not applied.
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
  /// Every tensor-parallel rank holds the whole tensor (embedding, norms, output layer, router,
  /// experts; an expert-parallel rank holds its experts' row block of the expert tensors).
  bool replicated = true;
  /// A routed experts' tensor ("layers.i.experts.*"), split over the expert-parallel group.
  bool expert = false;
  int64_t size() const { return rows * cols; }
};

/// Whether AdamW's weight decay applies to the tensor: to matrices, not to norm weights (the
/// one rule of every backend's optimizer).
inline bool decays(const TensorSlot& s) { return !s.name.ends_with("norm"); }

/// Megatron-style tensor parallelism of the blocks: rank `rank` of `size` holds heads/size query
/// heads and kv_heads/size KV heads (the column blocks of wq, wk, wv and the row block of wo) and
/// ffn_hidden/size of the MLP (column blocks of w_gate, w_up; row block of w_down). Embedding,
/// norms and the output layer are replicated, so every rank computes the same logits and loss.
/// Each block's forward ends, and its backward's input gradient ends, in an all-reduce (sum)
/// over the group, which `all_reduce` performs in place on every rank alike.
///
/// With `sequence_parallel` (Megatron's sequence parallelism, size > 1) the residual stream is
/// split by rows instead of replicated: of a pass's n = batch * seq rows the rank holds rows
/// [rank * n / size, (rank + 1) * n / size) (size must divide n), and runs the norms, the
/// embedding lookup, the output layer and the loss on those rows only. Each norm's output is
/// all-gathered before the column-parallel projections (and again in backward, as Megatron
/// recomputes it), each row-parallel projection's partial output is reduce-scattered instead of
/// all-reduced, and in backward the stream's gradient is all-gathered and the input gradient
/// reduce-scattered. A stage's input and output (StagePass) are then the rank's rows; the loss a
/// rank returns is its rows' share, and the gradients of the replicated tensors (embedding,
/// norms, output layer) are its rows' contributions: summed over the group (the trainer does it
/// once per step) they are the whole model's. MoE layers route each rank's rows (ExpertParallel).
template <typename T>
struct TensorParallel {
  int size = 1, rank = 0;
  std::function<void(std::span<T>)> all_reduce;
  bool sequence_parallel = false;
  /// Every rank's `local` rows in rank order into `out` (size * local.size() values).
  std::function<void(std::span<const T> local, std::span<T> out)> all_gather{};
  /// Sums `full` over the group and leaves block `rank` of its `size` equal blocks in `out`.
  std::function<void(std::span<const T> full, std::span<T> out)> reduce_scatter{};
};

/// Context parallelism. Contiguous: rank `rank` of `size` holds positions [rank * L, (rank + 1) *
/// L) of every sequence, L = seq / size. Balanced (Megatron's split, which evens out the causal
/// work): each sequence is cut into 2 * size chunks of L = seq / (2 size) and the rank holds
/// chunks `rank` and 2 size - 1 - rank; a pass then takes 2 B rows of L positions: the early
/// chunks of its B sequences, then their late chunks. Attention all-gathers K and V over the
/// group, in forward and again in backward, and reduce-scatters their gradients; everything else
/// is per position.
template <typename T>
struct ContextParallel {
  int size = 1, rank = 0;
  /// Every rank's `local` in rank order into `out` (size * local.size() values).
  std::function<void(std::span<const T> local, std::span<T> out)> all_gather;
  /// Sums `full` (size equal chunks) over the group and leaves chunk `rank` in `out`.
  std::function<void(std::span<const T> full, std::span<T> out)> reduce_scatter;
  /// Sums `x` in place over the group, every rank alike (MoE router statistics: the
  /// load-balancing loss is over the whole microbatch). Needed when size > 1 and the stage has
  /// MoE layers.
  std::function<void(std::span<T> x)> all_reduce{};
  bool balanced = false;  ///< Megatron's two-chunk split (above); else contiguous
};

/// Expert parallelism (executor/moe.h): rank `rank` of `size` holds experts [rank * E / size,
/// (rank + 1) * E / size) of every MoE layer (the row blocks of the expert tensors; size must
/// divide E) and routes its own tokens (ep ranks hold different data, as data-parallel ranks
/// do): each MoE layer sends every token to the ranks of its chosen experts and gets their
/// outputs back with all-to-alls. Router and shared experts are not split. Expert tensors are
/// replicated over the tensor-parallel group: every tp rank runs its ep rank's experts alike.
/// all_to_all sends send_counts[r] values, consecutive in `send` in rank order, to rank r and
/// receives recv_counts[r] values from each rank r into `recv`, in rank order;
/// all_to_all_counts does the same with send.size() / size int64 values to and from each rank.
/// Both are needed when size > 1 and the stage has MoE layers.
template <typename T>
struct ExpertParallel {
  int size = 1, rank = 0;
  std::function<void(std::span<const T> send, std::span<const int64_t> send_counts,
                     std::span<T> recv, std::span<const int64_t> recv_counts)>
      all_to_all;
  std::function<void(std::span<const int64_t> send, std::span<int64_t> recv)> all_to_all_counts;
  /// Expert tensor parallelism (etp = tp, Megatron's default): each expert's MLP split over the
  /// tensor-parallel ranks (gate and up by columns, down by rows), the experts' partial outputs
  /// and the gates' partial gradients summed over them by `tensor_all_reduce`. The rank in that
  /// group is the tensor-parallel rank. 1: every tensor-parallel rank holds its experts whole.
  int tensor = 1;
  std::function<void(std::span<T>)> tensor_all_reduce{};
  /// Split experts under sequence parallelism, where each tensor-parallel rank routes its own
  /// rows: the rows an expert received from the ep group are all-gathered over the tensor group
  /// before its GEMMs and the partial outputs reduce-scattered back (Megatron's ETP all-gather
  /// and reduce-scatter; in backward, the mirror). Blocks differ in size: rank r contributes
  /// counts[r] values, in rank order; tensor_all_gather_counts gives every rank's `mine` (the
  /// same number of values on each) in rank order. Needed when tensor > 1, the tensor-parallel
  /// group is sequence-parallel and the stage has MoE layers.
  std::function<void(std::span<const T> mine, std::span<const int64_t> counts, std::span<T> out)>
      tensor_all_gather{};
  /// Sums `full` over the tensor group and leaves this rank's block (counts[rank] values after
  /// the earlier ranks' blocks) in `out`.
  std::function<void(std::span<const T> full, std::span<const int64_t> counts, std::span<T> out)>
      tensor_reduce_scatter{};
  std::function<void(std::span<const int64_t> mine, std::span<int64_t> out)>
      tensor_all_gather_counts{};
};

/// The part of the model a pipeline stage holds: blocks [first_layer, end_layer) (end_layer -1:
/// through the last), the token embedding (`embed`, the first stage) and the final norm, output
/// layer and loss (`head`, the last stage). A head stage of a tied model holds its own copy of
/// the embedding as the output layer; the trainer sums the two copies' gradients.
struct StageRange {
  int64_t first_layer = 0, end_layer = -1;
  bool embed = true, head = true;
};

/// Where a pass uses each part of a stage's parameters, for ZeRO-3/FSDP (a unit's parameters
/// gathered just before use and released after) and per-unit gradient reduction (ZeRO-2/3).
/// Units: kEmbedUnit (the token embedding; on a tied model's head stage also the output layer),
/// each block by its layer index, and kHeadUnit (final norm and untied output layer); their
/// ranges in the stage's buffer are Transformer::unit_range. A pass calls gather(u) before it
/// reads unit u's parameters, release(u) when it will not read them again until another
/// gather(u), and grads_done(u) once it has added all of this microbatch's gradient of unit u
/// (it writes no more of them). Forward: embedding, blocks in order, head; backward: head,
/// blocks in reverse, embedding. Each may be empty.
struct ParamUnits {
  static constexpr int64_t kEmbedUnit = -1, kHeadUnit = -2;
  std::function<void(int64_t unit)> gather, release, grads_done;
};

template <typename T>
class Transformer;

/// The KV cache of a pipeline stage for generation: per block, K and V (after rotary) of
/// `batch` sequences of up to `max_len` positions each, rows b * max_len + p, this
/// tensor-parallel rank's KV heads. Filled by Transformer::decode.
template <typename T>
class KvCache {
 public:
  KvCache(const Transformer<T>& model, int64_t batch, int64_t max_len);
  int64_t batch() const { return batch_; }
  int64_t max_len() const { return max_len_; }
  /// K or V of block `i` of the stage (0 = its first layer): batch * max_len rows of
  /// kv_cols values.
  std::span<T> k(size_t i) { return k_[i]; }
  std::span<T> v(size_t i) { return v_[i]; }
  int64_t kv_cols() const { return kv_cols_; }

 private:
  int64_t batch_ = 0, max_len_ = 0, kv_cols_ = 0;
  std::vector<std::vector<T>> k_, v_;
};

namespace detail {
template <typename T>
class Pass;
/// Indices into Transformer::layout() of one block's tensors, -1 where the block has none.
struct BlockSlots {
  int64_t attn_norm = -1, wq = -1, wk = -1, wv = -1, wo = -1, mlp_norm = -1;
  int64_t w_gate = -1, w_up = -1, w_down = -1;  ///< the dense MLP, or the MoE shared experts
  int64_t router = -1, experts_gate = -1, experts_up = -1, experts_down = -1;  ///< MoE only
};
}  // namespace detail

template <typename T>
class Transformer {
 public:
  /// The whole model (tp.size == 1), or rank tp.rank's shard of it; tp.size must divide
  /// kv_heads (hence heads), ffn_hidden (when a layer is dense) and the shared experts' width,
  /// and all_reduce must be set when tp.size > 1. ep splits the routed experts (ep.size must
  /// divide experts); cp.all_reduce and ep's all-to-alls are needed when the stage has MoE
  /// layers and the group has more than one rank, and ep's tensor gathers when, besides, the
  /// experts are split (ep.tensor > 1) under sequence parallelism.
  explicit Transformer(const ModelShape& shape, TensorParallel<T> tp = {}, StageRange stage = {},
                       ContextParallel<T> cp = {}, ExpertParallel<T> ep = {});

  const ModelShape& shape() const { return shape_; }
  const TensorParallel<T>& tensor_parallel() const { return tp_; }
  const ContextParallel<T>& context_parallel() const { return cp_; }
  const ExpertParallel<T>& expert_parallel() const { return ep_; }
  /// The stage this model is (end_layer resolved).
  const StageRange& stage() const { return stage_; }
  /// Every tensor in buffer order; the last one ends at num_params(). The order, and nothing else:
  ///   embed [vocab x hidden];
  ///   per layer i, prefixed "layers.i.": attn_norm [1 x hidden], wq [hidden x heads*head_dim],
  ///     wk, wv [hidden x kv_heads*head_dim], wo [heads*head_dim x hidden], mlp_norm [1 x hidden],
  ///     then a dense layer's w_gate, w_up [hidden x ffn_hidden], w_down [ffn_hidden x hidden],
  ///     or a MoE layer's router [hidden x E], experts.w_gate, experts.w_up [E*hidden x width],
  ///     experts.w_down [E*width x hidden] (expert e's block: rows e*hidden.., e*width..;
  ///     width = expert_ffn_hidden), and with S = shared_experts > 0, shared.w_gate,
  ///     shared.w_up [hidden x S*width], shared.w_down [S*width x hidden];
  ///   final_norm [1 x hidden]; output [hidden x vocab], absent when tied (logits = h embed^T).
  const std::vector<TensorSlot>& layout() const { return layout_; }
  int64_t num_params() const { return num_params_; }
  /// [begin, end) offsets in the stage's buffer of a ParamUnits unit: a block's tensors, the
  /// embedding, or the final norm with the untied output layer; {0, 0} when the stage has no
  /// such unit.
  std::pair<int64_t, int64_t> unit_range(int64_t unit) const;

  /// Deterministic initialisation from `seed`: linear weights and the embedding ~ N(0, 0.02^2)
  /// (the projections that write into the residual stream, wo and every w_down, scaled by
  /// 1/sqrt(2 layers)), norm weights 1. Samples are drawn in double (one random stream per
  /// tensor, seeded by its place in the whole model's layout, independent of the standard
  /// library's distributions) and rounded, so float and double models start from the same point.
  /// A tensor- or expert-parallel shard gets its block of the whole model's values.
  void init(std::span<T> params, uint64_t seed) const;
  /// The same for the tensors that overlap [begin, end) of the buffer only (whole tensors; the
  /// others are not written): how a ZeRO-3 rank initialises one unit at a time.
  void init(std::span<T> params, uint64_t seed, int64_t begin, int64_t end) const;

  /// The objective of one microbatch: the sum over the batch of the next-token cross-entropy
  /// (nats), summed over the batch * seq positions in double before the final rounding to T,
  /// plus, with MoE layers, batch * full_seq * (the sum over MoE layers of the load-balancing
  /// loss), full_seq = seq * cp.size. With grad_scale = 1 / (tokens in the global batch) the
  /// load-balancing loss is thus averaged over the global batch's microbatches (Megatron's
  /// weighting). Under context parallelism every rank computes the same load-balancing loss and
  /// only rank 0 includes it, so the ranks' values sum to the whole model's. `tokens` holds
  /// `batch` rows of seq + 1 ids each, every id in [0, vocab): inputs are ids [0, seq), targets
  /// ids [1, seq]; rotary positions restart at 0 in each row. Forward only. Sizes and ids out
  /// of range are programmer errors (PX_CHECK). The model holds no state that a call changes;
  /// buffers are per call.
  T loss(std::span<const T> params, std::span<const int32_t> tokens, int64_t batch,
         int64_t seq) const;

  /// The same objective, and grads += grad_scale * d(objective)/d(params): grads accumulate
  /// over calls (microbatches); zero them once per step. Callers pass grad_scale = 1 / (tokens
  /// in the global batch) to get the gradient of the mean loss. Keeps every layer's activations
  /// for the duration of the call: 2 hidden + 2 (heads + kv_heads) head_dim + 2 ffn_hidden +
  /// heads + 2 values a token per dense layer (a MoE layer: 2 shared widths instead of
  /// 2 ffn_hidden, plus about experts + 2 top_k (1 + hidden + width) values, the experts' rows
  /// averaged over the ep group), plus per-call workspace (logits go in chunks of tokens).
  T loss_and_grad(std::span<const T> params, std::span<const int32_t> tokens, int64_t batch,
                  int64_t seq, T grad_scale, std::span<T> grads) const;

  /// Generation: positions [pos, pos + n) of the cache's sequences through the stage, the same
  /// operators as training with attention against the cache (their K and V added to it; query
  /// i sees keys 0..pos + i), from `tokens` (batch * n ids, the embedding stage) or `input`
  /// (the previous stage's output, batch * n * hidden). Returns the stream leaving the stage,
  /// or on the head stage the logits of each sequence's last position (batch * vocab). MoE
  /// layers run every expert of the stage (no expert parallelism); no context parallelism.
  std::vector<T> decode(std::span<const T> params, KvCache<T>& cache,
                        std::span<const int32_t> tokens, std::span<const T> input, int64_t n,
                        int64_t pos) const;

 private:
  friend class detail::Pass<T>;
  ModelShape shape_;
  TensorParallel<T> tp_;
  StageRange stage_;
  ContextParallel<T> cp_;
  ExpertParallel<T> ep_;
  std::vector<TensorSlot> layout_;
  int64_t num_params_ = 0;
  std::vector<detail::BlockSlots> blocks_;  // the stage's blocks, first_layer first
  int64_t final_norm_ = -1;                 // in layout_, on the head stage
};

/// One microbatch in flight through one pipeline stage: its forward, then (training) its
/// backward, holding the stage's activations in between.
template <typename T>
class StagePass {
 public:
  /// `tokens`: batch rows of seq + 1 ids (the embedding stage reads the inputs, the head stage
  /// the targets); under context parallelism, this rank's slice: seq = its positions, and each
  /// row its seq inputs and the next id. Keeps references to `model`, `params` and `tokens`.
  /// `units` (optional) is told where the pass uses each parameter unit.
  StagePass(const Transformer<T>& model, std::span<const T> params, std::span<const int32_t> tokens,
            int64_t batch, int64_t seq, ParamUnits units = {});
  ~StagePass();
  StagePass(const StagePass&) = delete;
  StagePass& operator=(const StagePass&) = delete;

  /// The stage's forward from `input` (the previous stage's output(), batch * seq * hidden
  /// values; empty on the embedding stage). On the head stage it also computes the summed
  /// cross-entropy, which it returns (0 elsewhere), and starts the backward: grads +=
  /// grad_scale * the output layer's gradient. grad_scale also weighs the backward of the
  /// stage's load-balancing losses.
  double forward(std::span<const T> input, T grad_scale, std::span<T> grads);
  /// After forward: this stage's part of the objective beyond the cross-entropy,
  /// batch * full_seq * (the sum of its MoE layers' load-balancing losses) on context-parallel
  /// rank 0, 0 on other ranks and for dense stages. The microbatch's objective (what
  /// Transformer::loss returns) is the head's forward() plus every stage's aux().
  double aux() const;
  /// The residual stream leaving the stage (not on the head stage).
  std::span<const T> output() const;
  /// grads += grad_scale * d(objective)/d(stage parameters), given d(objective)/d(output())
  /// (empty on the head stage, whose forward seeded it).
  void backward(std::span<const T> d_output, std::span<T> grads);
  /// d(objective)/d(input) after backward (not on the embedding stage).
  std::span<const T> input_grad() const;

 private:
  std::unique_ptr<detail::Pass<T>> pass_;
};

extern template class KvCache<float>;
extern template class KvCache<double>;
extern template class Transformer<float>;
extern template class Transformer<double>;
extern template class StagePass<float>;
extern template class StagePass<double>;

}  // namespace parallax::exec
