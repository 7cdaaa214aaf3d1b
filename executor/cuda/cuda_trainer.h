#pragma once
/// CudaTrainer: the executor's single-GPU backend. It trains a dense ModelShape (no tensor,
/// pipeline, data, context or expert parallelism) in fp32 on one GPU, step for step as the CPU
/// trainer does on one rank: microbatches whose gradients accumulate with grad_scale =
/// 1 / (tokens in the step), the global gradient norm, clipping, and AdamW with norm weights not
/// decayed. GEMMs go through cuBLAS in fp32 with TF32 off (pedantic math), so losses match the
/// CPU executor to float rounding.
///
/// This header includes no CUDA header, so callers (the CLI) build with any compiler. Built
/// without CUDA, create() fails with a diagnostic and cuda_trainer_built() is false.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "core/result.h"
#include "executor/model.h"
#include "executor/optimizer.h"

namespace parallax::exec::gpu {

/// Whether this build has the CUDA backend (nvcc was found at configure time).
bool cuda_trainer_built();

/// CUDA devices visible to this process; a diagnostic when the runtime fails (no driver, no
/// GPU) or when the build has no CUDA. Zero devices is an error too.
Result<int> cuda_device_count();

class CudaTrainer {
 public:
  /// Uploads `initial_params` (a Transformer<float>'s flat buffer for `shape`, in its layout()
  /// order, num_params() values) to `device` and zeroes the AdamW moments. Fails with
  /// diagnostics for MoE shapes, a parameter count that does not match, no such device, or any
  /// CUDA/cuBLAS error (out of memory included).
  static Result<std::unique_ptr<CudaTrainer>> create(const ModelShape& shape,
                                                     std::span<const float> initial_params,
                                                     const AdamWConfig& adam, int device = 0);
  ~CudaTrainer();
  CudaTrainer(const CudaTrainer&) = delete;
  CudaTrainer& operator=(const CudaTrainer&) = delete;

  /// One training step (1-based `step_number`, the AdamW step): `tokens` holds microbatches *
  /// batch rows of seq + 1 ids (microbatch j's rows first at j * batch * (seq + 1)); inputs are
  /// ids [0, seq) of a row and targets ids [1, seq]. Returns the mean next-token cross-entropy
  /// per token of the step (nats), as the CPU trainer's StepRecord::loss, computed with the
  /// parameters before the update. Diagnostics for bad sizes or ids, and CUDA errors.
  Result<double> step(std::span<const int32_t> tokens, int64_t batch_per_microbatch, int64_t seq,
                      int64_t microbatches, int64_t step_number);

  /// The summed next-token cross-entropy of `batch` rows of seq + 1 ids (what
  /// Transformer::loss returns), forward only; the parameters are unchanged.
  Result<double> loss(std::span<const int32_t> tokens, int64_t batch, int64_t seq);

  /// The L2 norm of the last step's gradient, before clipping (0 before the first step).
  double last_grad_norm() const;

  /// Copies the parameters to `out` (num_params() values).
  Diagnostics download_params(std::span<float> out) const;

  int64_t num_params() const;

  /// The most device memory this trainer has held at once, in bytes: its own allocations
  /// (parameters, gradients, AdamW moments, decay mask, the step arena) and cuBLAS's workspace;
  /// not the CUDA context.
  std::size_t peak_device_bytes() const;

  struct State;  ///< defined with the CUDA code

 private:
  explicit CudaTrainer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace parallax::exec::gpu
