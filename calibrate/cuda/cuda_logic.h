#pragma once
/// Decisions of the CUDA backend that need no GPU, kept as plain data so they can be tested on a
/// machine without one: launch shapes, the attention tiling, the cuBLASLt layout of a GEMM, the
/// element counts of a collective under the nccl-tests byte conventions, the groups of a
/// grouped collective. Pure, header-only C++: no CUDA headers and no library, so the test builds
/// everywhere.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "calibrate/backend.h"
#include "core/hw_profile.h"
#include "core/result.h"

namespace parallax::calibrate::gpu {

/// A one-dimensional launch: `blocks` blocks of `threads` threads.
struct Launch1d {
  int blocks = 0;
  int threads = 0;
};

/// Threads per block of the grid-stride kernels.
inline constexpr int kGridStrideThreads = 256;
/// Resident blocks per SM a grid-stride launch aims for (enough to hide memory latency).
inline constexpr int kGridStrideBlocksPerSm = 8;

/// A grid-stride launch over `items` independent work items: kGridStrideBlocksPerSm blocks per
/// SM, but never more blocks than the items fill (at least one block). `items` >= 0,
/// `sm_count` >= 1.
Launch1d grid_stride_launch(int64_t items, int sm_count);

/// Threads of a one-block-per-row kernel over rows of `cols` elements read `vec` at a time: the
/// vectors of a row rounded up to a warp, within [32, 512].
int row_block_threads(int64_t cols, int vec);

/// bf16 elements a row kernel reads at once: 8 (one 16-byte load) when rows stay 16-byte
/// aligned, that is when `cols` is a multiple of 8, else 1.
int row_vector_width(int64_t cols);

// Attention tiling, shared by the kernels (attention_kernels.cu) and the host. One thread owns
// one row (a query in the forward and dQ passes, a key in the dK and dV passes); a block owns
// kAttnBlockRows consecutive rows and streams the other side through shared memory
// kAttnTileRows rows at a time.
inline constexpr int kAttnBlockRows = 64;
inline constexpr int kAttnTileRows = 16;
/// Padding of the transposed own-row arrays, so that the transposing stores hit distinct banks.
inline constexpr int kAttnOwnPitch = kAttnBlockRows + 1;

/// Whether our attention kernels are compiled for `head_dim` (64 and 128).
bool attention_head_dim_supported(int64_t head_dim);

/// Dynamic shared memory of one attention block for `head_dim`, in bytes: two transposed
/// own-row arrays of bf16 pairs, two fp32 tiles, and the tile's logsumexp and delta.
std::size_t attention_smem_bytes(int head_dim);

/// Blocks along the rows of one head: ceil(seq / kAttnBlockRows).
int64_t attention_row_blocks(int64_t seq);

/// Problems with an attention shape: non-positive sizes, an unsupported head_dim, more heads
/// than a grid's y dimension holds. `where` prefixes the diagnostics.
Diagnostics check_attention_shape(int64_t batch_heads, int64_t seq, int64_t head_dim,
                                  const std::string& where);

/// How one (m x k)(k x n) GEMM is laid out for cuBLASLt, which is column-major. We use the "TN"
/// layout for every precision, because fp8 on Hopper and Ada only runs as TN:
///   A is stored k x m column-major (ld k), i.e. row-major m x k; op(A) = A^T is m x k.
///   B is stored k x n column-major (ld k), i.e. row-major n x k (a Linear layer's weight);
///     op(B) = B is k x n.
///   D (and C) is m x n column-major (ld m).
/// Both inputs keep k contiguous, as a transformer's activations and weights do.
struct GemmLayout {
  int64_t a_rows = 0, a_cols = 0, lda = 0;
  int64_t b_rows = 0, b_cols = 0, ldb = 0;
  int64_t d_rows = 0, d_cols = 0, ldd = 0;
  bool transpose_a = true;
  bool transpose_b = false;
};
GemmLayout gemm_layout(int64_t m, int64_t n, int64_t k);

/// Bytes of one element of a GEMM's inputs (2 for bf16, 1 for fp8, 4 for fp32).
int gemm_input_bytes(Precision p);

/// Problems with a GEMM shape on cuBLASLt: non-positive sizes; fp8 needs m, n and k to be
/// multiples of 16 (16-byte aligned leading dimensions); precisions this backend lacks.
Diagnostics check_gemm_shape(int64_t m, int64_t n, int64_t k, Precision p,
                             const std::string& where);

/// Element counts of one collective over `ranks` ranks, from the nccl-tests `bytes` (see
/// Communicator::collective): what each rank sends and receives, and the per-peer chunk of
/// all-to-all. Counts are rounded down to whole elements (and whole per-rank chunks), with at
/// least one element per rank.
struct CollectiveCounts {
  int64_t send_elems = 0;
  int64_t recv_elems = 0;
  int64_t chunk_elems = 0;  ///< per-rank share: all-gather input, reduce-scatter output, a2a chunk
};
CollectiveCounts collective_counts(CollectiveOp op, double bytes, int ranks, int elem_bytes);

/// The partner of `rank` in send/recv pairs 2i <-> 2i+1, or -1 for the last rank of an odd
/// count.
int sendrecv_partner(int rank, int ranks);

/// A grouping in words: "groups of 4 ranks", "groups of 2 ranks 8 apart".
std::string describe_grouping(Grouping g);

/// Every problem with `g` over `world` ranks (empty exactly when valid_grouping(g, world)):
/// groups of fewer than 2 ranks, a stride below 1, groups that do not tile the world. `where`
/// prefixes the diagnostics.
Diagnostics check_grouping(Grouping g, int world, const std::string& where);

/// The ranks of every group of `g` over `world` ranks, which `g` must tile: members[c][i] is the
/// rank of color c (group_color) and group rank i (group_rank), so each group lists its ranks in
/// rising order, and member i of a group is that group's rank i (ncclCommInitAll's devlist order).
std::vector<std::vector<int>> grouping_members(Grouping g, int world);

/// A CUDA version number as text: 12040 -> "12.4", 13000 -> "13.0".
std::string format_cuda_version(int version);

// ---- Definitions (inline, so the logic test needs no CUDA library). ----
namespace detail {

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The largest grid y dimension CUDA allows; attention puts one head per y index.
inline constexpr int64_t kMaxGridY = 65535;

}  // namespace detail

inline Launch1d grid_stride_launch(int64_t items, int sm_count) {
  const int64_t wanted = static_cast<int64_t>(std::max(sm_count, 1)) * kGridStrideBlocksPerSm;
  const int64_t needed = std::max<int64_t>(detail::ceil_div(items, kGridStrideThreads), 1);
  return Launch1d{static_cast<int>(std::min(wanted, needed)), kGridStrideThreads};
}

inline int row_block_threads(int64_t cols, int vec) {
  const int64_t vectors = detail::ceil_div(std::max<int64_t>(cols, 1), std::max(vec, 1));
  return static_cast<int>(std::clamp<int64_t>(detail::ceil_div(vectors, 32) * 32, 32, 512));
}

inline int row_vector_width(int64_t cols) { return cols % 8 == 0 ? 8 : 1; }

inline bool attention_head_dim_supported(int64_t head_dim) {
  return head_dim == 64 || head_dim == 128;
}

inline std::size_t attention_smem_bytes(int head_dim) {
  const std::size_t own = static_cast<std::size_t>(head_dim / 2) * kAttnOwnPitch * 4;
  const std::size_t tile = static_cast<std::size_t>(kAttnTileRows) * head_dim * 4;
  return 2 * own + 2 * tile + 2 * kAttnTileRows * sizeof(float);
}

inline int64_t attention_row_blocks(int64_t seq) { return detail::ceil_div(seq, kAttnBlockRows); }

inline Diagnostics check_attention_shape(int64_t batch_heads, int64_t seq, int64_t head_dim,
                                         const std::string& where) {
  Diagnostics ds;
  if (batch_heads < 1 || seq < 1 || head_dim < 1) {
    ds.push_back({where,
                  "batch_heads, seq and head_dim must be positive, got " +
                      std::to_string(batch_heads) + ", " + std::to_string(seq) + ", " +
                      std::to_string(head_dim),
                  ""});
    return ds;
  }
  if (!attention_head_dim_supported(head_dim)) {
    ds.push_back({where, "head_dim=" + std::to_string(head_dim) + " has no kernel",
                  "head_dim in {64, 128}"});
  }
  if (batch_heads > detail::kMaxGridY) {
    ds.push_back({where, "batch_heads=" + std::to_string(batch_heads) + " exceeds the grid",
                  "at most " + std::to_string(detail::kMaxGridY) + " heads per launch"});
  }
  return ds;
}

inline GemmLayout gemm_layout(int64_t m, int64_t n, int64_t k) {
  GemmLayout l;
  l.a_rows = k;
  l.a_cols = m;
  l.lda = k;
  l.b_rows = k;
  l.b_cols = n;
  l.ldb = k;
  l.d_rows = m;
  l.d_cols = n;
  l.ldd = m;
  l.transpose_a = true;
  l.transpose_b = false;
  return l;
}

inline int gemm_input_bytes(Precision p) {
  switch (p) {
    case Precision::kBf16:
      return 2;
    case Precision::kFp8:
      return 1;
    case Precision::kFp32:
      return 4;
    case Precision::kMxfp8:
    case Precision::kNvfp4:
      break;  // not measured: check_gemm_shape refuses them
  }
  return 0;
}

inline Diagnostics check_gemm_shape(int64_t m, int64_t n, int64_t k, Precision p,
                                    const std::string& where) {
  Diagnostics ds;
  const std::string shape = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
  if (m < 1 || n < 1 || k < 1) {
    ds.push_back({where, "m, n and k must be positive, got " + shape, ""});
    return ds;
  }
  if (p == Precision::kFp32) {
    ds.push_back({where, "precision fp32 is not measured on CUDA", "bf16 or fp8"});
  }
  if (is_block_scaled(p)) {
    ds.push_back({where,
                  std::string("precision ") + to_string(p) +
                      " is not measured: the suite runs cuBLASLt GEMMs without block scales",
                  "bf16 or fp8"});
  }
  if (p == Precision::kFp8 && (m % 16 != 0 || n % 16 != 0 || k % 16 != 0)) {
    ds.push_back({where, "fp8 needs m, n and k to be multiples of 16, got " + shape,
                  "round the shape up to a multiple of 16"});
  }
  return ds;
}

inline CollectiveCounts collective_counts(CollectiveOp op, double bytes, int ranks,
                                          int elem_bytes) {
  const int64_t n = std::max(ranks, 1);
  const int64_t elems = std::max<int64_t>(
      static_cast<int64_t>(std::floor(std::max(bytes, 0.0) / std::max(elem_bytes, 1))), 1);
  const int64_t per_rank = std::max<int64_t>(elems / n, 1);
  CollectiveCounts c;
  switch (op) {
    case CollectiveOp::kAllReduce:
    case CollectiveOp::kSendRecv:
      c.send_elems = c.recv_elems = c.chunk_elems = elems;
      break;
    case CollectiveOp::kAllGather:  // bytes is the gathered output
      c.send_elems = c.chunk_elems = per_rank;
      c.recv_elems = per_rank * n;
      break;
    case CollectiveOp::kReduceScatter:  // bytes is the input
      c.send_elems = per_rank * n;
      c.recv_elems = c.chunk_elems = per_rank;
      break;
    case CollectiveOp::kAllToAll:  // bytes is the whole send buffer, one chunk per peer
      c.send_elems = c.recv_elems = per_rank * n;
      c.chunk_elems = per_rank;
      break;
  }
  return c;
}

inline int sendrecv_partner(int rank, int ranks) {
  const int partner = rank ^ 1;
  return partner < ranks ? partner : -1;
}

inline std::string describe_grouping(Grouping g) {
  // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on "literal" + std::string&&.
  std::string s = "groups of ";
  s += std::to_string(g.size);
  s += " ranks";
  if (g.stride != 1) {
    s += " ";
    s += std::to_string(g.stride);
    s += " apart";
  }
  return s;
}

inline Diagnostics check_grouping(Grouping g, int world, const std::string& where) {
  Diagnostics ds;
  if (g.size < 2) {
    ds.push_back({where, "a group needs at least 2 ranks, got " + std::to_string(g.size),
                  world < 2 ? "run on 2 or more GPUs" : ""});
  }
  if (g.stride < 1) {
    ds.push_back(
        {where,
         "the stride between group ranks must be at least 1, got " + std::to_string(g.stride), ""});
  }
  // 64 bits, so that absurd sizes cannot overflow; the span is only meaningful when positive.
  const int64_t span = static_cast<int64_t>(g.size) * g.stride;
  if (span >= 1 && world % span != 0) {
    std::string fits;
    for (int d = 2; d <= world; ++d) {
      if (world % d != 0) continue;
      if (!fits.empty()) fits += ", ";
      fits += std::to_string(d);
    }
    ds.push_back({where,
                  describe_grouping(g) + " span " + std::to_string(span) +
                      " ranks, which do not tile " + std::to_string(world) + " ranks",
                  fits.empty() ? "run on 2 or more GPUs" : "size x stride in {" + fits + "}"});
  }
  return ds;
}

inline std::vector<std::vector<int>> grouping_members(Grouping g, int world) {
  PX_CHECK(valid_grouping(g, world), describe_grouping(g) << " do not tile " << world << " ranks");
  std::vector<std::vector<int>> members(world / g.size, std::vector<int>(g.size, -1));
  for (int r = 0; r < world; ++r) members[group_color(r, g)][group_rank(r, g)] = r;
  return members;
}

inline std::string format_cuda_version(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

}  // namespace parallax::calibrate::gpu
