#include "calibrate/cuda/cuda_logic.h"

#include <gtest/gtest.h>

#include <vector>

namespace parallax::calibrate::gpu {
namespace {

TEST(GridStrideLaunch, FillsEverySmButNoMoreThanTheItemsNeed) {
  // 132 SMs x 8 blocks = 1056 blocks of 256 threads for a large array.
  const Launch1d big = grid_stride_launch(int64_t{1} << 30, 132);
  EXPECT_EQ(big.blocks, 1056);
  EXPECT_EQ(big.threads, 256);
  // ceil(1000 / 256) = 4 blocks.
  EXPECT_EQ(grid_stride_launch(1000, 132).blocks, 4);
  EXPECT_EQ(grid_stride_launch(0, 132).blocks, 1);
}

TEST(RowBlockThreads, OneVectorPerThreadWithinBounds) {
  EXPECT_EQ(row_block_threads(4096, 8), 512);  // 512 vectors of 8
  EXPECT_EQ(row_block_threads(1000, 8), 128);  // ceil(125 / 32) * 32
  EXPECT_EQ(row_block_threads(8, 8), 32);      // at least a warp
  EXPECT_EQ(row_block_threads(int64_t{1} << 20, 8), 512);
  EXPECT_EQ(row_vector_width(4096), 8);
  EXPECT_EQ(row_vector_width(4100), 1);
}

TEST(AttentionGeometry, SharedMemoryMatchesTheLayout) {
  // 2 own arrays of (D/2) x 65 bf16 pairs + 2 fp32 tiles of 16 x D + 2 x 16 floats.
  EXPECT_EQ(attention_smem_bytes(128), 2u * 64 * 65 * 4 + 2u * 16 * 128 * 4 + 2u * 16 * 4);
  EXPECT_EQ(attention_smem_bytes(64), 2u * 32 * 65 * 4 + 2u * 16 * 64 * 4 + 2u * 16 * 4);
  // The fp32 tiles are read as float4: they must start 16-byte aligned.
  EXPECT_EQ((2u * 64 * 65 * 4) % 16, 0u);
  EXPECT_EQ(attention_row_blocks(4096), 64);
  EXPECT_EQ(attention_row_blocks(4097), 65);
}

TEST(AttentionGeometry, RejectsUnsupportedShapes) {
  EXPECT_TRUE(check_attention_shape(32, 4096, 128, "attention").empty());
  const Diagnostics bad_dim = check_attention_shape(32, 4096, 96, "attention");
  ASSERT_EQ(bad_dim.size(), 1u);
  EXPECT_NE(bad_dim[0].str().find("head_dim=96 has no kernel"), std::string::npos);
  EXPECT_NE(bad_dim[0].str().find("{64, 128}"), std::string::npos);
  EXPECT_EQ(check_attention_shape(70000, 128, 64, "attention").size(), 1u);
  EXPECT_EQ(check_attention_shape(0, 128, 64, "attention").size(), 1u);
}

TEST(GemmLayout, TnColumnMajorKeepsKContiguous) {
  const GemmLayout l = gemm_layout(1024, 512, 256);
  EXPECT_TRUE(l.transpose_a);
  EXPECT_FALSE(l.transpose_b);
  EXPECT_EQ(l.a_rows, 256);  // A stored k x m
  EXPECT_EQ(l.a_cols, 1024);
  EXPECT_EQ(l.lda, 256);
  EXPECT_EQ(l.b_rows, 256);  // B stored k x n
  EXPECT_EQ(l.b_cols, 512);
  EXPECT_EQ(l.ldb, 256);
  EXPECT_EQ(l.d_rows, 1024);  // D is m x n
  EXPECT_EQ(l.d_cols, 512);
  EXPECT_EQ(l.ldd, 1024);
}

TEST(GemmShape, Fp8NeedsMultiplesOf16) {
  EXPECT_TRUE(check_gemm_shape(4096, 4096, 4096, Precision::kFp8, "gemm").empty());
  EXPECT_TRUE(check_gemm_shape(4095, 4096, 4096, Precision::kBf16, "gemm").empty());
  const Diagnostics ds = check_gemm_shape(4095, 4096, 4096, Precision::kFp8, "gemm");
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_NE(ds[0].str().find("multiples of 16, got 4095x4096x4096"), std::string::npos);
  EXPECT_EQ(check_gemm_shape(0, 1, 1, Precision::kBf16, "gemm").size(), 1u);
  EXPECT_EQ(check_gemm_shape(16, 16, 16, Precision::kFp32, "gemm").size(), 1u);
}

TEST(CollectiveCounts, FollowNcclTestsConventions) {
  const double mib = 1 << 20;
  // all-reduce: the buffer is bytes / 2 bf16 elements, sent and received.
  const CollectiveCounts ar = collective_counts(CollectiveOp::kAllReduce, mib, 8, 2);
  EXPECT_EQ(ar.send_elems, 524288);
  EXPECT_EQ(ar.recv_elems, 524288);
  // all-gather: bytes is the output; each of 8 ranks contributes 1/8.
  const CollectiveCounts ag = collective_counts(CollectiveOp::kAllGather, mib, 8, 2);
  EXPECT_EQ(ag.send_elems, 65536);
  EXPECT_EQ(ag.recv_elems, 524288);
  // reduce-scatter: bytes is the input; each rank keeps 1/8.
  const CollectiveCounts rs = collective_counts(CollectiveOp::kReduceScatter, mib, 8, 2);
  EXPECT_EQ(rs.send_elems, 524288);
  EXPECT_EQ(rs.recv_elems, 65536);
  // all-to-all: the send buffer holds one chunk per peer.
  const CollectiveCounts a2a = collective_counts(CollectiveOp::kAllToAll, mib, 8, 2);
  EXPECT_EQ(a2a.send_elems, 524288);
  EXPECT_EQ(a2a.chunk_elems, 65536);
  // Tiny sizes still move one element per rank.
  const CollectiveCounts tiny = collective_counts(CollectiveOp::kAllGather, 2, 8, 2);
  EXPECT_EQ(tiny.send_elems, 1);
  EXPECT_EQ(tiny.recv_elems, 8);
}

TEST(SendRecvPartner, PairsEvenWithOdd) {
  EXPECT_EQ(sendrecv_partner(0, 4), 1);
  EXPECT_EQ(sendrecv_partner(1, 4), 0);
  EXPECT_EQ(sendrecv_partner(3, 4), 2);
  EXPECT_EQ(sendrecv_partner(4, 5), -1);
}

TEST(CudaGrouping, DescribedInWords) {
  EXPECT_EQ(describe_grouping({4, 1}), "groups of 4 ranks");
  EXPECT_EQ(describe_grouping({2, 8}), "groups of 2 ranks 8 apart");
}

TEST(CudaGrouping, CheckReportsEveryProblemAndAgreesWithValidGrouping) {
  EXPECT_TRUE(check_grouping({8, 1}, 8, "nccl").empty());
  EXPECT_TRUE(check_grouping({2, 4}, 16, "nccl").empty());
  // 3 x 1 does not divide 8; the hint lists the spans that do.
  const Diagnostics untiled = check_grouping({3, 1}, 8, "nccl");
  ASSERT_EQ(untiled.size(), 1u);
  EXPECT_NE(untiled[0].str().find("groups of 3 ranks span 3 ranks, which do not tile 8 ranks"),
            std::string::npos);
  EXPECT_NE(untiled[0].str().find("{2, 4, 8}"), std::string::npos);
  // One GPU: the default whole-world grouping {1, 1} has no peer.
  const Diagnostics alone = check_grouping({1, 1}, 1, "nccl");
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_NE(alone[0].str().find("at least 2 ranks, got 1"), std::string::npos);
  EXPECT_NE(alone[0].str().find("2 or more GPUs"), std::string::npos);
  EXPECT_EQ(check_grouping({0, 0}, 8, "nccl").size(), 2u);
  // Empty exactly when the grouping is valid, over a range that includes nonsense.
  for (int world = 1; world <= 16; ++world) {
    for (int size = -1; size <= 17; ++size) {
      for (int stride = -1; stride <= 17; ++stride) {
        const Grouping g{size, stride};
        EXPECT_EQ(check_grouping(g, world, "nccl").empty(), valid_grouping(g, world))
            << world << " " << size << " " << stride;
      }
    }
  }
}

TEST(CudaGrouping, MembersListEachGroupByGroupRank) {
  using Members = std::vector<std::vector<int>>;
  // The whole world is one group in rank order.
  EXPECT_EQ(grouping_members({4, 1}, 4), (Members{{0, 1, 2, 3}}));
  // Consecutive pairs (inside a node).
  EXPECT_EQ(grouping_members({2, 1}, 8), (Members{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  // One rank of each of 2 nodes of 4: ranks 4 apart.
  EXPECT_EQ(grouping_members({2, 4}, 8), (Members{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  // Two blocks of 2 x 2: color = block * stride + lane.
  EXPECT_EQ(grouping_members({2, 2}, 8), (Members{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  // Every rank appears once, at its own color and group rank.
  const Grouping g{4, 2};
  const Members m = grouping_members(g, 16);
  ASSERT_EQ(m.size(), 4u);
  for (int c = 0; c < 4; ++c) {
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(group_color(m[c][i], g), c);
      EXPECT_EQ(group_rank(m[c][i], g), i);
    }
  }
}

TEST(FormatCudaVersion, MajorDotMinor) {
  EXPECT_EQ(format_cuda_version(12040), "12.4");
  EXPECT_EQ(format_cuda_version(12080), "12.8");
  EXPECT_EQ(format_cuda_version(13000), "13.0");
}

}  // namespace
}  // namespace parallax::calibrate::gpu
