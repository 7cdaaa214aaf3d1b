#pragma once
/// LtGemm: one cuBLASLt matmul problem at a time, (m x k)(k x n) in bf16 or fp8, in the TN layout
/// of gemm_layout() (cuda_logic.h). Inputs are allocated and filled with small random values
/// once per shape; the algorithm is cuBLASLt's first heuristic choice within a 32 MiB workspace.
///
/// Precisions (accumulation always fp32, CUBLAS_COMPUTE_32F with fp32 alpha/beta):
///   kBf16: A, B, C and D bf16.
///   kFp8:  A and B E4M3, C and D bf16; A and B carry per-tensor scale pointers (device fp32,
///          here 1.0), as a training framework's fp8 recipe passes its dequantisation scales.
///          Fast accumulation stays off (cuBLASLt's default, the accurate mode recipes use for
///          the gradients).

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "calibrate/cuda/device_buffer.h"
#include "core/hw_profile.h"
#include "core/result.h"

namespace parallax::calibrate::gpu {

struct LtDeleter {
  void operator()(cublasLtMatmulDescOpaque_t* d) const { cublasLtMatmulDescDestroy(d); }
  void operator()(cublasLtMatrixLayoutOpaque_t* l) const { cublasLtMatrixLayoutDestroy(l); }
  void operator()(cublasLtMatmulPreferenceOpaque_t* p) const { cublasLtMatmulPreferenceDestroy(p); }
};
template <typename T>
using LtPtr = std::unique_ptr<T, LtDeleter>;

/// The workspace cuBLASLt may use (what Hopper's fastest kernels ask for).
inline constexpr std::size_t kLtWorkspaceBytes = std::size_t{32} << 20;

class LtGemm {
 public:
  /// A cuBLASLt handle and workspace on the current device; `sm_count` sizes the fill kernels.
  static Result<std::unique_ptr<LtGemm>> create(int sm_count);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  /// Makes (m, n, k, p) the problem enqueue() runs: on a new shape, allocates and fills A and B
  /// (on `stream`), builds the descriptors and asks the heuristic for an algorithm. The shape
  /// must pass check_gemm_shape, and fp8 needs an sm_89+ device.
  Diagnostics prepare(int64_t m, int64_t n, int64_t k, Precision p, cudaStream_t stream);
  /// Enqueues one matmul of the prepared problem on `stream`.
  Diagnostics enqueue(cudaStream_t stream);

 private:
  struct Shape {
    int64_t m = 0, n = 0, k = 0;
    Precision p = Precision::kBf16;
    bool operator==(const Shape&) const = default;
  };

  explicit LtGemm(int sm_count) : sm_count_(sm_count) {}
  Diagnostics allocate_inputs(const Shape& s, cudaStream_t stream);
  Diagnostics describe(const Shape& s);

  int sm_count_;
  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_, a_, b_, d_, scales_;
  LtPtr<cublasLtMatmulDescOpaque_t> op_;
  LtPtr<cublasLtMatrixLayoutOpaque_t> a_layout_, b_layout_, d_layout_;
  cublasLtMatmulAlgo_t algo_{};
  std::optional<Shape> prepared_;
};

}  // namespace parallax::calibrate::gpu
