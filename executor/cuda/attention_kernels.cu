// Causal grouped-query attention of the executor's CUDA backend, fp32, written for clarity over
// speed: O(seq^2 head_dim) work per head, one block per query row (forward, dQ) or per key row
// (dK, dV), scores of the row kept in shared memory. The backward recomputes the probabilities
// from the saved log-sum-exp (FlashAttention-2's backward, as executor/model_ops.cc does):
//   delta_i = rowsum(dout_i * out_i),  p_ij = exp(s_ij - lse_i),  ds_ij = p_ij (dout_i . v_j -
//   delta_i), dq_i = scale sum_j ds_ij k_j,  dk_j = scale sum_i ds_ij q_i,  dv_j = sum_i p_ij
//   dout_i,
// with s_ij = scale q_i . k_j, scale = 1 / sqrt(head_dim), j <= i. Every output element is written
// by exactly one thread: no atomics, deterministic.

#include <cmath>
#include <utility>

#include "executor/cuda/block_reduce.cuh"
#include "executor/cuda/kernels.h"
#include "executor/cuda/launch_shape.h"

namespace parallax::exec::gpu {
namespace {

__device__ inline float dot(const float* a, const float* b, int64_t d) {
  float s = 0;
  for (int64_t c = 0; c < d; ++c) s += a[c] * b[c];
  return s;
}

// Grid (query row i, head, sequence b). Shared: scores[seq], then the query row [head_dim].
__global__ void attention_forward_kernel(AttentionArgs a, float scale) {
  extern __shared__ float smem[];
  __shared__ float scratch[32];
  const int64_t i = blockIdx.x, head = blockIdx.y, b = blockIdx.z;
  const int64_t d = a.head_dim, kv_head = head / (a.heads / a.kv_heads);
  const int64_t q_stride = a.heads * d, kv_stride = a.kv_heads * d;
  float* scores = smem;
  float* q_row = smem + a.seq;
  const int64_t row = b * a.seq + i;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x)
    q_row[c] = a.q[row * q_stride + head * d + c];
  __syncthreads();
  const float* k0 = a.k + b * a.seq * kv_stride + kv_head * d;
  const float* v0 = a.v + b * a.seq * kv_stride + kv_head * d;
  float local_max = -INFINITY;
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
    const float s = dot(q_row, k0 + j * kv_stride, d) * scale;
    scores[j] = s;
    local_max = fmaxf(local_max, s);
  }
  const float row_max = block_max(local_max, scratch);
  float local_sum = 0;
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
    const float e = expf(scores[j] - row_max);
    scores[j] = e;
    local_sum += e;
  }
  // block_sum's barriers also publish every thread's scores[] to the block.
  const float sum = block_sum(local_sum, scratch);
  if (threadIdx.x == 0) a.lse[row * a.heads + head] = row_max + logf(sum);
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
    float acc = 0;
    for (int64_t j = 0; j <= i; ++j) acc += (scores[j] / sum) * v0[j * kv_stride + c];
    a.out[row * q_stride + head * d + c] = acc;
  }
}

// One thread per (row, head): delta = rowsum(dout * out) over the head's columns.
__global__ void attention_delta_kernel(AttentionArgs a) {
  const int64_t items = a.batch * a.seq * a.heads, d = a.head_dim;
  for (int64_t idx = grid_first(); idx < items; idx += grid_stride()) {
    const int64_t row = idx / a.heads, head = idx % a.heads;
    const int64_t at = row * a.heads * d + head * d;
    a.delta[idx] = dot(a.dout + at, a.out + at, d);
  }
}

// Grid (query row i, head, sequence b). Shared: ds[seq], then the query row [head_dim].
__global__ void attention_dq_kernel(AttentionArgs a, float scale) {
  extern __shared__ float smem[];
  const int64_t i = blockIdx.x, head = blockIdx.y, b = blockIdx.z;
  const int64_t d = a.head_dim, kv_head = head / (a.heads / a.kv_heads);
  const int64_t q_stride = a.heads * d, kv_stride = a.kv_heads * d;
  float* ds = smem;
  float* q_row = smem + a.seq;
  const int64_t row = b * a.seq + i;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x)
    q_row[c] = a.q[row * q_stride + head * d + c];
  __syncthreads();
  const float* k0 = a.k + b * a.seq * kv_stride + kv_head * d;
  const float* v0 = a.v + b * a.seq * kv_stride + kv_head * d;
  const float* dout = a.dout + row * q_stride + head * d;
  const float lse = a.lse[row * a.heads + head], delta = a.delta[row * a.heads + head];
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
    const float p = expf(dot(q_row, k0 + j * kv_stride, d) * scale - lse);
    ds[j] = p * (dot(dout, v0 + j * kv_stride, d) - delta);
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
    float acc = 0;
    for (int64_t j = 0; j <= i; ++j) acc += ds[j] * k0[j * kv_stride + c];
    a.dq[row * q_stride + head * d + c] = scale * acc;
  }
}

