// CudaBackend: the ComputeBackend of one GPU. GEMMs through cuBLASLt (lt_gemm.h), memory-bound
// kernels and attention through our own kernels (kernels.h), all timed by StreamTimer. Buffers
// are kept per shape, so repeated calls on one shape allocate and fill once.

#include <cuda_runtime.h>

#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include "calibrate/backend.h"
#include "calibrate/cuda/cuda_logic.h"
#include "calibrate/cuda/cuda_status.h"
#include "calibrate/cuda/device_buffer.h"
#include "calibrate/cuda/kernels.h"
#include "calibrate/cuda/lt_gemm.h"
#include "calibrate/cuda/stream_timer.h"

namespace parallax::calibrate {
namespace {

using gpu::bf16;
using gpu::DeviceBuffer;

constexpr float kTriadScale = 3.0f;  // STREAM's scalar
// Activations uniform in [-1, 1]: softmax and attention stay well conditioned.
constexpr float kActivationScale = 1.0f;

std::string shape_text(int64_t a, int64_t b, int64_t c) {
  return std::to_string(a) + "x" + std::to_string(b) + "x" + std::to_string(c);
}

class CudaBackend final : public ComputeBackend {
 public:
  static Result<std::unique_ptr<ComputeBackend>> create(int device);
  // The members free streams and buffers of this device: make it current first.
  ~CudaBackend() override { cudaSetDevice(device_); }

  std::string name() const override { return "cuda"; }
  std::string device() const override { return description_; }
  std::string runtime() const override { return runtime_; }
  // attention_kernels.cu runs on CUDA cores; FlashAttention-class kernels use tensor cores.
  bool attention_is_representative() const override { return false; }
  bool power_capped() const override { return true; }
  double memory_gib() const override { return memory_gib_; }
  int activation_bytes() const override { return 2; }
  std::vector<Precision> gemm_precisions() const override {
    if (has_fp8_) return {Precision::kBf16, Precision::kFp8};
    return {Precision::kBf16};
  }

  Result<Stats> gemm(int64_t m, int64_t n, int64_t k, Precision p,
                     const TimingPolicy& policy) override;
  Result<Stats> memory_kernel(MemoryKernel kernel, int64_t rows, int64_t cols,
                              const TimingPolicy& policy) override;
  Result<Stats> attention(int64_t batch_heads, int64_t seq, int64_t head_dim, bool backward,
                          const TimingPolicy& policy) override;

 private:
  explicit CudaBackend(int device) : device_(device) {}
  Diagnostics fill(DeviceBuffer& buffer, int64_t n, uint64_t seed);
  Diagnostics prepare_memory(MemoryKernel kernel, int64_t rows, int64_t cols);
  Diagnostics prepare_attention(int64_t batch_heads, int64_t seq, int64_t head_dim);

  int device_;
  int sm_count_ = 1;
  bool has_fp8_ = false;
  std::string description_;
  std::string runtime_;  ///< "CUDA driver 12.8, runtime 13.0, cuBLASLt 130000"
  double memory_gib_ = 0;
  std::unique_ptr<gpu::StreamTimer> timer_;
  std::unique_ptr<gpu::LtGemm> gemm_;

  // Memory kernels: x0, x1 (second input), y, w (rmsnorm weight), for one (kernel, rows, cols).
  DeviceBuffer x0_, x1_, y_, w_;
  std::optional<std::tuple<MemoryKernel, int64_t, int64_t>> memory_shape_;

