// CpuBackend: the ComputeBackend of one CPU core. GEMMs through Eigen (fp32, and bf16 through
// Eigen::bfloat16), the memory-bound kernels in fp32 (cpu_kernels.h) and the executor's causal
// attention (executor/model_ops.h: what CPU ranks train with, so what the profile must describe),
// each repetition timed with a steady clock. One rank per core is the model: nothing here
// starts threads (Eigen is built without OpenMP, so its products are single-threaded).
//
// This is the only file of calibrate that includes Eigen and the only one built with
// -march=native, so every Eigen instantiation of the library sees the same instruction set.

// GCC 12's AVX-512 intrinsics trip its own -Wmaybe-uninitialized thousands of times inside
// Eigen's packet code (GCC bug 105593); the headers are not ours to fix.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>
#pragma GCC diagnostic pop

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <fstream>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "calibrate/backend.h"
#include "calibrate/cpu/cpu_kernels.h"
#include "executor/model_ops.h"

namespace parallax::calibrate {
namespace cpu {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstRowMap = Eigen::Map<const RowMatrix>;
using RowMap = Eigen::Map<RowMatrix>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;
using ArrayMap = Eigen::Map<Eigen::ArrayXf>;

}  // namespace

void copy_kernel(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i];
}

void triad_kernel(const float* b, const float* c, float s, float* a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

// The kernels with reductions or exp use Eigen arrays: without -ffast-math the compiler will not
// reorder a float sum into vector lanes, nor vectorise std::exp; Eigen does both.
void rmsnorm_kernel(const float* x, const float* w, float* y, int64_t rows, int64_t cols) {
  const ConstArrayMap weight(w, cols);
  for (int64_t r = 0; r < rows; ++r) {
    const ConstArrayMap xr(x + r * cols, cols);
    const float inv_rms = 1.0f / std::sqrt(xr.square().mean() + kRmsNormEps);
    ArrayMap(y + r * cols, cols) = xr * inv_rms * weight;
  }
}

void swiglu_kernel(const float* g, const float* u, float* y, int64_t n) {
  const ConstArrayMap gate(g, n), up(u, n);
  ArrayMap(y, n) = gate / (1.0f + (-gate).exp()) * up;
}

void softmax_kernel(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const ConstArrayMap xr(x + r * cols, cols);
    ArrayMap yr(y + r * cols, cols);
    yr = (xr - xr.maxCoeff()).exp();
    yr *= 1.0f / yr.sum();
  }
}

}  // namespace cpu

namespace {

using BfRowMatrix = Eigen::Matrix<Eigen::bfloat16, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Clock = std::chrono::steady_clock;

constexpr float kTriadScale = 3.0f;  // STREAM's scalar
// A benchmark may use this share of a rank's memory; beyond it the machine would swap or the
// neighbouring ranks would run out, and the timing would not be of the kernel.
constexpr double kMaxMemoryShare = 0.25;

/// Copies of a GEMM's weight operand (`weight_bytes` each) that the timing rotates through, so
/// that no repetition finds its weights in cache, as a training step does not (each layer's
/// weights were evicted by the other layers' since their last use); the activations and the
/// output stay in cache, as when the previous operator has just written them. Together the
/// copies span the last-level cache the C library reports, within 32 to 128 MiB (a larger one
/// is a whole socket's, shared by many cores), or 64 MiB when it reports none; at most 4096.
size_t weight_copies(double weight_bytes) {
  constexpr double kMiB = 1 << 20;
  const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  const double span =
      llc > 0 ? std::clamp(static_cast<double>(llc), 32 * kMiB, 128 * kMiB) : 64 * kMiB;
  return static_cast<size_t>(std::clamp(std::ceil(span / weight_bytes), 1.0, 4096.0));
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string shape_text(int64_t a, int64_t b, int64_t c) {
  return std::to_string(a) + "x" + std::to_string(b) + "x" + std::to_string(c);
}

/// Uniform values in [-1, 1] from a splitmix64 stream: fast enough for GiB-sized buffers, and
/// the same numbers on every run.
void fill_uniform(float* p, int64_t n, uint64_t seed) {
  uint64_t x = seed;
  for (int64_t i = 0; i < n; ++i) {
    x += 0x9e3779b97f4a7c15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    p[i] = static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f;  // 24 random bits
  }
}

/// The "model name" of /proc/cpuinfo, or "cpu" where there is none (non-x86, no procfs).
std::string read_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) break;
    const auto start = line.find_first_not_of(" \t", colon + 1);
    if (start == std::string::npos) break;
    return line.substr(start);
  }
  return "cpu";
}

