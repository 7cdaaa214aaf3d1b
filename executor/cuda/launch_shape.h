#pragma once
/// Launch shapes shared by the executor's CUDA kernels and the host (cuda_plan.h). C++17 and no
/// CUDA headers, so both nvcc and the host compiler include it.

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace parallax::exec::gpu {

/// A one-dimensional launch: `blocks` blocks of `threads` threads.
struct Launch1d {
  int blocks = 0;
  int threads = 0;
};

/// Threads per block of the element-wise (grid-stride) kernels.
inline constexpr int kElementwiseThreads = 256;
/// The most blocks an element-wise launch uses; its kernels stride over the rest.
inline constexpr int kMaxElementwiseBlocks = 4096;
/// Threads of the one-block-per-row kernels (RMSNorm, cross-entropy): a multiple of the warp.
inline constexpr int kRowThreads = 256;
/// Threads of the attention kernels (one block per query row, or per key row).
inline constexpr int kAttentionThreads = 128;
/// Blocks and threads of the first pass of the deterministic sums (gradient norm, loss).
inline constexpr int kReduceBlocks = 256;
inline constexpr int kReduceThreads = 256;
/// Logits are computed this many entries at a time (rows of vocab), as on the CPU.
inline constexpr int64_t kLogitChunk = int64_t{1} << 21;
/// Every buffer of the step arena starts at a multiple of this many bytes.
inline constexpr std::size_t kArenaAlign = 256;
/// cuBLAS's workspace, given to it explicitly so that it is counted (NVIDIA recommends 32 MiB
/// on Hopper).
inline constexpr std::size_t kCublasWorkspaceBytes = std::size_t{32} << 20;
/// Dynamic shared memory a kernel may use without opting in.
inline constexpr std::size_t kDefaultSmemBytes = 48 * 1024;

/// A grid-stride launch over `items` >= 0 independent items: ceil(items / threads) blocks, at
/// least 1 and at most kMaxElementwiseBlocks.
inline Launch1d elementwise_launch(int64_t items) {
  const int64_t blocks = (items + kElementwiseThreads - 1) / kElementwiseThreads;
  return {static_cast<int>(std::clamp<int64_t>(blocks, 1, kMaxElementwiseBlocks)),
          kElementwiseThreads};
}

/// Dynamic shared memory of the attention kernels, in bytes (fp32 throughout):
///   forward and dQ: one block per query row keeps its scores (seq) and its query row (head_dim);
///   dK/dV: one block per key row keeps two columns of scores (2 seq) and its K and V rows.
inline std::size_t attention_forward_smem(int64_t seq, int64_t head_dim) {
  return static_cast<std::size_t>(seq + head_dim) * sizeof(float);
}
inline std::size_t attention_dq_smem(int64_t seq, int64_t head_dim) {
  return static_cast<std::size_t>(seq + head_dim) * sizeof(float);
}
inline std::size_t attention_dkdv_smem(int64_t seq, int64_t head_dim) {
  return static_cast<std::size_t>(2 * seq + 2 * head_dim) * sizeof(float);
}

}  // namespace parallax::exec::gpu
