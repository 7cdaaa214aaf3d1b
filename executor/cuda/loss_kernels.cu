// Cross-entropy, the deterministic sums (loss, squared gradient norm) and AdamW of the executor's
// CUDA backend. The float arithmetic follows executor/model_ops.cc and executor/optimizer.cc
// operation for operation, so that the GPU and the CPU round alike where they can.

#include "executor/cuda/block_reduce.cuh"
#include "executor/cuda/kernels.h"
#include "executor/cuda/launch_shape.h"

namespace parallax::exec::gpu {
namespace {

// One block per row. Every thread reads the target logit before the first barrier, and writes
// (the gradient, in place) only after the last one, so no thread reads an overwritten logit.
__global__ void cross_entropy_kernel(float* logits, const int32_t* targets, double* row_loss,
                                     int64_t vocab, float grad_scale, bool write_grad) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  float* l = logits + row * vocab;
  const int64_t target = targets[row];
  const float target_logit = l[target];
  float local_max = -INFINITY;
  for (int64_t c = threadIdx.x; c < vocab; c += blockDim.x) local_max = fmaxf(local_max, l[c]);
  const float row_max = block_max(local_max, scratch);
  float local_sum = 0;
  for (int64_t c = threadIdx.x; c < vocab; c += blockDim.x) local_sum += expf(l[c] - row_max);
  const float sum = block_sum(local_sum, scratch);
  if (threadIdx.x == 0)
    row_loss[row] = static_cast<double>(row_max) + log(static_cast<double>(sum)) -
                    static_cast<double>(target_logit);
  if (!write_grad) return;
  const float k = grad_scale / sum;
  for (int64_t c = threadIdx.x; c < vocab; c += blockDim.x) {
    float g = expf(l[c] - row_max) * k;
    if (c == target) g -= grad_scale;
    l[c] = g;
  }
}

template <typename T>
__device__ double sum_term(T x, bool square) {
  const double v = static_cast<double>(x);
  return square ? v * v : v;
}

// Pass 1: block b sums items b * threads + t + k * grid (fixed, so the result is reproducible).
template <typename T>
__global__ void partial_sum_kernel(const T* x, int64_t n, bool square, double* partials) {
  __shared__ double scratch[32];
  double acc = 0;
  for (int64_t i = grid_first(); i < n; i += grid_stride()) acc += sum_term(x[i], square);
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

// Pass 2: one block sums the partials.
__global__ void final_sum_kernel(const double* partials, int count, double* out) {
  __shared__ double scratch[32];
  double acc = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) *out = acc;
}

template <typename T>
cudaError_t launch_sum_of(const T* x, int64_t n, bool square, double* partials, double* out,
                          cudaStream_t stream) {
  partial_sum_kernel<T><<<kReduceBlocks, kReduceThreads, 0, stream>>>(x, n, square, partials);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  final_sum_kernel<<<1, kReduceThreads, 0, stream>>>(partials, kReduceBlocks, out);
  return cudaGetLastError();
}

__global__ void adamw_kernel(float* __restrict__ p, const float* __restrict__ g,
                             float* __restrict__ m, float* __restrict__ v,
                             const uint8_t* __restrict__ d, int64_t n, AdamWScalars s) {
  for (int64_t i = grid_first(); i < n; i += grid_stride()) {
    const float gi = g[i] * s.grad_scale;
    const float mi = s.beta1 * m[i] + (1 - s.beta1) * gi;
    const float vi = s.beta2 * v[i] + (1 - s.beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float pi = p[i] - s.decay * static_cast<float>(d[i]) * p[i];
    p[i] = pi - s.step_size * mi / (sqrtf(vi * s.inv_c2) + s.eps);
  }
}

}  // namespace

cudaError_t launch_cross_entropy(float* logits, const int32_t* targets, double* row_loss,
                                 int64_t rows, int64_t vocab, float grad_scale, bool write_grad,
                                 cudaStream_t stream) {
  cross_entropy_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
      logits, targets, row_loss, vocab, grad_scale, write_grad);
  return cudaGetLastError();
}

cudaError_t launch_sum_squares(const float* x, int64_t n, double* partials, double* out,
                               cudaStream_t stream) {
  return launch_sum_of(x, n, true, partials, out, stream);
}

cudaError_t launch_sum(const double* x, int64_t n, double* partials, double* out,
                       cudaStream_t stream) {
  return launch_sum_of(x, n, false, partials, out, stream);
}

cudaError_t launch_adamw(float* params, const float* grads, float* m, float* v,
                         const uint8_t* decay_mask, int64_t n, const AdamWScalars& s,
                         cudaStream_t stream) {
  const Launch1d l = elementwise_launch(n);
  adamw_kernel<<<l.blocks, l.threads, 0, stream>>>(params, grads, m, v, decay_mask, n, s);
  return cudaGetLastError();
}

}  // namespace parallax::exec::gpu
