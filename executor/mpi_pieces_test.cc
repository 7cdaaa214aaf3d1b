#include "executor/mpi_pieces.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace parallax::exec {
namespace {

// Every block is cut into the same number of pieces, each at most about the limit over all
// ranks, and the pieces of a block add up to it, in order and without gaps.
TEST(MpiPieces, ReduceScatterPiecesCoverEveryBlockInEqualCounts) {
  const std::vector<int64_t> counts = {10, 0, 7, 3};  // 20 values
  const auto pieces = reduce_scatter_pieces(counts, 6);
  ASSERT_EQ(pieces.size(), 4u);  // ceil(20 / 6)
  for (size_t r = 0; r < counts.size(); ++r) {
    int64_t sum = 0;
    for (const auto& p : pieces) {
      ASSERT_EQ(p.size(), counts.size());
      EXPECT_GE(p[r], counts[r] / 4);
      EXPECT_LE(p[r], (counts[r] + 3) / 4);
      sum += p[r];
    }
    EXPECT_EQ(sum, counts[r]) << "rank " << r;
  }
  for (const auto& p : pieces) {
    int64_t total = 0;
    for (const int64_t v : p) total += v;
    EXPECT_LE(total, 6 + static_cast<int64_t>(counts.size()));  // rounding: a value a block
  }
  // Small enough for one call: the blocks as they are.
  const auto one = reduce_scatter_pieces(counts, 20);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0], counts);
  EXPECT_EQ(reduce_scatter_pieces(std::vector<int64_t>{0, 0}, 6).size(), 1u);
}

}  // namespace
}  // namespace parallax::exec
