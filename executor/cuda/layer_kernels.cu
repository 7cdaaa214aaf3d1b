// The per-token operators of the executor's CUDA backend: embedding, RMSNorm, rotary embedding
// and SwiGLU, forward and backward (formulas in kernels.h and executor/model_ops.h). Simple
// kernels: grid-stride loops over elements, one block per row where a row needs a reduction, one
// thread per column where rows accumulate into a weight's gradient (rows in order, no atomics).

#include "executor/cuda/block_reduce.cuh"
#include "executor/cuda/kernels.h"
#include "executor/cuda/launch_shape.h"

namespace parallax::exec::gpu {
namespace {

__global__ void embedding_forward_kernel(const float* embed, const int32_t* ids, float* h,
                                         int64_t n, int64_t hidden) {
  for (int64_t i = grid_first(); i < n * hidden; i += grid_stride()) {
    const int64_t row = i / hidden, col = i % hidden;
    h[i] = embed[static_cast<int64_t>(ids[row]) * hidden + col];
  }
}

// One thread owns column `col` of every embedding row, so repeated ids never race.
__global__ void embedding_backward_kernel(const float* dh, const int32_t* ids, float* g_embed,
                                          int64_t n, int64_t hidden) {
  for (int64_t col = grid_first(); col < hidden; col += grid_stride())
    for (int64_t r = 0; r < n; ++r)
      g_embed[static_cast<int64_t>(ids[r]) * hidden + col] += dh[r * hidden + col];
}

__global__ void rms_norm_forward_kernel(const float* x, const float* w, float eps, float* y,
                                        float* rstd, int64_t cols) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const float* xr = x + row * cols;
  float* yr = y + row * cols;
  float ss = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) ss += xr[c] * xr[c];
  ss = block_sum(ss, scratch);
  const float r = 1.0f / sqrtf(ss / static_cast<float>(cols) + eps);
  if (threadIdx.x == 0) rstd[row] = r;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = xr[c] * r * w[c];
}

__global__ void rms_norm_backward_kernel(const float* x, const float* w, const float* rstd,
                                         const float* dy, float* dx, int64_t cols) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const float* xr = x + row * cols;
  const float* dyr = dy + row * cols;
  float* dxr = dx + row * cols;
  const float r = rstd[row];
  float dot = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dot += dyr[c] * w[c] * xr[c];
  dot = block_sum(dot, scratch);
  // d/dx_k of x_j r w_j: r w_k [j = k] - x_j w_j r^3 x_k / h.
  const float coef = r * r * r * dot / static_cast<float>(cols);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    dxr[c] += r * dyr[c] * w[c] - xr[c] * coef;
}

__global__ void rms_norm_weight_grad_kernel(const float* x, const float* rstd, const float* dy,
                                            float* dw, int64_t rows, int64_t cols) {
  for (int64_t c = grid_first(); c < cols; c += grid_stride()) {
    float acc = dw[c];
    for (int64_t r = 0; r < rows; ++r) acc += dy[r * cols + c] * x[r * cols + c] * rstd[r];
    dw[c] = acc;
  }
}

// One thread per (row, head, i < d/2): the pair (i, i + d/2) of that head, in place.
__global__ void rotary_kernel(float* x, const float* cos_table, const float* sin_table,
                              int64_t rows, int64_t seq, int64_t heads, int64_t half, float sign) {
  const int64_t pairs = rows * heads * half;
  for (int64_t idx = grid_first(); idx < pairs; idx += grid_stride()) {
    const int64_t i = idx % half, head = (idx / half) % heads, row = idx / (half * heads);
    const int64_t pos = row % seq;
    float* base = x + row * heads * 2 * half + head * 2 * half;
    const float c = cos_table[pos * half + i];
    const float s = sin_table[pos * half + i] * sign;
    const float a = base[i], b = base[i + half];
    base[i] = a * c - b * s;  // x * cos + rotate_half(x) * sin, rotate_half(a, b) = (-b, a)
    base[i + half] = b * c + a * s;
  }
}

