#pragma once
/// The operators of the executor's transformer (executor/model.h), each a forward and a
/// hand-written backward over row-major Eigen matrices whose rows are tokens: row b * seq + s is
/// position s of sequence b. Every backward adds (+=) into its gradient outputs, so residual
/// branches and shared weights accumulate without copies; callers zero what must start at zero.
/// The one exception is cross_entropy_backward, which seeds the backward pass and assigns.
/// Templated on the scalar (float for runs, double for gradient checks), instantiated for both in
/// model_ops.cc. Single-threaded; no function keeps state between calls.

// Every translation unit that uses Eigen is built with the same instruction set (the top-level
// PARALLAX_NATIVE option): the linker keeps one copy of Eigen's inline functions, and mixed ISAs
// would mix heap alignments.
#include <Eigen/Core>
#include <cstdint>
#include <span>
#include <vector>

#include "executor/model.h"

namespace parallax::exec::ops {

template <typename T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
/// A writable view of a row-major matrix, map or block (unit inner stride, any row stride).
template <typename T>
using MatrixRef = Eigen::Ref<RowMatrix<T>>;
/// A read-only view; binds to matrices, maps and blocks without copying.
template <typename T>
using ConstMatrixRef = Eigen::Ref<const RowMatrix<T>>;

// ---- RMSNorm --------------------------------------------------------------------------------

/// y = x * r * w per row, r = 1 / sqrt(mean(x^2) + eps); x, y are n x h, w has h entries.
/// Writes the n values of r to `rstd` (the backward needs them).
template <typename T>
void rms_norm_forward(const ConstMatrixRef<T>& x, std::span<const T> w, T eps, MatrixRef<T> y,
                      std::span<T> rstd);

/// With g = dy * w and r from the forward:
///   dx += r * g - x * r^3 * mean(g * x)   (per row),   dw += sum over rows of dy * x * r.
template <typename T>
void rms_norm_backward(const ConstMatrixRef<T>& x, std::span<const T> w, std::span<const T> rstd,
                       const ConstMatrixRef<T>& dy, MatrixRef<T> dx, std::span<T> dw);

// ---- rotary position embedding --------------------------------------------------------------

/// The cosines and sines of rotary embeddings in the Llama/HF "rotate half" convention: the pair
/// (x[i], x[i + d/2]) of a head at position p turns by the angle p * theta^(-2i/d). The angles
/// are computed in double, so float and double models see the same table up to rounding.
template <typename T>
class RotaryTable {
 public:
  /// Positions position0 .. position0 + seq - 1 (a context-parallel rank's slice).
  RotaryTable(int64_t seq, int64_t head_dim, double theta, int64_t position0 = 0);

  /// Rotates every head of `x` in place: x is (sequences * seq) x (heads * head_dim), row r at
  /// position position0 + r % seq. `inverse` turns by the opposite angle, which is also the
  /// backward: the rotation is orthogonal, so dx = R^T dy = R^-1 dy.
  void rotate(MatrixRef<T> x, int64_t heads, bool inverse) const;

 private:
  int64_t seq_ = 0, half_ = 0;
  std::vector<T> cos_, sin_;  // seq x half, row-major
};

// ---- causal grouped-query attention ---------------------------------------------------------

/// `seq` query rows per sequence at positions q_offset.. q_offset + seq - 1, against `kv_seq`
/// key rows per sequence at positions 0.. (0: kv_seq = seq). A context-parallel rank holds a
/// slice of the queries and the gathered keys; q_offset + seq <= kv_seq.
struct AttentionShape {
  int64_t batch = 0, seq = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t kv_seq = 0, q_offset = 0;
  int64_t keys() const { return kv_seq > 0 ? kv_seq : seq; }
};

/// out = softmax(q k^T / sqrt(head_dim) + causal mask) v per (sequence, query head); query head
/// j reads kv head j / (heads / kv_heads). q, out are (batch * seq) x (heads * head_dim); k, v
/// are (batch * keys()) x (kv_heads * head_dim); query row i of a sequence sees keys
/// 0..q_offset + i. Writes each row's log-sum-exp of the scaled scores
/// to lse[row * heads + head]. Computed in blocks of query rows, each against its keys
/// [0, end of block) only: the workspace is one block x seq tile, never seq x seq per head.
template <typename T>
void attention_forward(const AttentionShape& s, const ConstMatrixRef<T>& q,
                       const ConstMatrixRef<T>& k, const ConstMatrixRef<T>& v, MatrixRef<T> out,
                       std::span<T> lse);

/// The gradients of attention_forward, adding into dq, dk, dv (shaped like q, k, v). The
/// probabilities are recomputed from q, k and the saved lse (FlashAttention-2's backward):
///   dv += p^T dout,  ds = p * (dout v^T - rowsum(dout * out)),
///   dq += ds k / sqrt(d),  dk += ds^T q / sqrt(d).
template <typename T>
void attention_backward(const AttentionShape& s, const ConstMatrixRef<T>& q,
                        const ConstMatrixRef<T>& k, const ConstMatrixRef<T>& v,
                        const ConstMatrixRef<T>& out, std::span<const T> lse,
                        const ConstMatrixRef<T>& dout, MatrixRef<T> dq, MatrixRef<T> dk,
                        MatrixRef<T> dv);

// ---- SwiGLU ---------------------------------------------------------------------------------

/// out = silu(gate) * up elementwise, silu(g) = g * sigmoid(g).
template <typename T>
void swiglu_forward(const ConstMatrixRef<T>& gate, const ConstMatrixRef<T>& up, MatrixRef<T> out);

/// dgate += dout * up * sigmoid(g) * (1 + g * (1 - sigmoid(g))),  dup += dout * silu(gate).
template <typename T>
void swiglu_backward(const ConstMatrixRef<T>& gate, const ConstMatrixRef<T>& up,
                     const ConstMatrixRef<T>& dout, MatrixRef<T> dgate, MatrixRef<T> dup);

// ---- cross-entropy --------------------------------------------------------------------------

/// Sum over rows of -log softmax(logits)[target] in nats, with a stable log-sum-exp
/// (max + log sum exp(l - max)), accumulated in double. `targets` has one id in [0, cols) a row.
/// When `row_losses` is not empty it receives each row's loss.
template <typename T>
double cross_entropy_forward(const ConstMatrixRef<T>& logits, std::span<const int32_t> targets,
                             std::span<double> row_losses = {});

/// The same sum, and dlogits = grad_scale * (softmax(logits) - onehot(target)), assigned (it
/// seeds the backward). dlogits may be the storage of logits: each row is read before written.
template <typename T>
double cross_entropy_backward(const ConstMatrixRef<T>& logits, std::span<const int32_t> targets,
                              T grad_scale, MatrixRef<T> dlogits);

// ---- whole model ----------------------------------------------------------------------------

/// The next-token loss of every position (row b * seq + s of `out`, which has batch * seq
/// entries) of the forward pass that Transformer::loss sums; for tests (causality) and
/// diagnostics. Arguments as in Transformer::loss. Defined in model.cc.
template <typename T>
void position_losses(const Transformer<T>& model, std::span<const T> params,
                     std::span<const int32_t> tokens, int64_t batch, int64_t seq,
                     std::span<double> out);

}  // namespace parallax::exec::ops