// Grid (key row j, kv head, sequence b): the block sums over the query heads of its group and the
// query rows i >= j. Shared: p[seq], ds[seq], then the key and value rows [head_dim] each.
__global__ void attention_dkdv_kernel(AttentionArgs a, float scale) {
  extern __shared__ float smem[];
  const int64_t j = blockIdx.x, kv_head = blockIdx.y, b = blockIdx.z;
  const int64_t d = a.head_dim, group = a.heads / a.kv_heads;
  const int64_t q_stride = a.heads * d, kv_stride = a.kv_heads * d;
  float* p = smem;
  float* ds = smem + a.seq;
  float* k_row = smem + 2 * a.seq;
  float* v_row = k_row + d;
  const int64_t key_at = (b * a.seq + j) * kv_stride + kv_head * d;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
    k_row[c] = a.k[key_at + c];
    v_row[c] = a.v[key_at + c];
  }
  __syncthreads();
  for (int64_t g = 0; g < group; ++g) {
    const int64_t head = kv_head * group + g;
    for (int64_t i = j + threadIdx.x; i < a.seq; i += blockDim.x) {
      const int64_t row = b * a.seq + i;
      const float* q = a.q + row * q_stride + head * d;
      const float* dout = a.dout + row * q_stride + head * d;
      const float pi = expf(dot(q, k_row, d) * scale - a.lse[row * a.heads + head]);
      p[i] = pi;
      ds[i] = pi * (dot(dout, v_row, d) - a.delta[row * a.heads + head]);
    }
    __syncthreads();
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
      float dk = 0, dv = 0;
      for (int64_t i = j; i < a.seq; ++i) {
        const int64_t at = (b * a.seq + i) * q_stride + head * d + c;
        dv += p[i] * a.dout[at];
        dk += ds[i] * a.q[at];
      }
      // The group's heads add one after the other, as the CPU's per-head loop does.
      if (g == 0) {
        a.dv[key_at + c] = dv;
        a.dk[key_at + c] = scale * dk;
      } else {
        a.dv[key_at + c] += dv;
        a.dk[key_at + c] += scale * dk;
      }
    }
    __syncthreads();  // the next head overwrites p and ds
  }
}

dim3 row_grid(int64_t rows, int64_t heads, int64_t batch) {
  return dim3(static_cast<unsigned>(rows), static_cast<unsigned>(heads),
              static_cast<unsigned>(batch));
}

float attention_scale(int64_t head_dim) { return 1.0f / std::sqrt(static_cast<float>(head_dim)); }

}  // namespace

cudaError_t configure_attention_smem(int64_t seq, int64_t head_dim) {
  // Each kernel gets what it needs (the forward also has static shared memory of its own).
  const std::pair<const void*, std::size_t> kernels[] = {
      {reinterpret_cast<const void*>(&attention_forward_kernel),
       attention_forward_smem(seq, head_dim)},
      {reinterpret_cast<const void*>(&attention_dq_kernel), attention_dq_smem(seq, head_dim)},
      {reinterpret_cast<const void*>(&attention_dkdv_kernel), attention_dkdv_smem(seq, head_dim)}};
  for (const auto& [kernel, bytes] : kernels) {
    if (bytes <= kDefaultSmemBytes) continue;
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(bytes));
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t launch_attention_forward(const AttentionArgs& a, cudaStream_t stream) {
  const std::size_t smem = attention_forward_smem(a.seq, a.head_dim);
  attention_forward_kernel<<<row_grid(a.seq, a.heads, a.batch), kAttentionThreads, smem, stream>>>(
      a, attention_scale(a.head_dim));
  return cudaGetLastError();
}

cudaError_t launch_attention_backward(const AttentionArgs& a, cudaStream_t stream) {
  const Launch1d l = elementwise_launch(a.batch * a.seq * a.heads);
  attention_delta_kernel<<<l.blocks, l.threads, 0, stream>>>(a);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  const float scale = attention_scale(a.head_dim);
  const std::size_t dq_smem = attention_dq_smem(a.seq, a.head_dim);
  attention_dq_kernel<<<row_grid(a.seq, a.heads, a.batch), kAttentionThreads, dq_smem, stream>>>(
      a, scale);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  const std::size_t kv_smem = attention_dkdv_smem(a.seq, a.head_dim);
  attention_dkdv_kernel<<<row_grid(a.seq, a.kv_heads, a.batch), kAttentionThreads, kv_smem,
                          stream>>>(a, scale);
  return cudaGetLastError();
}

}  // namespace parallax::exec::gpu
