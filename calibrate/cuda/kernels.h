#pragma once
/// Host-side launchers of our CUDA kernels (memory_kernels.cu, attention_kernels.cu). Each
/// enqueues on `stream` and returns the launch's error (cudaGetLastError), never synchronising.
/// Activations are bf16 with fp32 math.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "calibrate/backend.h"
#include "calibrate/cuda/cuda_logic.h"

namespace parallax::calibrate::gpu {

using bf16 = __nv_bfloat16;

/// Keeps `stream` busy for about `ns` nanoseconds. Enqueued before a start event, it lets the
/// host enqueue the timed work before the event fires, so host launch latency stays out of the
/// measured time.
cudaError_t launch_delay(uint64_t ns, cudaStream_t stream);

/// Fills `n` elements with uniform values in [-scale, scale] drawn from a hash of (seed, index):
/// the same values for the same seed, with no host copy.
cudaError_t launch_fill_bf16(bf16* data, int64_t n, uint64_t seed, float scale, Launch1d launch,
                             cudaStream_t stream);
/// The same in fp8 E4M3 (`data` holds n bytes).
cudaError_t launch_fill_fp8_e4m3(void* data, int64_t n, uint64_t seed, float scale, Launch1d launch,
                                 cudaStream_t stream);

/// The element-wise kernels over `n` elements, grid-stride:
///   kCopy   y = x0;   kTriad  y = x0 + scale * x1;   kSwiglu  y = silu(x0) * x1.
/// `x1` is unused by kCopy. Other kernels return cudaErrorInvalidValue.
cudaError_t launch_elementwise(MemoryKernel kernel, const bf16* x0, const bf16* x1, float scale,
                               bf16* y, int64_t n, Launch1d launch, cudaStream_t stream);
/// y = x / sqrt(mean(x^2) + eps) * w over each row of `cols`; one block per row.
cudaError_t launch_rmsnorm(const bf16* x, const bf16* w, bf16* y, int64_t rows, int64_t cols,
                           cudaStream_t stream);
/// y = softmax(x) over each row of `cols`; one block per row.
cudaError_t launch_softmax(const bf16* x, bf16* y, int64_t rows, int64_t cols, cudaStream_t stream);

/// The tensors of causal attention over `batch_heads` heads, each [seq][head_dim] row-major
/// bf16; `lse` and `delta` are [batch_heads][seq] fp32. `lse` holds the base-2 logsumexp of
/// the scaled scores (log2 of the softmax denominator), written by the forward.
struct AttentionTensors {
  const bf16* q = nullptr;
  const bf16* k = nullptr;
  const bf16* v = nullptr;
  bf16* o = nullptr;
  float* lse = nullptr;
  const bf16* d_o = nullptr;
  float* delta = nullptr;  ///< rowsum(dO * O), scratch of the backward
  bf16* dq = nullptr;
  bf16* dk = nullptr;
  bf16* dv = nullptr;
};

/// Lets the attention kernels use more than 48 KiB of shared memory; call once per device.
cudaError_t configure_attention_kernels();
/// Forward: O and lse from Q, K, V. `head_dim` must pass attention_head_dim_supported.
cudaError_t launch_attention_forward(const AttentionTensors& t, int64_t batch_heads, int64_t seq,
                                     int head_dim, cudaStream_t stream);
/// Backward: dQ, dK, dV from Q, K, V, O, lse and dO (four kernels: delta, dV, dK, dQ).
cudaError_t launch_attention_backward(const AttentionTensors& t, int64_t batch_heads, int64_t seq,
                                      int head_dim, cudaStream_t stream);

}  // namespace parallax::calibrate::gpu
