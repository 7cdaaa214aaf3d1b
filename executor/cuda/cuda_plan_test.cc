// The CUDA backend's host-side decisions (cuda_plan.h), tested without a GPU: the cuBLAS
// arguments of row-major GEMMs (checked by running them through a reference column-major GEMM),
// the decay mask, the shapes it refuses, the step arena and launch shapes.

#include "executor/cuda/cuda_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "executor/cuda/cuda_test_shape.h"

namespace parallax::exec::gpu {
namespace {

/// Column-major C = op(X) op(Y) + beta C with the BLAS conventions (what cublasSgemm computes).
void reference_colmajor_gemm(bool tx, bool ty, int m, int n, int k, const std::vector<float>& x,
                             int ldx, const std::vector<float>& y, int ldy, float beta,
                             std::vector<float>& c, int ldc) {
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      float acc = 0;
      for (int p = 0; p < k; ++p) {
        const float xv =
            tx ? x[static_cast<size_t>(p + i * ldx)] : x[static_cast<size_t>(i + p * ldx)];
        const float yv =
            ty ? y[static_cast<size_t>(j + p * ldy)] : y[static_cast<size_t>(p + j * ldy)];
        acc += xv * yv;
      }
      c[static_cast<size_t>(i + j * ldc)] = acc + beta * c[static_cast<size_t>(i + j * ldc)];
    }
}

/// Row-major op(A)[m x k] op(B)[k x n] computed naively, A stored m x k or k x m, B k x n or n x k.
std::vector<float> rowmajor_product(int m, int n, int k, bool ta, bool tb,
                                    const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> c(static_cast<size_t>(m * n), 0.0f);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float acc = 0;
      for (int p = 0; p < k; ++p)
        acc += (ta ? a[static_cast<size_t>(p * m + i)] : a[static_cast<size_t>(i * k + p)]) *
               (tb ? b[static_cast<size_t>(j * k + p)] : b[static_cast<size_t>(p * n + j)]);
      c[static_cast<size_t>(i * n + j)] = acc;
    }
  return c;
}

TEST(CudaGemmArgs, PlainProductSwapsOperandsAndSizes) {
  // Row-major C[3 x 5] = A[3 x 4] B[4 x 5]: cuBLAS computes C^T[5 x 3] = B^T A^T, B first.
  const GemmArgs g = gemm_args(3, 5, 4, false, false);
  EXPECT_FALSE(g.transpose_first);
  EXPECT_FALSE(g.transpose_second);
  EXPECT_EQ(g.m, 5);
  EXPECT_EQ(g.n, 3);
  EXPECT_EQ(g.k, 4);
  EXPECT_EQ(g.ld_first, 5);   // B is 4 x 5 row-major
  EXPECT_EQ(g.ld_second, 4);  // A is 3 x 4 row-major
  EXPECT_EQ(g.ldc, 5);
}

TEST(CudaGemmArgs, TransposedOperandsKeepTheirStoredWidth) {
  // x^T dz (a weight gradient): A stored k x m = 7 x 3, B stored k x n = 7 x 5.
  const GemmArgs wg = gemm_args(3, 5, 7, true, false);
  EXPECT_TRUE(wg.transpose_second);
  EXPECT_EQ(wg.ld_second, 3);
  EXPECT_EQ(wg.ld_first, 5);
  // dz W^T (an input gradient): B stored n x k = 5 x 7.
  const GemmArgs ig = gemm_args(3, 5, 7, false, true);
  EXPECT_TRUE(ig.transpose_first);
  EXPECT_EQ(ig.ld_first, 7);
  EXPECT_EQ(ig.ld_second, 7);
}

