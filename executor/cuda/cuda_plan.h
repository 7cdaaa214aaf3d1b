#pragma once
/// Decisions of the executor's CUDA backend that need no GPU, kept as plain data so that they are
/// tested on machines without one: which shapes it trains, where each buffer of a step lives in
/// its one device allocation, launch shapes and shared memory of the kernels, how a row-major
/// GEMM maps onto column-major cuBLAS, and which parameters decay. No CUDA headers: compiled by
/// the host compiler into parallax_executor whether or not CUDA is found.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "executor/cuda/launch_shape.h"
#include "executor/model.h"

namespace parallax::exec::gpu {

/// How a row-major GEMM  C[m x n] = alpha op(A)[m x k] op(B)[k x n] + beta C  is handed to
/// column-major cuBLAS. A row-major r x c matrix is the column-major c x r matrix of the same
/// memory, so cuBLAS computes C^T = op(B)^T op(A)^T: B goes first, A second, and the sizes are
/// (n, m, k). A is stored row-major m x k (k x m when trans_a), B k x n (n x k when trans_b); a
/// stored operand's leading dimension is its row-major column count.
struct GemmArgs {
  bool transpose_first = false;   ///< cuBLAS op of the first operand (B): CUBLAS_OP_T when set
  bool transpose_second = false;  ///< cuBLAS op of the second operand (A)
  int m = 0, n = 0, k = 0;        ///< cuBLAS's m, n, k: the row-major n, m, k
  int ld_first = 0, ld_second = 0, ldc = 0;
};

/// The cuBLAS arguments of the row-major GEMM above; every size must be positive and fit an int
/// (programmer errors).
GemmArgs gemm_args(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b);

/// Per parameter of `layout` (Transformer::layout(), `num_params` in all): 1 when AdamW decays
/// it, 0 for norm weights (names ending in "norm"), the rule of the CPU trainer.
std::vector<uint8_t> decay_mask(std::span<const TensorSlot> layout, int64_t num_params);

/// Why the CUDA backend cannot train `shape` (every problem): MoE layers, non-positive sizes,
/// kv_heads not dividing heads, an odd head_dim. `where` prefixes the diagnostics.
Diagnostics check_cuda_shape(const ModelShape& shape, const std::string& where);

/// One step's sizes.
struct StepShape {
  int64_t batch = 0;                              ///< sequences per microbatch
  int64_t seq = 0;                                ///< positions per sequence
  int64_t microbatches = 0;                       ///< per step
  int64_t tokens() const { return batch * seq; }  ///< positions per microbatch
};

/// Problems with a step: non-positive sizes, `token_count` not microbatches * batch * (seq + 1),
/// ids outside [0, vocab), sizes beyond cuBLAS's int or the attention kernels' shared memory
/// (`max_smem_bytes`, the device's opt-in limit per block).
Diagnostics check_step(const ModelShape& shape, const StepShape& step,
                       std::span<const int32_t> tokens, std::size_t max_smem_bytes);

/// Rows of logits computed at once for `tokens` rows of `vocab`: kLogitChunk / vocab, within
/// [1, tokens].
int64_t logit_chunk_rows(int64_t tokens, int64_t vocab);

/// Byte offsets, in the step arena, of one block's saved activations (fp32; rows are tokens).
struct LayerBuffers {
  std::size_t x_attn = 0, x_mlp = 0;          ///< the block's inputs to its norms, n x hidden
  std::size_t q = 0, k = 0, v = 0, attn = 0;  ///< after rotary; attention output before wo
  std::size_t gate = 0, up = 0;               ///< the MLP before SwiGLU, n x ffn_hidden
  std::size_t rstd_attn = 0, rstd_mlp = 0;    ///< n each
  std::size_t lse = 0;                        ///< n x heads, [row * heads + head]
};

/// Where every buffer of one microbatch's forward and backward lives in one allocation of
/// total_bytes, each at a multiple of kArenaAlign: the layers' activations, then the workspace
/// shared by the blocks. fp32 unless noted.
struct StepBuffers {
  int64_t tokens = 0;      ///< n = batch * seq
  int64_t logit_rows = 0;  ///< rows of the logits chunk
  std::vector<LayerBuffers> layers;
  std::size_t inputs = 0, targets = 0;     ///< int32, n each
  std::size_t rope_cos = 0, rope_sin = 0;  ///< seq x head_dim / 2 each
  std::size_t h = 0, x_final = 0, xf = 0;  ///< residual stream (then its gradient), n x hidden
  std::size_t rstd_final = 0, rstd = 0;    ///< n each
  std::size_t xn = 0, d_xn = 0;            ///< n x hidden
  std::size_t d_q = 0, d_attn = 0;         ///< n x heads * head_dim
  std::size_t d_k = 0, d_v = 0;            ///< n x kv_heads * head_dim
  std::size_t act = 0, d_act = 0, d_gate = 0, d_up = 0;  ///< n x ffn_hidden
  std::size_t delta = 0;                                 ///< n x heads: rowsum(dout * out)
  std::size_t logits = 0;                                ///< logit_rows x vocab
  std::size_t row_loss = 0;                              ///< double, n
  std::size_t partials = 0;                              ///< double, kReduceBlocks
  std::size_t sums = 0;  ///< double, 2: the loss and the squared norm
  std::size_t total_bytes = 0;
};

/// The arena of a microbatch of `tokens` = batch * seq positions. Its activations take
/// 2 hidden + 2 (heads + kv_heads) head_dim + 2 ffn_hidden + heads + 2 floats a token per layer,
/// as on the CPU.
StepBuffers plan_step_buffers(const ModelShape& shape, int64_t batch, int64_t seq);

/// Bytes of the persistent state of `num_params` parameters: parameters, gradients and both
/// AdamW moments in fp32, and the decay mask (one byte a parameter), each rounded up to
/// kArenaAlign.
std::size_t persistent_bytes(int64_t num_params);

/// `bytes` rounded up to a multiple of kArenaAlign.
std::size_t align_up(std::size_t bytes);

}  // namespace parallax::exec::gpu