/// MemTotal of /proc/meminfo in GiB, or 0 where it cannot be read.
double read_mem_total_gib() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  double kib = 0;
  while (in >> key >> kib >> unit) {
    if (key == "MemTotal:") return kib / (1024.0 * 1024.0);
  }
  return 0;
}

/// Runs a benchmark body, turning the exceptions of allocation (and Eigen) into a diagnostic.
template <typename Body>
Result<Stats> guarded(const std::string& what, Body&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Diagnostic{what, "out of memory allocating the benchmark's buffers", "smaller shapes"};
  } catch (const std::exception& e) {
    return Diagnostic{what, std::string("failed: ") + e.what(), ""};
  }
}

class CpuBackend final : public ComputeBackend {
 public:
  CpuBackend()
      : device_(read_cpu_model()),
        processors_(static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)))) {
    // The node's memory over its cores: one rank per core is the model, and how many ranks
    // really share the node is not known here. 0 when /proc/meminfo cannot be read.
    memory_gib_ = read_mem_total_gib() / processors_;
  }

  std::string name() const override { return "cpu-eigen"; }
  std::string device() const override { return device_; }
  std::string runtime() const override {
    std::string r = "Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." +
                    std::to_string(EIGEN_MAJOR_VERSION) + "." + std::to_string(EIGEN_MINOR_VERSION);
#if defined(__clang__)
    r += ", Clang " __clang_version__;
#elif defined(__GNUC__)
    r += ", GCC " + std::to_string(__GNUC__) + "." + std::to_string(__GNUC_MINOR__);
#endif
#if defined(__AVX512F__)
    r += ", AVX-512";
#elif defined(__AVX2__)
    r += ", AVX2";
#endif
    return r;
  }
  /// MemTotal / hardware threads: a rank's share when one rank runs per core.
  double memory_gib() const override { return memory_gib_; }
  int activation_bytes() const override { return 4; }
  /// The online cores, as `execute` counts them when it compares.
  int host_processors() const override { return processors_; }
  std::vector<Precision> gemm_precisions() const override {
    return {Precision::kFp32, Precision::kBf16};
  }

  Result<Stats> gemm(int64_t m, int64_t n, int64_t k, Precision p,
                     const TimingPolicy& policy) override;
  Result<Stats> memory_kernel(MemoryKernel kernel, int64_t rows, int64_t cols,
                              const TimingPolicy& policy) override;
  /// FLOPs of one call (what the suite divides by): forward 2 * bh * seq^2 * 2d * 0.5 (QK^T and
  /// PV over the causal half), backward 2.5x that (cpu_kernels.h).
  Result<Stats> attention(int64_t batch_heads, int64_t seq, int64_t head_dim, bool backward,
                          const TimingPolicy& policy) override;

 private:
  /// A diagnostic when `bytes` of buffers exceed kMaxMemoryShare of this rank's memory.
  std::optional<Diagnostic> check_footprint(const std::string& what, double bytes) const;
  void prepare_gemm(int64_t m, int64_t n, int64_t k, Precision p);
  void prepare_memory(MemoryKernel kernel, int64_t rows, int64_t cols);
  void prepare_attention(int64_t batch_heads, int64_t seq, int64_t head_dim);
  void run_attention(bool backward);
  /// Reads one output element, so no compiler may drop the work that produced it.
  void keep(float v) { sink_ = sink_ + v; }

  std::string device_;
  int processors_ = 1;  ///< online cores
  double memory_gib_ = 0;
  volatile float sink_ = 0;

  // GEMM operands of the last shape (fp32 or bf16; the other precision's are empty), row-major,
  // C = A B^T: activations (m x k) times a weight stored out x in (n x k), as nn.Linear and the
  // executor multiply; weight_copies() copies of B, each repetition on the next.
  cpu::RowMatrix a_, c_;
  BfRowMatrix a16_, c16_;
  // The copies of B, back to back in one buffer kept from shape to shape (so that each shape
  // only copies into pages already mapped).
  std::vector<float> weights_;
  size_t weight_floats_ = 0;  // floats from one copy to the next
  size_t copies_ = 0, next_b_ = 0;
  std::optional<std::tuple<int64_t, int64_t, int64_t, Precision>> gemm_shape_;

  // Memory kernels: x0, x1 (second input of triad and swiglu), y, w (rmsnorm weight).
  std::vector<float> x0_, x1_, y_, w_;
  std::optional<std::tuple<MemoryKernel, int64_t, int64_t>> memory_shape_;

  // Attention tensors of all heads, head after head; O and lse from one untimed forward.
  std::vector<float> q_, k_, v_, o_, lse_, do_, dq_, dk_, dv_;
  std::optional<std::tuple<int64_t, int64_t, int64_t>> attention_shape_;
};

