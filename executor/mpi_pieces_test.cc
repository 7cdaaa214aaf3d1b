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
  const int64_t n = piece_number(20, 6);
  ASSERT_EQ(n, 4);  // ceil(20 / 6)
  for (size_t r = 0; r < counts.size(); ++r) {
    EXPECT_EQ(piece_start(counts[r], 0, n), 0) << "rank " << r;
    int64_t sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t size = piece_start(counts[r], j + 1, n) - piece_start(counts[r], j, n);
      EXPECT_GE(size, counts[r] / 4);
      EXPECT_LE(size, (counts[r] + 3) / 4);
      sum += size;
    }
    EXPECT_EQ(sum, counts[r]) << "rank " << r;
  }
  for (int64_t j = 0; j < n; ++j) {
    int64_t total = 0;
    for (const int64_t c : counts) total += piece_start(c, j + 1, n) - piece_start(c, j, n);
    EXPECT_LE(total, 6 + static_cast<int64_t>(counts.size()));  // rounding: a value a block
  }
  // Small enough for one call: the blocks as they are.
  ASSERT_EQ(piece_number(20, 20), 1);
  for (const int64_t c : counts) EXPECT_EQ(piece_start(c, 1, 1), c);
  EXPECT_EQ(piece_number(0, 6), 1);
}

}  // namespace
}  // namespace parallax::exec
