// What every build of calibrate has: the memory-kernel names and byte counts, the one-rank
// communicator, and the factories that fail cleanly when CUDA or MPI was not built in.

#include <memory>
#include <string>

#include "calibrate/backend.h"

namespace parallax::calibrate {

const char* to_string(MemoryKernel k) {
  switch (k) {
    case MemoryKernel::kCopy:
      return "copy";
    case MemoryKernel::kTriad:
      return "triad";
    case MemoryKernel::kRmsNorm:
      return "rmsnorm";
    case MemoryKernel::kSwiglu:
      return "swiglu";
    case MemoryKernel::kSoftmax:
      return "softmax";
  }
  return "?";
}

std::optional<MemoryKernel> parse_memory_kernel(const std::string& s) {
  for (MemoryKernel k : {MemoryKernel::kCopy, MemoryKernel::kTriad, MemoryKernel::kRmsNorm,
                         MemoryKernel::kSwiglu, MemoryKernel::kSoftmax})
    if (s == to_string(k)) return k;
  return std::nullopt;
}

double memory_kernel_bytes(MemoryKernel k, int64_t rows, int64_t cols, int element_bytes) {
  // Elements read plus written per input element (backend.h): the weight vector of rmsnorm
  // (cols elements, cached) and softmax's second pass over a row (cached) are not counted.
  double moved_per_element = 2;
  switch (k) {
    case MemoryKernel::kCopy:
    case MemoryKernel::kRmsNorm:
    case MemoryKernel::kSoftmax:
      moved_per_element = 2;
      break;
    case MemoryKernel::kTriad:
    case MemoryKernel::kSwiglu:
      moved_per_element = 3;
      break;
  }
  return moved_per_element * static_cast<double>(rows) * static_cast<double>(cols) * element_bytes;
}

namespace {

class SingleCommunicator final : public Communicator {
 public:
  std::string name() const override { return "single"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_size() const override { return 1; }
  using Communicator::collective;
  Result<Stats> collective(CollectiveOp op, double /*bytes*/, const TimingPolicy& /*policy*/,
                           Grouping /*group*/) override {
    return Diagnostic{std::string("collective ") + parallax::to_string(op),
                      "no collectives with one rank",
                      "launch with mpirun -np 2 or more (mpi) or on several GPUs (nccl)"};
  }
  double max_over_ranks(double v) override { return v; }
};

}  // namespace

std::unique_ptr<Communicator> make_single_communicator() {
  return std::make_unique<SingleCommunicator>();
}

#ifndef PARALLAX_HAVE_CUDA_BACKEND
// With CUDA, calibrate/cuda/ defines these (cuda_backend.cc; nccl_communicator.cc or nccl_stub.cc).
namespace {
constexpr const char* kNoCuda =
    "this build has no CUDA backend: nvcc was not found when it was configured";
constexpr const char* kNoCudaHint =
    "install the CUDA toolkit (nvcc on PATH), reconfigure, or use the cpu backend";
}  // namespace

Result<std::unique_ptr<ComputeBackend>> make_cuda_backend(int /*device*/) {
  return Diagnostic{"cuda", kNoCuda, kNoCudaHint};
}

Result<std::unique_ptr<Communicator>> make_nccl_communicator(int* /*argc*/, char*** /*argv*/) {
  return Diagnostic{"nccl", kNoCuda, kNoCudaHint};
}
#endif

#ifndef PARALLAX_HAVE_MPI
// With MPI, calibrate/cpu/mpi_communicator.cc defines it.
Result<std::unique_ptr<Communicator>> make_mpi_communicator(int* /*argc*/, char*** /*argv*/) {
  return Diagnostic{"mpi", "built without MPI",
                    "install an MPI (e.g. libopenmpi-dev) and reconfigure, or run on one rank"};
}
#endif

}  // namespace parallax::calibrate
