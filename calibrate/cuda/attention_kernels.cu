// Causal attention, flash style, written for clarity: bf16 in and out, fp32 math on the CUDA
// cores (no tensor cores), no seq x seq matrix in memory. It measures what a straightforward
// non-vendor kernel achieves, not the best the part can do.
//
// One thread owns one row and keeps its fp32 accumulator (head_dim values) in registers; a block
// owns kAttnBlockRows consecutive rows, held transposed in shared memory so that each thread
// reads its own row conflict-free, and streams the other side kAttnTileRows rows at a time
// through fp32 shared-memory tiles that every thread reads at the same address (broadcast).
//
// Scores live in base 2: s = (q . k) * scale * log2(e), so p = 2^(s - lse) with lse the base-2
// logsumexp the forward writes.
//
// Forward (thread per query i, keys j <= i): online softmax over key tiles; writes O and lse.
// Backward, with S and P recomputed from Q, K and lse (FlashAttention-2's equations):
//   delta_i = sum_d dO_i[d] O_i[d]
//   dV_j = sum_i P_ij dO_i                    (thread per key)
//   dK_j = scale * sum_i dS_ij q_i            (thread per key)
//   dQ_i = scale * sum_j dS_ij k_j            (thread per query)
//   with dS_ij = P_ij (dO_i . v_j - delta_i).
// Three passes instead of one with atomics: each thread owns its output row, so there are no
// atomics and the result is deterministic, at the cost of recomputing S (and dP) per pass.

#include "calibrate/cuda/kernels.h"

namespace parallax::calibrate::gpu {
namespace {

using bf162 = __nv_bfloat162;

constexpr float kLog2e = 1.4426950408889634f;
constexpr int kBlock = kAttnBlockRows;
constexpr int kTile = kAttnTileRows;
constexpr int kPitch = kAttnOwnPitch;

enum class Pass { kDq, kDk, kDv };

struct AttentionParams {
  AttentionTensors t;
  int64_t seq;
  float scale;  // 1 / sqrt(head_dim)
};

__device__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// The block's shared memory, carved in the order attention_smem_bytes counts it.
template <int D>
struct Smem {
  bf162* own_a;       // [D/2][kPitch]: this block's rows, transposed, as bf16 pairs
  bf162* own_b;       // [D/2][kPitch]: a second own operand (backward)
  float* tile_a;      // [kTile][D]
  float* tile_b;      // [kTile][D]
  float* tile_lse;    // [kTile]
  float* tile_delta;  // [kTile]

