#pragma once
/// Host-side launchers of the executor's CUDA kernels (layer_kernels.cu, attention_kernels.cu,
/// loss_kernels.cu): the operators of executor/model_ops.h in fp32, same formulas and, where it
/// matters for rounding, the same order of operations. Matrices are row-major with tokens as
/// rows (row b * seq + s is position s of sequence b). Each launcher enqueues on `stream` and
/// returns the launch's error (cudaGetLastError); none synchronises. Gradient outputs of the
/// weight kernels accumulate (+=) like the CPU's; activation gradients are assigned unless
/// noted. Every kernel is deterministic: no atomics, fixed reduction orders.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace parallax::exec::gpu {

// ---- embedding ------------------------------------------------------------------------------

/// h[r, :] = embed[ids[r], :] for the n rows.
cudaError_t launch_embedding_forward(const float* embed, const int32_t* ids, float* h, int64_t n,
                                     int64_t hidden, cudaStream_t stream);
/// g_embed[ids[r], :] += dh[r, :], rows in order (one thread per column: no races).
cudaError_t launch_embedding_backward(const float* dh, const int32_t* ids, float* g_embed,
                                      int64_t n, int64_t hidden, cudaStream_t stream);

// ---- RMSNorm --------------------------------------------------------------------------------

/// y = x * r * w per row, r = 1 / sqrt(mean(x^2) + eps), written to rstd[row]. One block a row.
cudaError_t launch_rms_norm_forward(const float* x, const float* w, float eps, float* y,
                                    float* rstd, int64_t rows, int64_t cols, cudaStream_t stream);
/// dx += r * dy * w - x * r^3 * mean(dy * w * x) per row. One block a row.
cudaError_t launch_rms_norm_backward(const float* x, const float* w, const float* rstd,
                                     const float* dy, float* dx, int64_t rows, int64_t cols,
                                     cudaStream_t stream);
/// dw += sum over rows of dy * x * r (one thread per column, rows in order).
cudaError_t launch_rms_norm_weight_grad(const float* x, const float* rstd, const float* dy,
                                        float* dw, int64_t rows, int64_t cols, cudaStream_t stream);

// ---- rotary position embedding --------------------------------------------------------------

/// Rotates every head of x (rows x heads * head_dim, row r at position r % seq) in place in the
/// "rotate half" convention: the pair (x[i], x[i + d/2]) turns by the angle whose cosine and
/// sine are cos_table[p * d/2 + i], sin_table[...] (seq x d/2, computed on the host in double);
/// `inverse` turns the other way (the backward).
cudaError_t launch_rotary(float* x, const float* cos_table, const float* sin_table, int64_t rows,
                          int64_t seq, int64_t heads, int64_t head_dim, bool inverse,
                          cudaStream_t stream);

// ---- SwiGLU ---------------------------------------------------------------------------------

/// out = silu(gate) * up over `count` elements.
cudaError_t launch_swiglu_forward(const float* gate, const float* up, float* out, int64_t count,
                                  cudaStream_t stream);
/// dgate = dout * up * sig * (1 + g (1 - sig)), dup = dout * silu(g); assigned.
cudaError_t launch_swiglu_backward(const float* gate, const float* up, const float* dout,
                                   float* dgate, float* dup, int64_t count, cudaStream_t stream);

// ---- causal grouped-query attention ---------------------------------------------------------

/// The operands of attention over `batch` sequences of `seq` positions: q, out, dout, dq are
/// (batch * seq) x (heads * head_dim); k, v, dk, dv are (batch * seq) x (kv_heads * head_dim);
/// lse and delta are (batch * seq) x heads. Query head j reads kv head j / (heads / kv_heads).
struct AttentionArgs {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float* out = nullptr;
  float* lse = nullptr;
  const float* dout = nullptr;
  float* delta = nullptr;
  float* dq = nullptr;
  float* dk = nullptr;
  float* dv = nullptr;
  int64_t batch = 0, seq = 0, heads = 0, kv_heads = 0, head_dim = 0;
};

/// Lets the attention kernels use the dynamic shared memory that sequences of `seq` need
/// (launch_shape.h; beyond 48 KiB a kernel must opt in). Call before the first launch at a
/// longer seq than before.
cudaError_t configure_attention_smem(int64_t seq, int64_t head_dim);
/// out = softmax(q k^T / sqrt(head_dim) + causal mask) v and lse (the scaled scores'
/// log-sum-exp). One block per (query row, head, sequence).
cudaError_t launch_attention_forward(const AttentionArgs& a, cudaStream_t stream);
/// delta = rowsum(dout * out), then dq (one block per query row) and dk, dv (one block per key
/// row and kv head, summing its group's query heads), all assigned, probabilities recomputed
/// from lse.
cudaError_t launch_attention_backward(const AttentionArgs& a, cudaStream_t stream);

// ---- cross-entropy, sums, AdamW -------------------------------------------------------------

/// Per row of `rows` x `vocab` logits: row_loss[r] = max + log(sum exp(l - max)) - l[target]
/// (double), and, when `write_grad`, logits overwritten by grad_scale * (softmax - onehot).
cudaError_t launch_cross_entropy(float* logits, const int32_t* targets, double* row_loss,
                                 int64_t rows, int64_t vocab, float grad_scale, bool write_grad,
                                 cudaStream_t stream);
/// *out = sum of x[i]^2 in double (partials: kReduceBlocks doubles of scratch). Deterministic.
cudaError_t launch_sum_squares(const float* x, int64_t n, double* partials, double* out,
                               cudaStream_t stream);
/// *out = sum of x[i] in double, the same way.
cudaError_t launch_sum(const double* x, int64_t n, double* partials, double* out,
                       cudaStream_t stream);

/// The scalars of one AdamW step, computed on the host exactly as AdamW::step does.
struct AdamWScalars {
  float grad_scale = 1;  ///< clipping: min(1, clip_norm / grad_norm)
  float beta1 = 0, beta2 = 0;
  float step_size = 0;  ///< lr / (1 - beta1^t)
  float inv_c2 = 0;     ///< 1 / (1 - beta2^t)
  float eps = 0;
  float decay = 0;  ///< lr * weight_decay
};
/// AdamW over n parameters, element for element the float arithmetic of AdamW::step.
cudaError_t launch_adamw(float* params, const float* grads, float* m, float* v,
                         const uint8_t* decay_mask, int64_t n, const AdamWScalars& s,
                         cudaStream_t stream);

}  // namespace parallax::exec::gpu