TEST(CudaGemmArgs, ColumnMajorGemmWithTheseArgumentsGivesTheRowMajorProduct) {
  const int m = 3, n = 5, k = 4;
  for (const auto& [ta, tb] : {std::pair{false, false}, std::pair{true, false},
                               std::pair{false, true}, std::pair{true, true}}) {
    std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7) - 3.0f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 5) % 11) - 5.0f;
    const std::vector<float> want = rowmajor_product(m, n, k, ta, tb, a, b);
    const GemmArgs g = gemm_args(m, n, k, ta, tb);
    std::vector<float> c(static_cast<size_t>(m * n), 1.0f);
    reference_colmajor_gemm(g.transpose_first, g.transpose_second, g.m, g.n, g.k, b, g.ld_first, a,
                            g.ld_second, 0.0f, c, g.ldc);
    EXPECT_EQ(c, want) << "trans_a=" << ta << " trans_b=" << tb;
    // beta = 1 accumulates into the row-major C.
    reference_colmajor_gemm(g.transpose_first, g.transpose_second, g.m, g.n, g.k, b, g.ld_first, a,
                            g.ld_second, 1.0f, c, g.ldc);
    for (size_t i = 0; i < c.size(); ++i) EXPECT_EQ(c[i], 2 * want[i]);
  }
}

TEST(CudaDecayMask, NormWeightsAreNotDecayed) {
  ModelShape s;
  s.layers = 1;
  s.hidden = 8;
  s.heads = 2;
  s.kv_heads = 1;
  s.head_dim = 4;
  s.ffn_hidden = 16;
  s.vocab = 11;
  const Transformer<float> model(s);
  const std::vector<uint8_t> mask = decay_mask(model.layout(), model.num_params());
  ASSERT_EQ(static_cast<int64_t>(mask.size()), model.num_params());
  int64_t kept = 0;
  for (const TensorSlot& t : model.layout()) {
    const bool norm = t.name.ends_with("norm");
    for (int64_t i = t.offset; i < t.offset + t.size(); ++i)
      EXPECT_EQ(mask[static_cast<size_t>(i)], norm ? 0 : 1) << t.name;
    if (norm) kept += t.size();
  }
  // attn_norm, mlp_norm and final_norm: 3 x hidden values undecayed.
  EXPECT_EQ(kept, 3 * s.hidden);
  EXPECT_EQ(std::count(mask.begin(), mask.end(), 0), 3 * s.hidden);
}

TEST(CudaShapeCheck, RefusesMoeAndOddHeads) {
  const ModelShape s = cuda_test_shape(2);
  EXPECT_TRUE(check_cuda_shape(s, "model").empty());
  ModelShape moe = s;
  moe.moe.experts = 8;
  const Diagnostics d = check_cuda_shape(moe, "model");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_NE(d[0].str().find("dense models only, got experts=8"), std::string::npos);
  EXPECT_NE(d[0].str().find("--backend cpu"), std::string::npos);
  ModelShape bad = s;
  bad.kv_heads = 3;
  bad.head_dim = 15;
  EXPECT_EQ(check_cuda_shape(bad, "model").size(), 2u);  // both problems reported
}

TEST(CudaStepCheck, ReportsSizesIdsAndSharedMemory) {
  const ModelShape s = cuda_test_shape(1);
  std::vector<int32_t> ids(static_cast<size_t>(2 * 2 * 33), 1);
  EXPECT_TRUE(check_step(s, {2, 32, 2}, ids, 227 * 1024).empty());
  ids[3] = 97;
  const Diagnostics bad_id = check_step(s, {2, 32, 2}, ids, 227 * 1024);
  ASSERT_EQ(bad_id.size(), 1u);
  EXPECT_NE(bad_id[0].str().find("token 97 outside [0, 97)"), std::string::npos);
  ids[3] = 1;
  EXPECT_NE(check_step(s, {2, 32, 1}, ids, 227 * 1024)[0].str().find("want microbatches"),
            std::string::npos);
  // dK/dV blocks keep 2 seq + 2 head_dim floats: seq 8192 needs 65664 bytes.
  std::vector<int32_t> long_ids(static_cast<size_t>(8193), 1);
  EXPECT_EQ(attention_dkdv_smem(8192, 16), 65664u);
  EXPECT_TRUE(check_step(s, {1, 8192, 1}, long_ids, 227 * 1024).empty());
  EXPECT_EQ(check_step(s, {1, 8192, 1}, long_ids, 48 * 1024).size(), 1u);
  EXPECT_EQ(check_step(s, {0, 32, 1}, ids, 227 * 1024).size(), 1u);
}

