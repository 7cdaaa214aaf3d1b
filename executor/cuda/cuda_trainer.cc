// CudaTrainer: device setup, the step (microbatches, gradient norm, clipping, AdamW) and the
// copies in and out. The microbatch pass itself is in cuda_pass.cc.

#include "executor/cuda/cuda_trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <utility>

#include "executor/cuda/cuda_check.h"
#include "executor/cuda/cuda_state.h"
#include "executor/cuda/kernels.h"

namespace parallax::exec::gpu {

// ---- DeviceMemory ---------------------------------------------------------------------------

Diagnostics DeviceMemory::allocate(std::size_t bytes, const char* what) {
  reset();
  const std::size_t want = std::max<std::size_t>(bytes, 1);
  const cudaError_t error = cudaMalloc(&ptr_, want);
  if (error != cudaSuccess) {
    ptr_ = nullptr;
    char size[48];
    std::snprintf(size, sizeof size, "%.1f MiB", static_cast<double>(want) / (1 << 20));
    return {cuda_diagnostic(std::string("cudaMalloc of ") + size + " for " + what, error)};
  }
  bytes_ = want;
  return {};
}

void DeviceMemory::reset() {
  if (ptr_ != nullptr) cudaFree(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

CudaTrainer::State::~State() {
  if (stream != nullptr) cudaStreamSynchronize(stream);
  if (blas != nullptr) cublasDestroy(blas);
  if (stream != nullptr) cudaStreamDestroy(stream);
  // The DeviceMemory members free themselves.
}

// ---- setup ----------------------------------------------------------------------------------

namespace {

/// The tensors of the layout by name; PX_CHECK on a missing name (the layout is the model's).
struct SlotIndex {
  std::map<std::string, TensorSlot> by_name;
  const TensorSlot& operator[](const std::string& name) const {
    const auto it = by_name.find(name);
    PX_CHECK(it != by_name.end(), "the layout has no tensor " << name);
    return it->second;
  }
};

void index_tensors(const Transformer<float>& model, CudaTrainer::State& s) {
  SlotIndex ix;
  for (const TensorSlot& t : model.layout()) ix.by_name[t.name] = t;
  s.embed = ix["embed"];
  s.final_norm = ix["final_norm"];
  if (!s.shape.tied_embeddings) s.output = ix["output"];
  for (int64_t l = 0; l < s.shape.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    s.blocks.push_back({ix[p + "attn_norm"], ix[p + "wq"], ix[p + "wk"], ix[p + "wv"], ix[p + "wo"],
                        ix[p + "mlp_norm"], ix[p + "w_gate"], ix[p + "w_up"], ix[p + "w_down"]});
  }
}

Diagnostics setup_device(CudaTrainer::State& s, std::span<const float> initial,
                         const std::vector<uint8_t>& mask) {
  PX_EXEC_CUDA_TRY(cudaSetDevice(s.device));
  int smem = 0;
  PX_EXEC_CUDA_TRY(
      cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, s.device));
  s.max_smem_bytes = static_cast<std::size_t>(smem);
  PX_EXEC_CUDA_TRY(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  PX_EXEC_CUBLAS_TRY(cublasCreate(&s.blas));
  PX_EXEC_CUBLAS_TRY(cublasSetStream(s.blas, s.stream));
  // fp32 GEMMs with fp32 accumulation and no TF32, whatever NVIDIA_TF32_OVERRIDE says: the
  // losses must match the CPU executor's.
  PX_EXEC_CUBLAS_TRY(cublasSetMathMode(s.blas, CUBLAS_PEDANTIC_MATH));
  PX_EXEC_DIAG_TRY(s.workspace.allocate(kCublasWorkspaceBytes, "cuBLAS's workspace"));
  PX_EXEC_CUBLAS_TRY(cublasSetWorkspace(s.blas, s.workspace.at<void>(0), s.workspace.bytes()));

  const auto p = static_cast<std::size_t>(s.num_params);
  PX_EXEC_DIAG_TRY(s.persistent.allocate(persistent_bytes(s.num_params),
                                         "parameters, gradients and AdamW moments"));
  const std::size_t floats = align_up(p * sizeof(float));
  s.params = s.persistent.at<float>(0);
  s.grads = s.persistent.at<float>(floats);
  s.m = s.persistent.at<float>(2 * floats);
  s.v = s.persistent.at<float>(3 * floats);
  s.decay = s.persistent.at<uint8_t>(4 * floats);
  s.peak_bytes = s.held_bytes();
  // Everything on the trainer's stream, which does not wait for the legacy default stream.
  PX_EXEC_CUDA_TRY(cudaMemcpyAsync(s.params, initial.data(), p * sizeof(float),
                                   cudaMemcpyHostToDevice, s.stream));
  PX_EXEC_CUDA_TRY(cudaMemcpyAsync(s.decay, mask.data(), p, cudaMemcpyHostToDevice, s.stream));
  PX_EXEC_CUDA_TRY(cudaMemsetAsync(s.grads, 0, 3 * floats, s.stream));  // gradients, m and v
  PX_EXEC_CUDA_TRY(cudaStreamSynchronize(s.stream));
  return {};
}

/// The scalars of AdamW::step (executor/optimizer.cc), in the same double arithmetic.
AdamWScalars adamw_scalars(const AdamWConfig& c, double grad_norm, int64_t step) {
  const double clip = c.clip_norm > 0 && grad_norm > c.clip_norm ? c.clip_norm / grad_norm : 1.0;
  const double lr =
      c.warmup_steps > 0 ? c.lr * std::min(1.0, static_cast<double>(step) / c.warmup_steps) : c.lr;
  const double c1 = 1 - std::pow(c.beta1, static_cast<double>(step));
  const double c2 = 1 - std::pow(c.beta2, static_cast<double>(step));
  AdamWScalars s;
  s.grad_scale = static_cast<float>(clip);
  s.beta1 = static_cast<float>(c.beta1);
  s.beta2 = static_cast<float>(c.beta2);
  s.step_size = static_cast<float>(lr / c1);
  s.inv_c2 = static_cast<float>(1 / c2);
  s.eps = static_cast<float>(c.eps);
  s.decay = static_cast<float>(lr * c.weight_decay);
  return s;
}

}  // namespace

bool cuda_trainer_built() { return true; }

Result<int> cuda_device_count() {
  int count = 0;
  PX_EXEC_CUDA_TRY(cudaGetDeviceCount(&count));
  if (count == 0)
    return Diagnostic{"cuda", "no CUDA device is visible",
                      "check nvidia-smi and CUDA_VISIBLE_DEVICES"};
  return count;
}

CudaTrainer::CudaTrainer(std::unique_ptr<State> state) : state_(std::move(state)) {}
CudaTrainer::~CudaTrainer() = default;

Result<std::unique_ptr<CudaTrainer>> CudaTrainer::create(const ModelShape& shape,
                                                         std::span<const float> initial_params,
                                                         const AdamWConfig& adam, int device) {
  if (Diagnostics d = check_cuda_shape(shape, "model"); !d.empty()) return d;
  const Transformer<float> model(shape);
  if (static_cast<int64_t>(initial_params.size()) != model.num_params())
    return Diagnostic{"cuda trainer",
                      "initial parameters have " + std::to_string(initial_params.size()) +
                          " values, the model " + std::to_string(model.num_params()),
                      "pass a Transformer<float>'s flat buffer for this shape"};
  auto state = std::make_unique<State>();
  state->shape = shape;
  state->adam = adam;
  state->device = device;
  state->num_params = model.num_params();
  index_tensors(model, *state);
  const std::vector<uint8_t> mask = decay_mask(model.layout(), model.num_params());
  if (Diagnostics d = setup_device(*state, initial_params, mask); !d.empty()) return d;
  return std::unique_ptr<CudaTrainer>(new CudaTrainer(std::move(state)));
}

Result<double> CudaTrainer::step(std::span<const int32_t> tokens, int64_t batch_per_microbatch,
                                 int64_t seq, int64_t microbatches, int64_t step_number) {
  State& s = *state_;
  const StepShape shape{batch_per_microbatch, seq, microbatches};
  if (Diagnostics d = check_step(s.shape, shape, tokens, s.max_smem_bytes); !d.empty()) return d;
  if (step_number < 1)
    return Diagnostic{"cuda step", "AdamW steps count from 1, got " + std::to_string(step_number),
                      ""};
  PX_EXEC_CUDA_TRY(cudaSetDevice(s.device));
  PX_EXEC_DIAG_TRY(prepare_pass(s, shape.batch, shape.seq));
  const auto p = static_cast<std::size_t>(s.num_params);
  PX_EXEC_CUDA_TRY(cudaMemsetAsync(s.grads, 0, p * sizeof(float), s.stream));
  const double step_tokens = static_cast<double>(microbatches * shape.tokens());
  const auto grad_scale = static_cast<float>(1.0 / step_tokens);
  const std::size_t per_microbatch = static_cast<std::size_t>(shape.batch * (seq + 1));
  double loss_sum = 0;
  for (int64_t mb = 0; mb < microbatches; ++mb) {
    const Result<double> loss = run_microbatch(
        s, tokens.subspan(static_cast<std::size_t>(mb) * per_microbatch, per_microbatch), true,
        grad_scale);
    if (!loss) return loss.errors();
    loss_sum += *loss;
  }
  double* sums = s.buf<double>(s.plan.sums);
  PX_EXEC_CUDA_TRY(launch_sum_squares(s.grads, s.num_params, s.buf<double>(s.plan.partials),
                                      sums + 1, s.stream));
  double sq = 0;
  PX_EXEC_CUDA_TRY(
      cudaMemcpyAsync(&sq, sums + 1, sizeof(double), cudaMemcpyDeviceToHost, s.stream));
  PX_EXEC_CUDA_TRY(cudaStreamSynchronize(s.stream));
  s.last_grad_norm = std::sqrt(sq);
  PX_EXEC_CUDA_TRY(launch_adamw(s.params, s.grads, s.m, s.v, s.decay, s.num_params,
                                adamw_scalars(s.adam, s.last_grad_norm, step_number), s.stream));
  PX_EXEC_CUDA_TRY(cudaStreamSynchronize(s.stream));
  return loss_sum / step_tokens;
}

Result<double> CudaTrainer::loss(std::span<const int32_t> tokens, int64_t batch, int64_t seq) {
  State& s = *state_;
  const StepShape shape{batch, seq, 1};
  if (Diagnostics d = check_step(s.shape, shape, tokens, s.max_smem_bytes); !d.empty()) return d;
  PX_EXEC_CUDA_TRY(cudaSetDevice(s.device));
  PX_EXEC_DIAG_TRY(prepare_pass(s, batch, seq));
  return run_microbatch(s, tokens, false, 0.0f);
}

double CudaTrainer::last_grad_norm() const { return state_->last_grad_norm; }

Diagnostics CudaTrainer::download_params(std::span<float> out) const {
  const State& s = *state_;
  if (static_cast<int64_t>(out.size()) != s.num_params)
    return {Diagnostic{"cuda trainer",
                       "download_params into " + std::to_string(out.size()) +
                           " values, the model has " + std::to_string(s.num_params),
                       ""}};
  PX_EXEC_CUDA_TRY(cudaSetDevice(s.device));
  PX_EXEC_CUDA_TRY(cudaMemcpyAsync(out.data(), s.params, out.size() * sizeof(float),
                                   cudaMemcpyDeviceToHost, s.stream));
  PX_EXEC_CUDA_TRY(cudaStreamSynchronize(s.stream));
  return {};
}

int64_t CudaTrainer::num_params() const { return state_->num_params; }

std::size_t CudaTrainer::peak_device_bytes() const { return state_->peak_bytes; }

}  // namespace parallax::exec::gpu
