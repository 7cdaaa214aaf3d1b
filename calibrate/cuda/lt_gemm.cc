#include "calibrate/cuda/lt_gemm.h"

#include <string>

#include "calibrate/cuda/cuda_logic.h"
#include "calibrate/cuda/cuda_status.h"
#include "calibrate/cuda/kernels.h"

namespace parallax::calibrate::gpu {
namespace {

constexpr uint64_t kSeedA = 0x5eed0a, kSeedB = 0x5eed0b;
// Inputs uniform in [-1, 1]: well inside E4M3's range, and sums over k stay far from bf16's.
constexpr float kFillScale = 1.0f;

Diagnostics fill(void* data, int64_t n, Precision p, uint64_t seed, int sm_count,
                 cudaStream_t stream) {
  const Launch1d launch = grid_stride_launch(n, sm_count);
  if (p == Precision::kFp8) {
    PX_CUDA_TRY(launch_fill_fp8_e4m3(data, n, seed, kFillScale, launch, stream));
  } else {
    PX_CUDA_TRY(launch_fill_bf16(static_cast<bf16*>(data), n, seed, kFillScale, launch, stream));
  }
  return {};
}

template <typename T>
cublasStatus_t set_attribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                             const T& value) {
  return cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof value);
}

}  // namespace

Result<std::unique_ptr<LtGemm>> LtGemm::create(int sm_count) {
  std::unique_ptr<LtGemm> gemm(new LtGemm(sm_count));
  PX_CUBLAS_TRY(cublasLtCreate(&gemm->handle_));
  PX_DIAG_TRY(gemm->workspace_.allocate(kLtWorkspaceBytes, "cuBLASLt workspace"));
  return gemm;
}

LtGemm::~LtGemm() {
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

Diagnostics LtGemm::allocate_inputs(const Shape& s, cudaStream_t stream) {
  const int64_t in_bytes = gemm_input_bytes(s.p);
  PX_DIAG_TRY(a_.allocate(static_cast<std::size_t>(s.m * s.k * in_bytes), "gemm A"));
  PX_DIAG_TRY(b_.allocate(static_cast<std::size_t>(s.k * s.n * in_bytes), "gemm B"));
  PX_DIAG_TRY(d_.allocate(static_cast<std::size_t>(s.m * s.n * 2), "gemm D"));
  PX_DIAG_TRY(fill(a_.as<void>(), s.m * s.k, s.p, kSeedA, sm_count_, stream));
  PX_DIAG_TRY(fill(b_.as<void>(), s.k * s.n, s.p, kSeedB, sm_count_, stream));
  if (s.p == Precision::kFp8 && scales_.bytes() == 0) {
    const float ones[2] = {1.0f, 1.0f};  // the dequantisation scales of A and B
    PX_DIAG_TRY(scales_.allocate(sizeof ones, "fp8 scales"));
    PX_CUDA_TRY(cudaMemcpy(scales_.as<void>(), ones, sizeof ones, cudaMemcpyHostToDevice));
  }
  return {};
}

Diagnostics LtGemm::describe(const Shape& s) {
  const GemmLayout l = gemm_layout(s.m, s.n, s.k);
  const bool fp8 = s.p == Precision::kFp8;
  const cudaDataType_t in_type = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;

  cublasLtMatmulDesc_t op = nullptr;
  PX_CUBLAS_TRY(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  op_.reset(op);
  const cublasOperation_t trans_a = l.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t trans_b = l.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  PX_CUBLAS_TRY(set_attribute(op, CUBLASLT_MATMUL_DESC_TRANSA, trans_a));
  PX_CUBLAS_TRY(set_attribute(op, CUBLASLT_MATMUL_DESC_TRANSB, trans_b));
  if (fp8) {
    const void* scale_a = scales_.as<float>();
    const void* scale_b = scales_.as<float>() + 1;
    PX_CUBLAS_TRY(set_attribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, scale_a));
    PX_CUBLAS_TRY(set_attribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, scale_b));
  }

  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  PX_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&a, in_type, l.a_rows, l.a_cols, l.lda));
  a_layout_.reset(a);
  PX_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&b, in_type, l.b_rows, l.b_cols, l.ldb));
  b_layout_.reset(b);
  PX_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&d, CUDA_R_16BF, l.d_rows, l.d_cols, l.ldd));
  d_layout_.reset(d);

  cublasLtMatmulPreference_t pref_raw = nullptr;
  PX_CUBLAS_TRY(cublasLtMatmulPreferenceCreate(&pref_raw));
  const LtPtr<cublasLtMatmulPreferenceOpaque_t> pref(pref_raw);
  const uint64_t workspace = workspace_.bytes();
  PX_CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(
      pref_raw, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace));

  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  PX_CUBLAS_TRY(
      cublasLtMatmulAlgoGetHeuristic(handle_, op, a, b, d, d, pref_raw, 1, &result, &found));
  if (found == 0) {
    return {Diagnostic{"cublasLt",
                       "no algorithm for " + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
                           std::to_string(s.k) + " in " + to_string(s.p),
                       "try another shape or precision"}};
  }
  algo_ = result.algo;
  return {};
}

Diagnostics LtGemm::prepare(int64_t m, int64_t n, int64_t k, Precision p, cudaStream_t stream) {
  const Shape shape{m, n, k, p};
  if (prepared_ == shape) return {};
  prepared_.reset();
  PX_DIAG_TRY(allocate_inputs(shape, stream));
  PX_DIAG_TRY(describe(shape));
  prepared_ = shape;
  return {};
}

Diagnostics LtGemm::enqueue(cudaStream_t stream) {
  const float alpha = 1.0f, beta = 0.0f;
  PX_CUBLAS_TRY(cublasLtMatmul(handle_, op_.get(), &alpha, a_.as<void>(), a_layout_.get(),
                               b_.as<void>(), b_layout_.get(), &beta, d_.as<void>(),
                               d_layout_.get(), d_.as<void>(), d_layout_.get(), &algo_,
                               workspace_.as<void>(), workspace_.bytes(), stream));
  return {};
}

}  // namespace parallax::calibrate::gpu