  __device__ explicit Smem(unsigned char* base) {
    own_a = reinterpret_cast<bf162*>(base);
    own_b = own_a + (D / 2) * kPitch;
    tile_a = reinterpret_cast<float*>(own_b + (D / 2) * kPitch);
    tile_b = tile_a + kTile * D;
    tile_lse = tile_b + kTile * D;
    tile_delta = tile_lse + kTile;
  }
};

// Rows [row0, row0 + kBlock) of a [seq][D] matrix into own[D/2][kPitch]; rows past the end are
// zero. Consecutive threads read consecutive pairs of a row (coalesced) and store them kPitch
// apart (distinct banks).
template <int D>
__device__ void load_own(const bf16* __restrict__ x, int64_t row0, int64_t seq, bf162* own) {
  const bf162* x2 = reinterpret_cast<const bf162*>(x);
  for (int i = threadIdx.x; i < kBlock * (D / 2); i += blockDim.x) {
    const int r = i / (D / 2), c = i % (D / 2);
    const int64_t row = row0 + r;
    own[c * kPitch + r] = row < seq ? x2[row * (D / 2) + c] : __floats2bfloat162_rn(0.0f, 0.0f);
  }
}

// Rows [row0, row0 + kTile) of a [seq][D] matrix into tile[kTile][D] as fp32; zero past the end.
template <int D>
__device__ void load_tile(const bf16* __restrict__ x, int64_t row0, int64_t seq, float* tile) {
  const bf162* x2 = reinterpret_cast<const bf162*>(x);
  float2* tile2 = reinterpret_cast<float2*>(tile);
  for (int i = threadIdx.x; i < kTile * (D / 2); i += blockDim.x) {
    const int64_t row = row0 + i / (D / 2);
    tile2[i] = row < seq ? __bfloat1622float2(x2[row0 * (D / 2) + i]) : make_float2(0.0f, 0.0f);
  }
}

// lse and delta of rows [row0, row0 + kTile) (one head's [seq] slices); zero past the end.
__device__ void load_tile_scalars(const float* __restrict__ lse, const float* __restrict__ delta,
                                  int64_t row0, int64_t seq, float* tile_lse, float* tile_delta) {
  if (threadIdx.x < kTile) {
    const int64_t row = row0 + threadIdx.x;
    tile_lse[threadIdx.x] = row < seq ? lse[row] : 0.0f;
    tile_delta[threadIdx.x] = row < seq ? delta[row] : 0.0f;
  }
}

// s[j] = sum_d own[d][t] * tile[j][d]: this thread's row against each row of the tile.
template <int D>
__device__ void dot_tile(const bf162* own, const float* tile, float (&s)[kTile]) {
  const int t = threadIdx.x;
#pragma unroll
  for (int j = 0; j < kTile; ++j) s[j] = 0.0f;
#pragma unroll 2
  for (int c = 0; c < D / 2; c += 2) {
    const float2 x0 = __bfloat1622float2(own[c * kPitch + t]);
    const float2 x1 = __bfloat1622float2(own[(c + 1) * kPitch + t]);
#pragma unroll
    for (int j = 0; j < kTile; ++j) {
      const float4 y = *reinterpret_cast<const float4*>(tile + j * D + 2 * c);
      s[j] = fmaf(x0.x, y.x, s[j]);
      s[j] = fmaf(x0.y, y.y, s[j]);
      s[j] = fmaf(x1.x, y.z, s[j]);
      s[j] = fmaf(x1.y, y.w, s[j]);
    }
  }
}

// acc[d] += sum_j w[j] * tile[j][d]. Fully unrolled so that acc stays in registers.
template <int D>
__device__ void accumulate_tile(const float (&w)[kTile], const float* tile, float (&acc)[D]) {
#pragma unroll
  for (int j = 0; j < kTile; ++j) {
#pragma unroll
    for (int d = 0; d < D; d += 4) {
      const float4 y = *reinterpret_cast<const float4*>(tile + j * D + d);
      acc[d] = fmaf(w[j], y.x, acc[d]);
      acc[d + 1] = fmaf(w[j], y.y, acc[d + 1]);
      acc[d + 2] = fmaf(w[j], y.z, acc[d + 2]);
      acc[d + 3] = fmaf(w[j], y.w, acc[d + 3]);
    }
  }
}

// out[0..D) = acc * scale as bf16, in 16-byte stores.
template <int D>
__device__ void store_row(const float (&acc)[D], float scale, bf16* __restrict__ out) {
#pragma unroll
  for (int d = 0; d < D; d += 8) {
    uint4 raw;
    bf162* h = reinterpret_cast<bf162*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      h[i] = __floats2bfloat162_rn(acc[d + 2 * i] * scale, acc[d + 2 * i + 1] * scale);
    }
    *reinterpret_cast<uint4*>(out + d) = raw;
  }
}

template <int D>
__global__ void __launch_bounds__(kBlock) attention_forward_kernel(AttentionParams p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const Smem<D> sm(smem_raw);
  const int64_t seq = p.seq;
  // Later query blocks see more keys: launch them first to shorten the tail.
  const int64_t row0 = (static_cast<int64_t>(gridDim.x) - 1 - blockIdx.x) * kBlock;
  const int64_t offset = static_cast<int64_t>(blockIdx.y) * seq * D;
  const int64_t row = row0 + threadIdx.x;
  // Rows past the end compute a throwaway copy of the last row (never written), so every
  // thread sees key 0 in the first tile and its running maximum is finite from then on.
  const int64_t last_key = min64(row, seq - 1);
  const float scale_log2 = p.scale * kLog2e;

  load_own<D>(p.t.q + offset, row0, seq, sm.own_a);
  float acc[D] = {};
  float m = -INFINITY, l = 0.0f;
  const int64_t key_end = min64(seq, row0 + kBlock);  // causal: no key after the block's rows
  for (int64_t k0 = 0; k0 < key_end; k0 += kTile) {
    __syncthreads();  // own_a is loaded, and every thread is done with the previous tile
    load_tile<D>(p.t.k + offset, k0, seq, sm.tile_a);
    load_tile<D>(p.t.v + offset, k0, seq, sm.tile_b);
    __syncthreads();
    float s[kTile];
    dot_tile<D>(sm.own_a, sm.tile_a, s);
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < kTile; ++j) {
      s[j] = k0 + j <= last_key ? s[j] * scale_log2 : -INFINITY;
      tile_max = fmaxf(tile_max, s[j]);
    }
    const float m_new = fmaxf(m, tile_max);
    const float correction = exp2f(m - m_new);
    l *= correction;
#pragma unroll
    for (int d = 0; d < D; ++d) acc[d] *= correction;
#pragma unroll
    for (int j = 0; j < kTile; ++j) {
      s[j] = exp2f(s[j] - m_new);
      l += s[j];
    }
    accumulate_tile<D>(s, sm.tile_b, acc);
    m = m_new;
  }
  if (row < seq) {
    store_row<D>(acc, 1.0f / l, p.t.o + offset + row * D);
    p.t.lse[blockIdx.y * seq + row] = m + log2f(l);
  }
}