std::optional<Diagnostic> CpuBackend::check_footprint(const std::string& what, double bytes) const {
  const double limit = kMaxMemoryShare * memory_gib_ * (1ull << 30);
  if (memory_gib_ <= 0 || bytes <= limit) return std::nullopt;
  return Diagnostic{what,
                    "buffers of " + std::to_string(bytes / (1ull << 30)) +
                        " GiB exceed a quarter of this rank's memory (" +
                        std::to_string(memory_gib_) + " GiB, MemTotal over the cores)",
                    "use smaller shapes"};
}

void CpuBackend::prepare_gemm(int64_t m, int64_t n, int64_t k, Precision p) {
  const auto shape = std::make_tuple(m, n, k, p);
  if (gemm_shape_ == shape) return;
  gemm_shape_.reset();
  cpu::RowMatrix a(m, k), b(n, k);
  fill_uniform(a.data(), m * k, 0x5eed01);
  fill_uniform(b.data(), n * k, 0x5eed02);
  const bool bf16 = p == Precision::kBf16;
  weight_floats_ = static_cast<size_t>(n * k) / (bf16 ? 2 : 1) + 1;
  copies_ = weight_copies(static_cast<double>(n * k) * (bf16 ? 2 : 4));
  if (weights_.size() < copies_ * weight_floats_) weights_.resize(copies_ * weight_floats_);
  if (bf16) {
    a16_ = a.cast<Eigen::bfloat16>();
    c16_.resize(m, n);
    const BfRowMatrix b16 = b.cast<Eigen::bfloat16>();
    for (size_t i = 0; i < copies_; ++i)
      std::memcpy(weights_.data() + i * weight_floats_, b16.data(), b16.size() * 2);
    a_.resize(0, 0);
    c_.resize(0, 0);
  } else {
    a_ = std::move(a);
    c_.resize(m, n);
    for (size_t i = 0; i < copies_; ++i)
      std::memcpy(weights_.data() + i * weight_floats_, b.data(), b.size() * 4);
    a16_.resize(0, 0);
    c16_.resize(0, 0);
  }
  next_b_ = 0;
  gemm_shape_ = shape;
}

