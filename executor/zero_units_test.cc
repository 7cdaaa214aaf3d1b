#include "executor/zero_units.h"

#include <gtest/gtest.h>

#include <vector>

namespace parallax::exec {
namespace {

// Flat buffer of 12 values: dense runs [0, 3) and [7, 9), expert runs [3, 7) and [9, 12). On one
// rank the slice is every value, dense first: slice positions 0-4 hold flat 0, 1, 2, 7, 8 and
// positions 5-11 hold flat 3, 4, 5, 6, 9, 10, 11.
TEST(ExecSplitShards, OneRankSliceIsTheDenseRunsThenTheExpertRuns) {
  auto data = make_local_group(), expert_data = make_local_group();
  SplitShards s({{0, 3}, {7, 2}}, {{3, 4}, {9, 3}}, *data, *expert_data);
  ASSERT_EQ(s.size(), 12);
  const std::vector<SliceRun> runs = s.runs();
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[1].flat, 7);
  EXPECT_EQ(runs[1].at, 3);
  EXPECT_EQ(runs[2].flat, 3);
  EXPECT_EQ(runs[2].at, 5);
  // The whole buffer (ZeRO-1's step reduction): every value at its slice position.
  std::vector<float> grads(12), slice(12, 0.0f);
  for (int i = 0; i < 12; ++i) grads[i] = static_cast<float>(i);
  ASSERT_TRUE(s.reduce(grads, slice).empty());
  EXPECT_EQ(slice, (std::vector<float>{0, 1, 2, 7, 8, 3, 4, 5, 6, 9, 10, 11}));
}

// A unit's range [2, 10) reduces and gathers only its values: dense flat 2, 7, 8 (slice 2-4)
// and expert flat 3-6, 9 (slice 5-9).
TEST(ExecSplitShards, RangeCollectivesTouchOnlyTheRangesValuesAtTheirSlicePositions) {
  auto data = make_local_group(), expert_data = make_local_group();
  SplitShards s({{0, 3}, {7, 2}}, {{3, 4}, {9, 3}}, *data, *expert_data);
  std::vector<float> grads(12), slice(12, 0.5f);
  for (int i = 0; i < 12; ++i) grads[i] = static_cast<float>(i + 1);  // flat i holds i + 1
  ASSERT_TRUE(s.reduce(2, 10, grads, slice).empty());
  // Added to what the slice held (0.5): a ZeRO-2 gradient accumulates over microbatches.
  EXPECT_EQ(slice, (std::vector<float>{0.5f, 0.5f, 3.5f, 8.5f, 9.5f, 4.5f, 5.5f, 6.5f, 7.5f, 10.5f,
                                       0.5f, 0.5f}));

  std::vector<float> own(12), params(12, 0.0f);
  for (int k = 0; k < 12; ++k) own[k] = static_cast<float>(100 + k);  // slice k holds 100 + k
  ASSERT_TRUE(s.gather(2, 10, own, params).empty());
  EXPECT_EQ(params, (std::vector<float>{0, 0, 102, 105, 106, 107, 108, 103, 104, 109, 0, 0}));
}

}  // namespace
}  // namespace parallax::exec