// delta_r = sum_d dO_r[d] O_r[d] over all batch_heads * seq rows; one warp per row.
template <int D>
__global__ void attention_delta_kernel(const bf16* __restrict__ o, const bf16* __restrict__ d_o,
                                       float* __restrict__ delta, int64_t rows) {
  const int lane = threadIdx.x % 32;
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (row >= rows) return;  // whole warps leave together
  const bf162* o2 = reinterpret_cast<const bf162*>(o + row * D);
  const bf162* do2 = reinterpret_cast<const bf162*>(d_o + row * D);
  float sum = 0.0f;
  for (int c = lane; c < D / 2; c += 32) {
    const float2 a = __bfloat1622float2(o2[c]), b = __bfloat1622float2(do2[c]);
    sum = fmaf(a.x, b.x, fmaf(a.y, b.y, sum));
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (lane == 0) delta[row] = sum;
}

// One backward pass. Own rows and the streamed side:
//   kDq: own queries (q for S, dO for dP), streams keys j <= i (k for S and the sum, v for dP).
//   kDk: own keys (k for S, v for dP), streams queries i >= j (q for S and the sum, dO for dP).
//   kDv: own keys (k for S), streams queries i >= j (q for S, dO for the sum).
template <int D, Pass P>
__global__ void __launch_bounds__(kBlock) attention_backward_kernel(AttentionParams p) {
  constexpr bool kOwnQueries = P == Pass::kDq;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const Smem<D> sm(smem_raw);
  const AttentionTensors& t = p.t;
  const int64_t seq = p.seq;
  // The heaviest blocks first: late queries see many keys, early keys many queries.
  const int64_t block = kOwnQueries ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int64_t row0 = block * kBlock;
  const int64_t offset = static_cast<int64_t>(blockIdx.y) * seq * D;
  const float* head_lse = t.lse + static_cast<int64_t>(blockIdx.y) * seq;
  const float* head_delta = t.delta + static_cast<int64_t>(blockIdx.y) * seq;
  const int64_t row = row0 + threadIdx.x;
  const int64_t own_row = min64(row, seq - 1);  // rows past the end: a throwaway copy
  const float scale_log2 = p.scale * kLog2e;

  load_own<D>((kOwnQueries ? t.q : t.k) + offset, row0, seq, sm.own_a);
  if constexpr (P != Pass::kDv) {
    load_own<D>((kOwnQueries ? t.d_o : t.v) + offset, row0, seq, sm.own_b);
  }
  const float own_lse = kOwnQueries ? head_lse[own_row] : 0.0f;
  const float own_delta = kOwnQueries ? head_delta[own_row] : 0.0f;

  const int64_t begin = kOwnQueries ? 0 : row0;
  const int64_t end = kOwnQueries ? min64(seq, row0 + kBlock) : seq;
  float acc[D] = {};
  for (int64_t c0 = begin; c0 < end; c0 += kTile) {
    __syncthreads();  // own rows are loaded, and every thread is done with the previous tile
    if constexpr (kOwnQueries) {
      load_tile<D>(t.k + offset, c0, seq, sm.tile_a);
      load_tile<D>(t.v + offset, c0, seq, sm.tile_b);
    } else {
      load_tile<D>(t.q + offset, c0, seq, sm.tile_a);
      load_tile<D>(t.d_o + offset, c0, seq, sm.tile_b);
      load_tile_scalars(head_lse, head_delta, c0, seq, sm.tile_lse, sm.tile_delta);
    }
    __syncthreads();
    // P recomputed from the forward's lse, zero where the causal mask hides the pair.
    float w[kTile];
    dot_tile<D>(sm.own_a, sm.tile_a, w);
#pragma unroll
    for (int j = 0; j < kTile; ++j) {
      const int64_t other = c0 + j;
      const bool visible = kOwnQueries ? other <= own_row : (other >= row && other < seq);
      const float lse = kOwnQueries ? own_lse : sm.tile_lse[j];
      w[j] = visible ? exp2f(w[j] * scale_log2 - lse) : 0.0f;
    }
    if constexpr (P == Pass::kDv) {
      accumulate_tile<D>(w, sm.tile_b, acc);  // dV_j += P_ij dO_i
    } else {
      float dp[kTile];
      dot_tile<D>(sm.own_b, sm.tile_b, dp);  // dP_ij = dO_i . v_j
#pragma unroll
      for (int j = 0; j < kTile; ++j) {
        w[j] *= dp[j] - (kOwnQueries ? own_delta : sm.tile_delta[j]);  // dS_ij
      }
      accumulate_tile<D>(w, sm.tile_a, acc);  // dQ_i += dS_ij k_j, dK_j += dS_ij q_i
    }
  }
  if (row < seq) {
    bf16* out = P == Pass::kDq ? t.dq : (P == Pass::kDk ? t.dk : t.dv);
    store_row<D>(acc, P == Pass::kDv ? 1.0f : p.scale, out + offset + row * D);
  }
}

dim3 attention_grid(int64_t batch_heads, int64_t seq) {
  return dim3(static_cast<unsigned>(attention_row_blocks(seq)), static_cast<unsigned>(batch_heads));
}

template <int D>
cudaError_t configure() {
  const int bytes = static_cast<int>(attention_smem_bytes(D));
  const void* kernels[] = {reinterpret_cast<const void*>(&attention_forward_kernel<D>),
                           reinterpret_cast<const void*>(&attention_backward_kernel<D, Pass::kDq>),
                           reinterpret_cast<const void*>(&attention_backward_kernel<D, Pass::kDk>),
                           reinterpret_cast<const void*>(&attention_backward_kernel<D, Pass::kDv>)};
  for (const void* kernel : kernels) {
    const cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

template <int D>
cudaError_t forward(const AttentionParams& p, int64_t batch_heads, cudaStream_t stream) {
  attention_forward_kernel<D>
      <<<attention_grid(batch_heads, p.seq), kBlock, attention_smem_bytes(D), stream>>>(p);
  return cudaGetLastError();
}

template <int D>
cudaError_t backward(const AttentionParams& p, int64_t batch_heads, cudaStream_t stream) {
  const int64_t rows = batch_heads * p.seq;
  constexpr int kDeltaThreads = 256;  // 8 rows per block, one per warp
  const auto delta_blocks = static_cast<unsigned>((rows * 32 + kDeltaThreads - 1) / kDeltaThreads);
  attention_delta_kernel<D>
      <<<delta_blocks, kDeltaThreads, 0, stream>>>(p.t.o, p.t.d_o, p.t.delta, rows);
  const dim3 grid = attention_grid(batch_heads, p.seq);
  const std::size_t smem = attention_smem_bytes(D);
  attention_backward_kernel<D, Pass::kDv><<<grid, kBlock, smem, stream>>>(p);
  attention_backward_kernel<D, Pass::kDk><<<grid, kBlock, smem, stream>>>(p);
  attention_backward_kernel<D, Pass::kDq><<<grid, kBlock, smem, stream>>>(p);
  return cudaGetLastError();
}

AttentionParams params(const AttentionTensors& t, int64_t seq, int head_dim) {
  return AttentionParams{t, seq, 1.0f / sqrtf(static_cast<float>(head_dim))};
}

}  // namespace

cudaError_t configure_attention_kernels() {
  const cudaError_t e = configure<64>();
  return e != cudaSuccess ? e : configure<128>();
}

cudaError_t launch_attention_forward(const AttentionTensors& t, int64_t batch_heads, int64_t seq,
                                     int head_dim, cudaStream_t stream) {
  if (head_dim == 64) return forward<64>(params(t, seq, head_dim), batch_heads, stream);
  if (head_dim == 128) return forward<128>(params(t, seq, head_dim), batch_heads, stream);
  return cudaErrorInvalidValue;
}

cudaError_t launch_attention_backward(const AttentionTensors& t, int64_t batch_heads, int64_t seq,
                                      int head_dim, cudaStream_t stream) {
  if (head_dim == 64) return backward<64>(params(t, seq, head_dim), batch_heads, stream);
  if (head_dim == 128) return backward<128>(params(t, seq, head_dim), batch_heads, stream);
  return cudaErrorInvalidValue;
}

}  // namespace parallax::calibrate::gpu