  // Attention: q, k, v, o, dO, dQ, dK, dV (bf16) and lse, delta (fp32) for one shape.
  DeviceBuffer q_, k_, v_, o_, do_, dq_, dk_, dv_, lse_, delta_;
  std::optional<std::tuple<int64_t, int64_t, int64_t>> attention_shape_;
};

Result<std::unique_ptr<ComputeBackend>> CudaBackend::create(int device) {
  int count = 0;
  const cudaError_t count_error = cudaGetDeviceCount(&count);
  if (count_error != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the error, so later calls start clean
    const std::string why =
        count_error != cudaSuccess ? std::string(": ") + cudaGetErrorString(count_error) : "";
    return Diagnostic{"cuda", "no CUDA device" + why,
                      "run on a machine with an NVIDIA GPU and driver (check nvidia-smi and "
                      "CUDA_VISIBLE_DEVICES), or use the cpu backend"};
  }
  if (device < 0 || device >= count) {
    return Diagnostic{"cuda",
                      "device " + std::to_string(device) + " does not exist, got " +
                          std::to_string(count) + " devices",
                      "device in [0, " + std::to_string(count - 1) + "]"};
  }
  std::unique_ptr<CudaBackend> backend(new CudaBackend(device));
  PX_CUDA_TRY(cudaSetDevice(device));
  cudaDeviceProp props{};
  PX_CUDA_TRY(cudaGetDeviceProperties(&props, device));
  int driver = 0;
  PX_CUDA_TRY(cudaDriverGetVersion(&driver));
  backend->sm_count_ = props.multiProcessorCount;
  backend->has_fp8_ = props.major * 10 + props.minor >= 89;
  backend->memory_gib_ = static_cast<double>(props.totalGlobalMem) / (1ull << 30);
  backend->description_ = std::string(props.name) + " (" +
                          std::to_string(props.multiProcessorCount) + " SMs, sm_" +
                          std::to_string(props.major) + std::to_string(props.minor) + ", driver " +
                          gpu::format_cuda_version(driver) + ")";
  int runtime = 0;
  PX_CUDA_TRY(cudaRuntimeGetVersion(&runtime));
  backend->runtime_ = "CUDA driver " + gpu::format_cuda_version(driver) + ", runtime " +
                      gpu::format_cuda_version(runtime);
  PX_CUDA_TRY(gpu::configure_attention_kernels());

  auto timer = gpu::StreamTimer::create();
  if (!timer.ok()) return timer.errors();
  backend->timer_ = std::move(timer).value();
  auto gemm = gpu::LtGemm::create(backend->sm_count_);
  if (!gemm.ok()) return gemm.errors();
  backend->gemm_ = std::move(gemm).value();
  return std::unique_ptr<ComputeBackend>(std::move(backend));
}

Diagnostics CudaBackend::fill(DeviceBuffer& buffer, int64_t n, uint64_t seed) {
  PX_CUDA_TRY(gpu::launch_fill_bf16(buffer.as<bf16>(), n, seed, kActivationScale,
                                    gpu::grid_stride_launch(n, sm_count_), timer_->stream()));
  return {};
}

Result<Stats> CudaBackend::gemm(int64_t m, int64_t n, int64_t k, Precision p,
                                const TimingPolicy& policy) {
  const std::string what = std::string("gemm ") + shape_text(m, n, k) + " " + to_string(p);
  PX_DIAG_TRY(gpu::check_gemm_shape(m, n, k, p, what));
  if (p == Precision::kFp8 && !has_fp8_) {
    return Diagnostic{what, "fp8 needs an sm_89 or later GPU, got " + description_,
                      "measure bf16 only on this GPU"};
  }
  PX_CUDA_TRY(cudaSetDevice(device_));
  PX_DIAG_TRY(gemm_->prepare(m, n, k, p, timer_->stream()));
  return timer_->measure([this](cudaStream_t s) { return gemm_->enqueue(s); }, policy, what);
}

Diagnostics CudaBackend::prepare_memory(MemoryKernel kernel, int64_t rows, int64_t cols) {
  const auto shape = std::make_tuple(kernel, rows, cols);
  if (memory_shape_ == shape) return {};
  memory_shape_.reset();
  const int64_t n = rows * cols;
  const auto bytes = static_cast<std::size_t>(n) * 2;
  const bool two_inputs = kernel == MemoryKernel::kTriad || kernel == MemoryKernel::kSwiglu;
  bool grown = false;
  PX_DIAG_TRY(x0_.reserve(bytes, "memory-kernel input", &grown));
  PX_DIAG_TRY(y_.reserve(bytes, "memory-kernel output", &grown));
  PX_DIAG_TRY(fill(x0_, n, 0x5eed10));
  if (two_inputs) {
    PX_DIAG_TRY(x1_.reserve(bytes, "memory-kernel second input", &grown));
    PX_DIAG_TRY(fill(x1_, n, 0x5eed11));
  }
  if (kernel == MemoryKernel::kRmsNorm) {
    PX_DIAG_TRY(w_.reserve(static_cast<std::size_t>(cols) * 2, "rmsnorm weight", &grown));
    PX_DIAG_TRY(fill(w_, cols, 0x5eed12));
  }
  memory_shape_ = shape;
  return {};
}

Result<Stats> CudaBackend::memory_kernel(MemoryKernel kernel, int64_t rows, int64_t cols,
                                         const TimingPolicy& policy) {
  const std::string what = std::string("memory ") + to_string(kernel) + " " + std::to_string(rows) +
                           "x" + std::to_string(cols);
  if (rows < 1 || cols < 1) {
    return Diagnostic{what, "rows and cols must be positive", ""};
  }
  PX_CUDA_TRY(cudaSetDevice(device_));
  PX_DIAG_TRY(prepare_memory(kernel, rows, cols));
  const gpu::Launch1d launch = gpu::grid_stride_launch(rows * cols / 8 + 1, sm_count_);
  auto enqueue = [&](cudaStream_t s) -> Diagnostics {
    switch (kernel) {
      case MemoryKernel::kRmsNorm:
        PX_CUDA_TRY(
            gpu::launch_rmsnorm(x0_.as<bf16>(), w_.as<bf16>(), y_.as<bf16>(), rows, cols, s));
        break;
      case MemoryKernel::kSoftmax:
        PX_CUDA_TRY(gpu::launch_softmax(x0_.as<bf16>(), y_.as<bf16>(), rows, cols, s));
        break;
      default:
        PX_CUDA_TRY(gpu::launch_elementwise(kernel, x0_.as<bf16>(), x1_.as<bf16>(), kTriadScale,
                                            y_.as<bf16>(), rows * cols, launch, s));
        break;
    }
    return {};
  };
  return timer_->measure(enqueue, policy, what);
}

Diagnostics CudaBackend::prepare_attention(int64_t batch_heads, int64_t seq, int64_t head_dim) {
  const auto shape = std::make_tuple(batch_heads, seq, head_dim);
  if (attention_shape_ == shape) return {};
  attention_shape_.reset();
  const int64_t n = batch_heads * seq * head_dim;
  const auto bytes = static_cast<std::size_t>(n) * 2;
  const auto row_bytes = static_cast<std::size_t>(batch_heads * seq) * sizeof(float);
  bool grown = false;
  struct Named {
    DeviceBuffer* buffer;
    std::size_t bytes;
    const char* what;
  };
  const Named buffers[] = {
      {&q_, bytes, "attention Q"},         {&k_, bytes, "attention K"},
      {&v_, bytes, "attention V"},         {&o_, bytes, "attention O"},
      {&do_, bytes, "attention dO"},       {&dq_, bytes, "attention dQ"},
      {&dk_, bytes, "attention dK"},       {&dv_, bytes, "attention dV"},
      {&lse_, row_bytes, "attention lse"}, {&delta_, row_bytes, "attention delta"}};
  for (const Named& b : buffers) PX_DIAG_TRY(b.buffer->reserve(b.bytes, b.what, &grown));
  PX_DIAG_TRY(fill(q_, n, 0x5eed20));
  PX_DIAG_TRY(fill(k_, n, 0x5eed21));
  PX_DIAG_TRY(fill(v_, n, 0x5eed22));
  PX_DIAG_TRY(fill(do_, n, 0x5eed23));
  // The backward reads O and lse: one forward makes them real.
  gpu::AttentionTensors t{q_.as<bf16>(),    k_.as<bf16>(), v_.as<bf16>(), o_.as<bf16>(),
                          lse_.as<float>(), nullptr,       nullptr,       nullptr,
                          nullptr,          nullptr};
  PX_CUDA_TRY(gpu::launch_attention_forward(t, batch_heads, seq, static_cast<int>(head_dim),
                                            timer_->stream()));
  PX_CUDA_TRY(cudaStreamSynchronize(timer_->stream()));
  attention_shape_ = shape;
  return {};
}

Result<Stats> CudaBackend::attention(int64_t batch_heads, int64_t seq, int64_t head_dim,
                                     bool backward, const TimingPolicy& policy) {
  const std::string what = std::string("attention ") + (backward ? "backward " : "forward ") +
                           shape_text(batch_heads, seq, head_dim);
  PX_DIAG_TRY(gpu::check_attention_shape(batch_heads, seq, head_dim, what));
  PX_CUDA_TRY(cudaSetDevice(device_));
  PX_DIAG_TRY(prepare_attention(batch_heads, seq, head_dim));
  const gpu::AttentionTensors t{
      q_.as<bf16>(),  k_.as<bf16>(),      v_.as<bf16>(),  o_.as<bf16>(),  lse_.as<float>(),
      do_.as<bf16>(), delta_.as<float>(), dq_.as<bf16>(), dk_.as<bf16>(), dv_.as<bf16>()};
  const int d = static_cast<int>(head_dim);
  auto enqueue = [&](cudaStream_t s) -> Diagnostics {
    if (backward) {
      PX_CUDA_TRY(gpu::launch_attention_backward(t, batch_heads, seq, d, s));
    } else {
      PX_CUDA_TRY(gpu::launch_attention_forward(t, batch_heads, seq, d, s));
    }
    return {};
  };
  return timer_->measure(enqueue, policy, what);
}

}  // namespace

Result<std::unique_ptr<ComputeBackend>> make_cuda_backend(int device) {
  return CudaBackend::create(device);
}

}  // namespace parallax::calibrate
