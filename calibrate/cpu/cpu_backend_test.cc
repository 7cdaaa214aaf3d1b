#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "calibrate/backend.h"
#include "calibrate/cpu/cpu_kernels.h"

namespace parallax::calibrate {
namespace {

using Vec = std::vector<double>;

std::vector<float> uniform(int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

/// max |got - want| / max |want|: the error relative to the tensor's scale, so entries that
/// happen to be near zero do not dominate.
double rel_error(const std::vector<float>& got, const Vec& want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return err / scale;
}

void expect_sane(const Result<Stats>& r) {
  ASSERT_TRUE(r.ok()) << r.error_text();
  EXPECT_GE(r->reps, quick_policy().min_reps);
  EXPECT_GT(r->min_s, 0);
  EXPECT_TRUE(std::isfinite(r->max_s));
  EXPECT_LE(r->min_s, r->median_s);
  EXPECT_LE(r->median_s, r->max_s);
}

void expect_error(const Result<Stats>& r, const std::string& substring) {
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error_text().find(substring), std::string::npos) << r.error_text();
}

TEST(MemoryKernelBytes, CountsReadsAndWrites) {
  // rows x cols = 3 x 5 = 15 elements of 2 bytes: copy, rmsnorm and softmax read 1 and write 1
  // (60 B); triad and swiglu read 2 and write 1 (90 B).
  EXPECT_DOUBLE_EQ(memory_kernel_bytes(MemoryKernel::kCopy, 3, 5, 2), 60);
  EXPECT_DOUBLE_EQ(memory_kernel_bytes(MemoryKernel::kRmsNorm, 3, 5, 2), 60);
  EXPECT_DOUBLE_EQ(memory_kernel_bytes(MemoryKernel::kSoftmax, 3, 5, 2), 60);
  EXPECT_DOUBLE_EQ(memory_kernel_bytes(MemoryKernel::kTriad, 3, 5, 2), 90);
  EXPECT_DOUBLE_EQ(memory_kernel_bytes(MemoryKernel::kSwiglu, 3, 5, 2), 90);
  // No int overflow: 2^20 x 2^14 fp32, copied, is 2 * 2^34 * 4 = 2^37 bytes.
  EXPECT_DOUBLE_EQ(memory_kernel_bytes(MemoryKernel::kCopy, 1 << 20, 1 << 14, 4), 0x1p37);
}

TEST(MemoryKernelBytes, Names) {
  EXPECT_STREQ(to_string(MemoryKernel::kCopy), "copy");
  EXPECT_STREQ(to_string(MemoryKernel::kTriad), "triad");
  EXPECT_STREQ(to_string(MemoryKernel::kRmsNorm), "rmsnorm");
  EXPECT_STREQ(to_string(MemoryKernel::kSwiglu), "swiglu");
  EXPECT_STREQ(to_string(MemoryKernel::kSoftmax), "softmax");
  for (MemoryKernel k : {MemoryKernel::kCopy, MemoryKernel::kTriad, MemoryKernel::kRmsNorm,
                         MemoryKernel::kSwiglu, MemoryKernel::kSoftmax})
    EXPECT_EQ(parse_memory_kernel(to_string(k)), k);
  EXPECT_FALSE(parse_memory_kernel("gelu"));
}

TEST(CpuBackend, DescribesItself) {
  const auto cpu = make_cpu_backend();
  EXPECT_EQ(cpu->name(), "cpu-eigen");
  EXPECT_FALSE(cpu->device().empty());
  EXPECT_EQ(cpu->activation_bytes(), 4);
  EXPECT_EQ(cpu->gemm_precisions(), (std::vector<Precision>{Precision::kFp32, Precision::kBf16}));
  EXPECT_GT(cpu->memory_gib(), 0);  // /proc/meminfo exists where the tests run (Linux)
}

TEST(CpuBackend, Fp32GemmIsTimedAndPlausible) {
  const auto cpu = make_cpu_backend();
  const int64_t m = 128, n = 96, k = 64;
  const Result<Stats> r = cpu->gemm(m, n, k, Precision::kFp32, quick_policy());
  expect_sane(r);
  // 2 m n k FLOPs; any core of the last twenty years does far more than 0.1 GFLOP/s.
  EXPECT_GT(2.0 * m * n * k / r->median_s, 0.1e9);
}

TEST(CpuBackend, Bf16GemmRuns) {
  const auto cpu = make_cpu_backend();
  expect_sane(cpu->gemm(64, 48, 32, Precision::kBf16, quick_policy()));
  // Back to fp32 on a new shape: the cached buffers are replaced, not reused.
  expect_sane(cpu->gemm(32, 16, 8, Precision::kFp32, quick_policy()));
}

TEST(CpuBackend, GemmRejectsFp8EmptyAndHugeShapes) {
  const auto cpu = make_cpu_backend();
  expect_error(cpu->gemm(64, 64, 64, Precision::kFp8, quick_policy()), "no fp8 GEMM");
  expect_error(cpu->gemm(0, 64, 64, Precision::kFp32, quick_policy()), "must be positive");
  expect_error(cpu->gemm(64, 64, -1, Precision::kBf16, quick_policy()), "must be positive");
  // 3 * 2^40 fp32 elements: refused before anything is allocated.
  expect_error(cpu->gemm(1 << 20, 1 << 20, 1 << 20, Precision::kFp32, quick_policy()),
               "exceed a quarter");
}

TEST(CpuMemoryKernels, EachKernelRuns) {
  const auto cpu = make_cpu_backend();
  for (MemoryKernel k : {MemoryKernel::kCopy, MemoryKernel::kTriad, MemoryKernel::kRmsNorm,
                         MemoryKernel::kSwiglu, MemoryKernel::kSoftmax}) {
    SCOPED_TRACE(to_string(k));
    expect_sane(cpu->memory_kernel(k, 64, 256, quick_policy()));
  }
}

TEST(CpuMemoryKernels, RejectsEmptyAndHugeSizes) {
  const auto cpu = make_cpu_backend();
  expect_error(cpu->memory_kernel(MemoryKernel::kCopy, 0, 256, quick_policy()), "positive");
  expect_error(cpu->memory_kernel(MemoryKernel::kSoftmax, 16, -4, quick_policy()), "positive");
  expect_error(cpu->memory_kernel(MemoryKernel::kTriad, 1 << 20, 1 << 20, quick_policy()),
               "exceed a quarter");
}

TEST(CpuMemoryKernels, ComputeWhatTheyName) {
  const int64_t rows = 3, cols = 37, n = rows * cols;
  const std::vector<float> x = uniform(n, 1), u = uniform(n, 2), w = uniform(cols, 3);
  std::vector<float> y(static_cast<size_t>(n));
  Vec want(static_cast<size_t>(n));

  cpu::copy_kernel(x.data(), y.data(), n);
  EXPECT_EQ(y, x);

  cpu::triad_kernel(x.data(), u.data(), 3.0f, y.data(), n);
  for (int64_t i = 0; i < n; ++i) want[i] = x[i] + 3.0 * u[i];
  EXPECT_LT(rel_error(y, want), 1e-6);

  cpu::swiglu_kernel(x.data(), u.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i) want[i] = x[i] / (1 + std::exp(-double{x[i]})) * u[i];
  EXPECT_LT(rel_error(y, want), 1e-5);

  // rmsnorm: y = x / sqrt(mean(x^2) + eps) * w, per row.
  cpu::rmsnorm_kernel(x.data(), w.data(), y.data(), rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    double ms = 0;
    for (int64_t c = 0; c < cols; ++c) ms += double{x[r * cols + c]} * x[r * cols + c] / cols;
    for (int64_t c = 0; c < cols; ++c) {
      want[r * cols + c] = x[r * cols + c] / std::sqrt(ms + cpu::kRmsNormEps) * w[c];
    }
  }
  EXPECT_LT(rel_error(y, want), 1e-5);

  // softmax: exp(x - max) / sum, per row (each row sums to 1).
  cpu::softmax_kernel(x.data(), y.data(), rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(double{x[r * cols + c]});
    for (int64_t c = 0; c < cols; ++c) want[r * cols + c] = std::exp(double{x[r * cols + c]}) / sum;
  }
  EXPECT_LT(rel_error(y, want), 1e-5);
}

TEST(CpuAttention, BackendTimesBothPassesAndRejectsEmptyShapes) {
  const auto cpu = make_cpu_backend();
  expect_sane(cpu->attention(2, 96, 32, false, quick_policy()));
  expect_sane(cpu->attention(2, 96, 32, true, quick_policy()));
  expect_error(cpu->attention(2, 0, 32, false, quick_policy()), "must be positive");
  expect_error(cpu->attention(2, 96, 0, true, quick_policy()), "must be positive");
}

TEST(SingleCommunicator, RefusesCollectives) {
  const auto single = make_single_communicator();
  EXPECT_EQ(single->name(), "single");
  EXPECT_EQ(single->rank(), 0);
  EXPECT_EQ(single->size(), 1);
  EXPECT_EQ(single->local_size(), 1);
  expect_error(single->collective(CollectiveOp::kAllReduce, 1 << 20, quick_policy()),
               "no collectives with one rank");
  EXPECT_EQ(single->max_over_ranks(3.5), 3.5);
}

}  // namespace
}  // namespace parallax::calibrate
