#pragma once
// The device state behind CudaTrainer (private to executor/cuda): the model's tensors on the GPU,
// the step arena, the stream and the cuBLAS handle, and the microbatch pass over them
// (cuda_pass.cc). Includes the CUDA headers; the public cuda_trainer.h does not.

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/result.h"
#include "executor/cuda/cuda_plan.h"
#include "executor/cuda/cuda_trainer.h"
#include "executor/model.h"
#include "executor/optimizer.h"

namespace parallax::exec::gpu {

/// One cudaMalloc'd allocation, freed when it goes away (a failing cudaFree is ignored: there
/// is no one to report it to).
class DeviceMemory {
 public:
  DeviceMemory() = default;
  ~DeviceMemory() { reset(); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  /// Frees the current allocation, then allocates `bytes` (at least 1); `what` names it in the
  /// diagnostic. On failure the memory is empty.
  Diagnostics allocate(std::size_t bytes, const char* what);
  void reset();
  template <typename T>
  T* at(std::size_t offset) const {
    return reinterpret_cast<T*>(static_cast<char*>(ptr_) + offset);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

/// A block's tensors in the flat parameter (and gradient) buffer.
struct BlockTensors {
  TensorSlot attn_norm, wq, wk, wv, wo, mlp_norm, w_gate, w_up, w_down;
};

struct CudaTrainer::State {
  ModelShape shape;
  AdamWConfig adam;
  int device = 0;
  int64_t num_params = 0;
  TensorSlot embed, final_norm, output;  // output unused when tied
  std::vector<BlockTensors> blocks;

  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  DeviceMemory persistent;  // params, grads, AdamW m and v, decay mask
  DeviceMemory workspace;   // cuBLAS's
  DeviceMemory arena;       // one microbatch's activations and workspace (plan)
  float *params = nullptr, *grads = nullptr, *m = nullptr, *v = nullptr;
  uint8_t* decay = nullptr;
  StepBuffers plan;
  int64_t plan_batch = 0, plan_seq = 0;
  std::size_t max_smem_bytes = 0, configured_smem_bytes = kDefaultSmemBytes;
  std::size_t peak_bytes = 0;
  double last_grad_norm = 0;
  std::vector<int32_t> host_ids;  // inputs then targets of the microbatch being uploaded

  ~State();
  std::size_t held_bytes() const { return persistent.bytes() + workspace.bytes() + arena.bytes(); }
  template <typename T>
  T* buf(std::size_t offset) const {
    return arena.at<T>(offset);
  }
};

/// Sizes the arena (and uploads the rotary table) for microbatches of batch x seq, allocating
/// only when the shape changes.
Diagnostics prepare_pass(CudaTrainer::State& s, int64_t batch, int64_t seq);

/// One microbatch (`tokens`: batch rows of seq + 1 ids, prepare_pass done): the forward and,
/// when `train`, the backward, with grads += grad_scale * d(summed loss)/d(params). Returns the
/// summed next-token cross-entropy (synchronises the stream).
Result<double> run_microbatch(CudaTrainer::State& s, std::span<const int32_t> tokens, bool train,
                              float grad_scale);

}  // namespace parallax::exec::gpu
