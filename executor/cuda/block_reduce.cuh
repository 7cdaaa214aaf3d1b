#pragma once
// Block-wide reductions of the executor's kernels. Every thread of the block must call them
// (no thread may have returned), with blockDim.x a multiple of 32 and at most 1024. Each thread
// gets the result, summed in the same fixed order in every thread, so results are deterministic.
// `scratch` is 32 values of __shared__ memory; a reduction synchronises before it writes there
// and after, so the same scratch serves consecutive reductions.

namespace parallax::exec::gpu {

template <typename T>
__device__ T block_sum(T v, T* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  __syncthreads();  // earlier readers of scratch are done
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T total = 0;
  for (int w = 0; w < warps; ++w) total += scratch[w];
  return total;
}

__device__ inline float block_max(float v, float* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float m = scratch[0];
  for (int w = 1; w < warps; ++w) m = fmaxf(m, scratch[w]);
  return m;
}

/// Grid-stride loop bounds: this thread's first item and the stride.
__device__ inline int64_t grid_first() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

}  // namespace parallax::exec::gpu
