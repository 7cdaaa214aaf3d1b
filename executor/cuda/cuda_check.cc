#include "executor/cuda/cuda_check.h"

namespace parallax::exec::gpu {
namespace {

// The call's name without its arguments: "cudaMalloc(&p, n)" -> "cudaMalloc".
std::string call_name(const std::string& call) { return call.substr(0, call.find('(')); }

std::string cuda_hint(cudaError_t error) {
  switch (error) {
    case cudaErrorMemoryAllocation:
      return "the model and batch do not fit in GPU memory; use a smaller micro batch or free "
             "the GPU (nvidia-smi lists other processes)";
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
      return "check the GPU and its driver with nvidia-smi, and CUDA_VISIBLE_DEVICES";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
      return "this build targets sm_80 and sm_90; rebuild with CUDA_ARCHITECTURES for this GPU";
    case cudaErrorLaunchOutOfResources:
    case cudaErrorInvalidConfiguration:
      return "a kernel's launch shape does not fit this GPU";
    default:
      return "";
  }
}

std::string cublas_hint(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "out of GPU memory";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "check the GPU and its driver with nvidia-smi";
    default:
      return "";
  }
}

}  // namespace

Diagnostic cuda_diagnostic(const std::string& call, cudaError_t error) {
  return Diagnostic{"cuda", call_name(call) + " failed: " + cudaGetErrorString(error),
                    cuda_hint(error)};
}

Diagnostic cublas_diagnostic(const std::string& call, cublasStatus_t status) {
  return Diagnostic{"cublas", call_name(call) + " failed: " + cublasGetStatusString(status),
                    cublas_hint(status)};
}

}  // namespace parallax::exec::gpu
