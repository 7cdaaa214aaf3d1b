#pragma once
/// CUDA and cuBLASLt status codes turned into Diagnostics: `cuda: cudaMalloc failed: out of
/// memory (hint: ...)`. Every runtime and library call of the backend goes through these; none
/// aborts.

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "core/result.h"

namespace parallax::calibrate::gpu {

/// `cuda: <call> failed: <cudaGetErrorString> (hint: ...)`.
Diagnostic cuda_diagnostic(const std::string& call, cudaError_t error);
/// `cublasLt: <call> failed: <cublasLtGetStatusString> (hint: ...)`.
Diagnostic cublas_diagnostic(const std::string& call, cublasStatus_t status);

}  // namespace parallax::calibrate::gpu

/// Evaluates a CUDA runtime call; on failure returns its diagnostic from the enclosing function,
/// which returns a Result<T> or Diagnostics.
#define PX_CUDA_TRY(call)                                                      \
  do {                                                                         \
    const cudaError_t px_cuda_error_ = (call);                                 \
    if (px_cuda_error_ != cudaSuccess)                                         \
      return ::parallax::Diagnostics{                                          \
          ::parallax::calibrate::gpu::cuda_diagnostic(#call, px_cuda_error_)}; \
  } while (0)

/// The same for a cuBLAS / cuBLASLt call.
#define PX_CUBLAS_TRY(call)                                                         \
  do {                                                                              \
    const cublasStatus_t px_cublas_status_ = (call);                                \
    if (px_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                 \
      return ::parallax::Diagnostics{                                               \
          ::parallax::calibrate::gpu::cublas_diagnostic(#call, px_cublas_status_)}; \
  } while (0)

/// Propagates a non-empty Diagnostics from a helper.
#define PX_DIAG_TRY(expr)                       \
  do {                                          \
    ::parallax::Diagnostics px_diags_ = (expr); \
    if (!px_diags_.empty()) return px_diags_;   \
  } while (0)
