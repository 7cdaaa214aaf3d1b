// The memory-bound kernels of a transformer layer, plus the fill and delay kernels the backend
// needs around them. Plain grid-stride and one-block-per-row CUDA: what a framework's own fused
// kernels achieve, not a vendor library.

#include <cuda_fp8.h>

#include <climits>
#include <cmath>

#include "calibrate/cuda/kernels.h"

namespace parallax::calibrate::gpu {
namespace {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kRmsNormEps = 1e-6f;

// ---- Fill and delay ----

// splitmix64's finaliser: a good 64-bit mix of an index.
__device__ uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1) from (seed, index).
__device__ float hashed_uniform(uint64_t seed, int64_t i) {
  const uint64_t h = mix64(seed ^ mix64(static_cast<uint64_t>(i)));
  return static_cast<float>(h >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

__global__ void fill_bf16_kernel(bf16* data, int64_t n, uint64_t seed, float scale) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    data[i] = __float2bfloat16(scale * hashed_uniform(seed, i));
  }
}

__global__ void fill_fp8_kernel(__nv_fp8_e4m3* data, int64_t n, uint64_t seed, float scale) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    data[i] = __nv_fp8_e4m3(scale * hashed_uniform(seed, i));
  }
}

__device__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void delay_kernel(uint64_t ns) {
  const uint64_t start = global_timer_ns();
  while (global_timer_ns() - start < ns) {
  }
}

// ---- Loads and stores of V consecutive bf16 as floats (V = 8 is one 16-byte access) ----

template <int V>
__device__ void load_vec(const bf16* __restrict__ p, float (&x)[V]) {
  if constexpr (V == 8) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const bf16* h = reinterpret_cast<const bf16*>(&raw);
#pragma unroll
    for (int i = 0; i < V; ++i) x[i] = __bfloat162float(h[i]);
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) x[i] = __bfloat162float(p[i]);
  }
}

template <int V>
__device__ void store_vec(bf16* __restrict__ p, const float (&x)[V]) {
  if constexpr (V == 8) {
    uint4 raw;
    bf16* h = reinterpret_cast<bf16*>(&raw);
#pragma unroll
    for (int i = 0; i < V; ++i) h[i] = __float2bfloat16(x[i]);
    *reinterpret_cast<uint4*>(p) = raw;
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) p[i] = __float2bfloat16(x[i]);
  }
}

// ---- Element-wise kernels ----

struct CopyOp {
  __device__ float operator()(float x0, float) const { return x0; }
};
struct TriadOp {
  float scale;
  __device__ float operator()(float x0, float x1) const { return fmaf(scale, x1, x0); }
};
struct SwigluOp {
  __device__ float operator()(float g, float u) const { return g / (1.0f + __expf(-g)) * u; }
};

// The bulk in 16-byte vectors (cudaMalloc'd buffers are aligned), the last n % 8 one by one.
template <typename Op, bool kTwoInputs>
__global__ void elementwise_kernel(const bf16* __restrict__ x0, const bf16* __restrict__ x1,
                                   bf16* __restrict__ y, int64_t n, Op op) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t vectors = n / 8;
  for (int64_t v = first; v < vectors; v += stride) {
    float a[8], b[8] = {};
    load_vec<8>(x0 + 8 * v, a);
    if constexpr (kTwoInputs) load_vec<8>(x1 + 8 * v, b);
#pragma unroll
    for (int i = 0; i < 8; ++i) a[i] = op(a[i], b[i]);
    store_vec<8>(y + 8 * v, a);
  }
  for (int64_t i = vectors * 8 + first; i < n; i += stride) {
    const float b = kTwoInputs ? __bfloat162float(x1[i]) : 0.0f;
    y[i] = __float2bfloat16(op(__bfloat162float(x0[i]), b));
  }
}

template <typename Op, bool kTwoInputs>
cudaError_t launch_op(const bf16* x0, const bf16* x1, bf16* y, int64_t n, Op op, Launch1d launch,
                      cudaStream_t stream) {
  elementwise_kernel<Op, kTwoInputs>
      <<<launch.blocks, launch.threads, 0, stream>>>(x0, x1, y, n, op);
  return cudaGetLastError();
}

// ---- Row kernels: one block per row ----

__device__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The sum of `v` over the block, returned to every thread. `scratch` holds 32 floats.
__device__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by an earlier reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  return warp_sum(lane < static_cast<int>(blockDim.x / 32) ? scratch[lane] : 0.0f);
}

// A running softmax denominator: sum of 2^(x - m) over the values seen, with m their maximum.
struct MaxSum {
  float m;
  float l;
};

__device__ MaxSum combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.0f};
  return {m, a.l * exp2f(a.m - m) + b.l * exp2f(b.m - m)};
}

__device__ MaxSum warp_combine(MaxSum v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = combine(
        v, {__shfl_xor_sync(0xffffffffu, v.m, offset), __shfl_xor_sync(0xffffffffu, v.l, offset)});
  }
  return v;
}

// `scratch` holds 64 floats.
__device__ MaxSum block_combine(MaxSum v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_combine(v);
  __syncthreads();
  if (lane == 0) {
    scratch[warp] = v.m;
    scratch[32 + warp] = v.l;
  }
  __syncthreads();
  const bool live = lane < static_cast<int>(blockDim.x / 32);
  return warp_combine({live ? scratch[lane] : -INFINITY, live ? scratch[32 + lane] : 0.0f});
}