Result<Stats> CpuBackend::gemm(int64_t m, int64_t n, int64_t k, Precision p,
                               const TimingPolicy& policy) {
  const std::string what = "gemm " + shape_text(m, n, k) + " " + to_string(p);
  if (m < 1 || n < 1 || k < 1) {
    return Diagnostic{what, "m, n and k must be positive", ""};
  }
  if (p != Precision::kFp32 && p != Precision::kBf16) {
    return Diagnostic{what, std::string("the cpu backend has no ") + to_string(p) + " GEMM",
                      "precisions: fp32, bf16"};
  }
  const double element_bytes = p == Precision::kFp32 ? 4 : 2;
  const double elements = static_cast<double>(m) * static_cast<double>(k) +
                          static_cast<double>(k) * static_cast<double>(n) +
                          static_cast<double>(m) * static_cast<double>(n);
  const double weight_bytes = static_cast<double>(n) * static_cast<double>(k) * element_bytes;
  if (auto d = check_footprint(
          what, elements * element_bytes +
                    weight_bytes * static_cast<double>(weight_copies(weight_bytes) - 1)))
    return *d;
  return guarded(what, [&]() -> Result<Stats> {
    prepare_gemm(m, n, k, p);
    const bool bf16 = p == Precision::kBf16;
    auto once = [&]() -> double {
      const float* w = weights_.data() + next_b_ * weight_floats_;
      next_b_ = (next_b_ + 1) % copies_;
      const auto t0 = Clock::now();
      if (bf16) {
        const Eigen::Map<const BfRowMatrix> b16(reinterpret_cast<const Eigen::bfloat16*>(w), n, k);
        c16_.noalias() = a16_ * b16.transpose();
      } else {
        const Eigen::Map<const cpu::RowMatrix> b(w, n, k);
        c_.noalias() = a_ * b.transpose();
      }
      const double t = seconds_since(t0);
      keep(bf16 ? static_cast<float>(c16_(0, 0)) : c_(0, 0));
      return t;
    };
    return time_repeated(once, policy, what);
  });
}

void CpuBackend::prepare_memory(MemoryKernel kernel, int64_t rows, int64_t cols) {
  const auto shape = std::make_tuple(kernel, rows, cols);
  if (memory_shape_ == shape) return;
  memory_shape_.reset();
  const auto n = static_cast<size_t>(rows * cols);
  const bool two_inputs = kernel == MemoryKernel::kTriad || kernel == MemoryKernel::kSwiglu;
  x0_.resize(n);
  y_.resize(n);
  fill_uniform(x0_.data(), rows * cols, 0x5eed10);
  x1_.resize(two_inputs ? n : 0);
  x1_.shrink_to_fit();
  if (two_inputs) fill_uniform(x1_.data(), rows * cols, 0x5eed11);
  w_.resize(kernel == MemoryKernel::kRmsNorm ? static_cast<size_t>(cols) : 0);
  if (!w_.empty()) fill_uniform(w_.data(), cols, 0x5eed12);
  memory_shape_ = shape;
}

Result<Stats> CpuBackend::memory_kernel(MemoryKernel kernel, int64_t rows, int64_t cols,
                                        const TimingPolicy& policy) {
  const std::string what = std::string("memory ") + to_string(kernel) + " " + std::to_string(rows) +
                           "x" + std::to_string(cols);
  if (rows < 1 || cols < 1) {
    return Diagnostic{what, "rows and cols must be positive", ""};
  }
  // x0, y and possibly x1, all fp32.
  const double buffer_bytes = 3.0 * static_cast<double>(rows) * static_cast<double>(cols) * 4;
  if (auto d = check_footprint(what, buffer_bytes)) return *d;
  return guarded(what, [&]() -> Result<Stats> {
    prepare_memory(kernel, rows, cols);
    const int64_t n = rows * cols;
    auto once = [&]() -> double {
      const auto t0 = Clock::now();
      switch (kernel) {
        case MemoryKernel::kCopy:
          cpu::copy_kernel(x0_.data(), y_.data(), n);
          break;
        case MemoryKernel::kTriad:
          cpu::triad_kernel(x0_.data(), x1_.data(), kTriadScale, y_.data(), n);
          break;
        case MemoryKernel::kRmsNorm:
          cpu::rmsnorm_kernel(x0_.data(), w_.data(), y_.data(), rows, cols);
          break;
        case MemoryKernel::kSwiglu:
          cpu::swiglu_kernel(x0_.data(), x1_.data(), y_.data(), n);
          break;
        case MemoryKernel::kSoftmax:
          cpu::softmax_kernel(x0_.data(), y_.data(), rows, cols);
          break;
      }
      const double t = seconds_since(t0);
      keep(y_[static_cast<size_t>(n - 1)]);
      return t;
    };
    return time_repeated(once, policy, what);
  });
}