TEST(CudaStepBuffers, ArenaHoldsTheCpuActivationsWithoutOverlap) {
  const ModelShape s = cuda_test_shape(2);
  const int64_t batch = 2, seq = 32, n = batch * seq;
  const StepBuffers b = plan_step_buffers(s, batch, seq);
  EXPECT_EQ(b.tokens, n);
  EXPECT_EQ(b.logit_rows, n);  // 2^21 / 97 rows would do: every row at once
  ASSERT_EQ(b.layers.size(), 2u);
  // Per layer: 2 hidden + 2 (heads + kv_heads) head_dim + 2 ffn + heads + 2 floats a token
  // = 128 + 192 + 256 + 4 + 2 = 582 (model.h's count), each buffer aligned to 256 bytes.
  const LayerBuffers& l0 = b.layers[0];
  const std::vector<std::pair<std::size_t, int64_t>> layer = {
      {l0.x_attn, n * 64}, {l0.x_mlp, n * 64}, {l0.q, n * 64},     {l0.k, n * 32},
      {l0.v, n * 32},      {l0.attn, n * 64},  {l0.gate, n * 128}, {l0.up, n * 128},
      {l0.rstd_attn, n},   {l0.rstd_mlp, n},   {l0.lse, n * 4}};
  int64_t floats = 0;
  for (const auto& [offset, count] : layer) floats += count;
  EXPECT_EQ(floats, n * 582);
  // Buffers in order, aligned, none overlapping the next.
  for (size_t i = 0; i < layer.size(); ++i) {
    EXPECT_EQ(layer[i].first % kArenaAlign, 0u);
    const std::size_t end = layer[i].first + static_cast<std::size_t>(layer[i].second) * 4;
    const std::size_t next = i + 1 < layer.size() ? layer[i + 1].first : b.layers[1].x_attn;
    EXPECT_LE(end, next);
    EXPECT_EQ(next, align_up(end));
  }
  EXPECT_GT(b.inputs, b.layers[1].lse);
  EXPECT_EQ(b.sums + kArenaAlign, b.total_bytes);  // the last buffer, 16 bytes, then aligned
  // A large vocabulary takes its logits in chunks: 2^21 / 128000 = 16 rows.
  ModelShape big = s;
  big.vocab = 128000;
  EXPECT_EQ(plan_step_buffers(big, 4, 1024).logit_rows, 16);
  EXPECT_EQ(logit_chunk_rows(8, 1 << 22), 1);
}

TEST(CudaLaunchShape, GridStrideAndPersistentSizes) {
  EXPECT_EQ(elementwise_launch(0).blocks, 1);
  EXPECT_EQ(elementwise_launch(1000).blocks, 4);  // ceil(1000 / 256)
  EXPECT_EQ(elementwise_launch(int64_t{1} << 40).blocks, kMaxElementwiseBlocks);
  EXPECT_EQ(elementwise_launch(1).threads, kElementwiseThreads);
  // 1000 parameters: 4 fp32 arrays of 4000 bytes (4096 aligned) and a 1000-byte mask (1024).
  EXPECT_EQ(persistent_bytes(1000), 4u * 4096 + 1024);
  EXPECT_EQ(align_up(0), 0u);
  EXPECT_EQ(align_up(257), 512u);
  EXPECT_EQ(attention_forward_smem(32, 16), 48u * 4);
  EXPECT_EQ(attention_dq_smem(32, 16), 48u * 4);
}

}  // namespace
}  // namespace parallax::exec::gpu
