// CudaTrainer in a build without CUDA (nvcc not found at configure time): creating one fails
// with a diagnostic, so callers need no preprocessor switch of their own.

#include <utility>

#include "executor/cuda/cuda_trainer.h"

namespace parallax::exec::gpu {
namespace {

Diagnostic not_built() {
  return Diagnostic{"cuda", "parallax was built without CUDA (nvcc not found at configure time)",
                    "install the CUDA toolkit and reconfigure, or use --backend cpu"};
}

}  // namespace

struct CudaTrainer::State {};

bool cuda_trainer_built() { return false; }

Result<int> cuda_device_count() { return not_built(); }

CudaTrainer::CudaTrainer(std::unique_ptr<State> state) : state_(std::move(state)) {}
CudaTrainer::~CudaTrainer() = default;

Result<std::unique_ptr<CudaTrainer>> CudaTrainer::create(const ModelShape&, std::span<const float>,
                                                         const AdamWConfig&, int) {
  return not_built();
}

Result<double> CudaTrainer::step(std::span<const int32_t>, int64_t, int64_t, int64_t, int64_t) {
  return not_built();
}

Result<double> CudaTrainer::loss(std::span<const int32_t>, int64_t, int64_t) { return not_built(); }

double CudaTrainer::last_grad_norm() const { return 0; }

Diagnostics CudaTrainer::download_params(std::span<float>) const { return {not_built()}; }

int64_t CudaTrainer::num_params() const { return 0; }

std::size_t CudaTrainer::peak_device_bytes() const { return 0; }

}  // namespace parallax::exec::gpu
