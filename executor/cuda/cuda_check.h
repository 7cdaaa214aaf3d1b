#pragma once
/// CUDA runtime and cuBLAS status codes of the executor's CUDA backend turned into Diagnostics:
/// `cuda: cudaMalloc failed: out of memory (hint: ...)`. Every runtime and library call of the
/// backend goes through these; none aborts.

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "core/result.h"

namespace parallax::exec::gpu {

/// `cuda: <call> failed: <cudaGetErrorString> (hint: ...)`.
Diagnostic cuda_diagnostic(const std::string& call, cudaError_t error);
/// `cublas: <call> failed: <cublasGetStatusString> (hint: ...)`.
Diagnostic cublas_diagnostic(const std::string& call, cublasStatus_t status);

}  // namespace parallax::exec::gpu

/// Evaluates a CUDA runtime call (or a kernel launcher returning cudaError_t); on failure returns
/// its diagnostic from the enclosing function, which returns a Result<T> or Diagnostics.
#define PX_EXEC_CUDA_TRY(call)                                                 \
  do {                                                                         \
    const cudaError_t px_exec_cuda_error_ = (call);                            \
    if (px_exec_cuda_error_ != cudaSuccess)                                    \
      return ::parallax::Diagnostics{                                          \
          ::parallax::exec::gpu::cuda_diagnostic(#call, px_exec_cuda_error_)}; \
  } while (0)

/// The same for a cuBLAS call.
#define PX_EXEC_CUBLAS_TRY(call)                                                    \
  do {                                                                              \
    const cublasStatus_t px_exec_cublas_status_ = (call);                           \
    if (px_exec_cublas_status_ != CUBLAS_STATUS_SUCCESS)                            \
      return ::parallax::Diagnostics{                                               \
          ::parallax::exec::gpu::cublas_diagnostic(#call, px_exec_cublas_status_)}; \
  } while (0)

/// Propagates a non-empty Diagnostics from a helper.
#define PX_EXEC_DIAG_TRY(expr)                          \
  do {                                                  \
    ::parallax::Diagnostics px_exec_diags_ = (expr);    \
    if (!px_exec_diags_.empty()) return px_exec_diags_; \
  } while (0)