void CpuBackend::prepare_attention(int64_t batch_heads, int64_t seq, int64_t head_dim) {
  const auto shape = std::make_tuple(batch_heads, seq, head_dim);
  if (attention_shape_ == shape) return;
  attention_shape_.reset();
  const int64_t n = batch_heads * seq * head_dim;
  for (std::vector<float>* t : {&q_, &k_, &v_, &o_, &do_, &dq_, &dk_, &dv_}) {
    t->resize(static_cast<size_t>(n));
  }
  lse_.resize(static_cast<size_t>(batch_heads * seq));
  fill_uniform(q_.data(), n, 0x5eed20);
  fill_uniform(k_.data(), n, 0x5eed21);
  fill_uniform(v_.data(), n, 0x5eed22);
  fill_uniform(do_.data(), n, 0x5eed23);
  attention_shape_ = shape;
  run_attention(false);  // the backward reads O and lse: one forward makes them real
}

void CpuBackend::run_attention(bool backward) {
  // One sequence of `batch_heads` heads, each its own key-value head, as the executor lays it
  // out: rows are tokens, columns heads x head_dim.
  const auto [batch_heads, seq, head_dim] = *attention_shape_;
  exec::ops::AttentionShape s;
  s.batch = 1;
  s.seq = seq;
  s.heads = s.kv_heads = batch_heads;
  s.head_dim = head_dim;
  using Map = Eigen::Map<exec::ops::RowMatrix<float>>;
  const int64_t cols = batch_heads * head_dim;
  const Map q(q_.data(), seq, cols), k(k_.data(), seq, cols), v(v_.data(), seq, cols),
      d_o(do_.data(), seq, cols);
  Map o(o_.data(), seq, cols);
  if (backward) {
    // The executor's backward adds into its gradients (and zeroes them when a pass begins).
    Map dq(dq_.data(), seq, cols), dk(dk_.data(), seq, cols), dv(dv_.data(), seq, cols);
    dq.setZero();
    dk.setZero();
    dv.setZero();
    exec::ops::attention_backward<float>(s, q, k, v, o, lse_, d_o, dq, dk, dv);
  } else {
    exec::ops::attention_forward<float>(s, q, k, v, o, lse_);
  }
}

Result<Stats> CpuBackend::attention(int64_t batch_heads, int64_t seq, int64_t head_dim,
                                    bool backward, const TimingPolicy& policy) {
  const std::string what = std::string("attention ") + (backward ? "backward " : "forward ") +
                           shape_text(batch_heads, seq, head_dim);
  if (batch_heads < 1 || seq < 1 || head_dim < 1) {
    return Diagnostic{what, "batch_heads, seq and head_dim must be positive", ""};
  }
  // Eight bh x seq x d tensors (Q, K, V, O, dO, dQ, dK, dV), all fp32.
  const double elements =
      static_cast<double>(batch_heads) * static_cast<double>(seq) * static_cast<double>(head_dim);
  if (auto d = check_footprint(what, 8 * elements * 4)) return *d;
  return guarded(what, [&]() -> Result<Stats> {
    prepare_attention(batch_heads, seq, head_dim);
    auto once = [&]() -> double {
      const auto t0 = Clock::now();
      run_attention(backward);
      const double t = seconds_since(t0);
      keep(backward ? dq_.back() : o_.back());
      return t;
    };
    return time_repeated(once, policy, what);
  });
}

}  // namespace

std::unique_ptr<ComputeBackend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace parallax::calibrate