template <int V>
__global__ void rmsnorm_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                               bf16* __restrict__ y, int64_t cols) {
  __shared__ float scratch[32];
  const bf16* xr = x + static_cast<int64_t>(blockIdx.x) * cols;
  bf16* yr = y + static_cast<int64_t>(blockIdx.x) * cols;
  const int64_t step = static_cast<int64_t>(blockDim.x) * V;
  float squares = 0.0f;
  for (int64_t c = static_cast<int64_t>(threadIdx.x) * V; c < cols; c += step) {
    float v[V];
    load_vec<V>(xr + c, v);
#pragma unroll
    for (int i = 0; i < V; ++i) squares = fmaf(v[i], v[i], squares);
  }
  const float inv_rms = rsqrtf(block_sum(squares, scratch) / cols + kRmsNormEps);
  for (int64_t c = static_cast<int64_t>(threadIdx.x) * V; c < cols; c += step) {
    float v[V], g[V];
    load_vec<V>(xr + c, v);
    load_vec<V>(w + c, g);
#pragma unroll
    for (int i = 0; i < V; ++i) v[i] *= inv_rms * g[i];
    store_vec<V>(yr + c, v);
  }
}

// Online softmax: one pass for the maximum and the denominator, one to write.
template <int V>
__global__ void softmax_kernel(const bf16* __restrict__ x, bf16* __restrict__ y, int64_t cols) {
  __shared__ float scratch[64];
  const bf16* xr = x + static_cast<int64_t>(blockIdx.x) * cols;
  bf16* yr = y + static_cast<int64_t>(blockIdx.x) * cols;
  const int64_t step = static_cast<int64_t>(blockDim.x) * V;
  MaxSum running{-INFINITY, 0.0f};
  for (int64_t c = static_cast<int64_t>(threadIdx.x) * V; c < cols; c += step) {
    float v[V];
    load_vec<V>(xr + c, v);
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < V; ++i) m = fmaxf(m, v[i] * kLog2e);
    float l = 0.0f;
#pragma unroll
    for (int i = 0; i < V; ++i) l += exp2f(v[i] * kLog2e - m);
    running = combine(running, {m, l});
  }
  const MaxSum total = block_combine(running, scratch);
  const float inv_l = 1.0f / total.l;
  for (int64_t c = static_cast<int64_t>(threadIdx.x) * V; c < cols; c += step) {
    float v[V];
    load_vec<V>(xr + c, v);
#pragma unroll
    for (int i = 0; i < V; ++i) v[i] = exp2f(v[i] * kLog2e - total.m) * inv_l;
    store_vec<V>(yr + c, v);
  }
}

}  // namespace

cudaError_t launch_delay(uint64_t ns, cudaStream_t stream) {
  delay_kernel<<<1, 1, 0, stream>>>(ns);
  return cudaGetLastError();
}

cudaError_t launch_fill_bf16(bf16* data, int64_t n, uint64_t seed, float scale, Launch1d launch,
                             cudaStream_t stream) {
  fill_bf16_kernel<<<launch.blocks, launch.threads, 0, stream>>>(data, n, seed, scale);
  return cudaGetLastError();
}

cudaError_t launch_fill_fp8_e4m3(void* data, int64_t n, uint64_t seed, float scale, Launch1d launch,
                                 cudaStream_t stream) {
  fill_fp8_kernel<<<launch.blocks, launch.threads, 0, stream>>>(static_cast<__nv_fp8_e4m3*>(data),
                                                                n, seed, scale);
  return cudaGetLastError();
}

cudaError_t launch_elementwise(MemoryKernel kernel, const bf16* x0, const bf16* x1, float scale,
                               bf16* y, int64_t n, Launch1d launch, cudaStream_t stream) {
  switch (kernel) {
    case MemoryKernel::kCopy:
      return launch_op<CopyOp, false>(x0, x1, y, n, CopyOp{}, launch, stream);
    case MemoryKernel::kTriad:
      return launch_op<TriadOp, true>(x0, x1, y, n, TriadOp{scale}, launch, stream);
    case MemoryKernel::kSwiglu:
      return launch_op<SwigluOp, true>(x0, x1, y, n, SwigluOp{}, launch, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t launch_rmsnorm(const bf16* x, const bf16* w, bf16* y, int64_t rows, int64_t cols,
                           cudaStream_t stream) {
  if (rows < 1 || rows > INT_MAX || cols < 1) return cudaErrorInvalidValue;
  const int vec = row_vector_width(cols);
  const int threads = row_block_threads(cols, vec);
  if (vec == 8) {
    rmsnorm_kernel<8><<<static_cast<unsigned>(rows), threads, 0, stream>>>(x, w, y, cols);
  } else {
    rmsnorm_kernel<1><<<static_cast<unsigned>(rows), threads, 0, stream>>>(x, w, y, cols);
  }
  return cudaGetLastError();
}

cudaError_t launch_softmax(const bf16* x, bf16* y, int64_t rows, int64_t cols,
                           cudaStream_t stream) {
  if (rows < 1 || rows > INT_MAX || cols < 1) return cudaErrorInvalidValue;
  const int vec = row_vector_width(cols);
  const int threads = row_block_threads(cols, vec);
  if (vec == 8) {
    softmax_kernel<8><<<static_cast<unsigned>(rows), threads, 0, stream>>>(x, y, cols);
  } else {
    softmax_kernel<1><<<static_cast<unsigned>(rows), threads, 0, stream>>>(x, y, cols);
  }
  return cudaGetLastError();
}

}  // namespace parallax::calibrate::gpu