__global__ void swiglu_forward_kernel(const float* gate, const float* up, float* out,
                                      int64_t count) {
  for (int64_t i = grid_first(); i < count; i += grid_stride()) {
    const float g = gate[i];
    out[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

__global__ void swiglu_backward_kernel(const float* gate, const float* up, const float* dout,
                                       float* dgate, float* dup, int64_t count) {
  for (int64_t i = grid_first(); i < count; i += grid_stride()) {
    const float g = gate[i], dy = dout[i];
    const float sig = 1.0f / (1.0f + expf(-g));
    dup[i] = dy * g * sig;
    dgate[i] = dy * up[i] * sig * (1.0f + g * (1.0f - sig));
  }
}

}  // namespace

cudaError_t launch_embedding_forward(const float* embed, const int32_t* ids, float* h, int64_t n,
                                     int64_t hidden, cudaStream_t stream) {
  const Launch1d l = elementwise_launch(n * hidden);
  embedding_forward_kernel<<<l.blocks, l.threads, 0, stream>>>(embed, ids, h, n, hidden);
  return cudaGetLastError();
}

cudaError_t launch_embedding_backward(const float* dh, const int32_t* ids, float* g_embed,
                                      int64_t n, int64_t hidden, cudaStream_t stream) {
  const Launch1d l = elementwise_launch(hidden);
  embedding_backward_kernel<<<l.blocks, l.threads, 0, stream>>>(dh, ids, g_embed, n, hidden);
  return cudaGetLastError();
}

cudaError_t launch_rms_norm_forward(const float* x, const float* w, float eps, float* y,
                                    float* rstd, int64_t rows, int64_t cols, cudaStream_t stream) {
  rms_norm_forward_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(x, w, eps, y,
                                                                                   rstd, cols);
  return cudaGetLastError();
}

cudaError_t launch_rms_norm_backward(const float* x, const float* w, const float* rstd,
                                     const float* dy, float* dx, int64_t rows, int64_t cols,
                                     cudaStream_t stream) {
  rms_norm_backward_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(x, w, rstd, dy,
                                                                                    dx, cols);
  return cudaGetLastError();
}

cudaError_t launch_rms_norm_weight_grad(const float* x, const float* rstd, const float* dy,
                                        float* dw, int64_t rows, int64_t cols,
                                        cudaStream_t stream) {
  const Launch1d l = elementwise_launch(cols);
  rms_norm_weight_grad_kernel<<<l.blocks, l.threads, 0, stream>>>(x, rstd, dy, dw, rows, cols);
  return cudaGetLastError();
}

cudaError_t launch_rotary(float* x, const float* cos_table, const float* sin_table, int64_t rows,
                          int64_t seq, int64_t heads, int64_t head_dim, bool inverse,
                          cudaStream_t stream) {
  const int64_t half = head_dim / 2;
  const Launch1d l = elementwise_launch(rows * heads * half);
  rotary_kernel<<<l.blocks, l.threads, 0, stream>>>(x, cos_table, sin_table, rows, seq, heads, half,
                                                    inverse ? -1.0f : 1.0f);
  return cudaGetLastError();
}

cudaError_t launch_swiglu_forward(const float* gate, const float* up, float* out, int64_t count,
                                  cudaStream_t stream) {
  const Launch1d l = elementwise_launch(count);
  swiglu_forward_kernel<<<l.blocks, l.threads, 0, stream>>>(gate, up, out, count);
  return cudaGetLastError();
}

cudaError_t launch_swiglu_backward(const float* gate, const float* up, const float* dout,
                                   float* dgate, float* dup, int64_t count, cudaStream_t stream) {
  const Launch1d l = elementwise_launch(count);
  swiglu_backward_kernel<<<l.blocks, l.threads, 0, stream>>>(gate, up, dout, dgate, dup, count);
  return cudaGetLastError();
}

}  // namespace parallax::exec::gpu
