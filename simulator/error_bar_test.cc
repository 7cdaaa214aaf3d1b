#include "simulator/error_bar.h"

#include <gtest/gtest.h>

#include <cmath>

namespace parallax {
namespace {

/// A row of `source` on `part` whose measured throughput is (1 + r) x the predicted.
ValidationRow row(const std::string& source, const std::string& part, double r) {
  ValidationRow v;
  v.id = source + part + std::to_string(r);
  v.classes = {source, part, "dense", "bf16", "1-64 GPUs", "megatron-lm"};
  v.predicted_throughput = 1000;
  v.measured_throughput = 1000 * (1 + r);
  return v;
}

TEST(ErrorBar, ClassBandsAreTheCentralEightyPercent) {
  std::vector<ValidationRow> rows;
  for (int i = 0; i <= 10; ++i) rows.push_back(row("s", "h100", 0.01 * i));  // 0 .. 0.10
  for (int i = 0; i < 3; ++i) rows.push_back(row("s", "a100", -0.5));        // too few
  const ResidualTable t = residual_table(rows);
  EXPECT_EQ(t.overall.n, 14);
  const auto h100 = std::find_if(t.classes.begin(), t.classes.end(), [](const ResidualClass& c) {
    return c.dimension == "part" && c.name == "h100";
  });
  ASSERT_NE(h100, t.classes.end());
  EXPECT_EQ(h100->n, 11);
  // 10th and 90th percentile of 0, 0.01, ..., 0.10 (linear between order statistics).
  EXPECT_NEAR(h100->lo, 0.01, 1e-12);
  EXPECT_NEAR(h100->hi, 0.09, 1e-12);
  for (const auto& c : t.classes) {
    EXPECT_NE(c.name, "a100");         // 3 runs < kMinClassRuns
    EXPECT_NE(c.dimension, "source");  // a new prediction has none
  }
}

TEST(ErrorBar, APredictionTakesTheWidestOfItsClasses) {
  ResidualTable t;
  t.overall = {"all", "all runs", 100, -0.3, 0.3};
  t.classes = {{"part", "h100", 20, -0.05, 0.05},
               {"kind", "dense", 50, -0.10, 0.02},
               {"part", "a100", 20, -0.5, 0.5}};
  const ErrorBar b = error_bar(t, {"", "h100", "dense", "bf16", "1-64 GPUs", ""});
  EXPECT_EQ(b.n, 50);
  EXPECT_DOUBLE_EQ(b.lo, -0.10);
  EXPECT_DOUBLE_EQ(b.hi, 0.02);
  EXPECT_NE(b.basis.find("kind=dense"), std::string::npos) << b.basis;
  EXPECT_TRUE(b.holds(0.95));
  EXPECT_FALSE(b.holds(1.05));
  // No class with enough runs: the overall band.
  const ErrorBar o = error_bar(t, {"", "b200", "moe", "fp8", "4097+ GPUs", ""});
  EXPECT_EQ(o.n, 100);
  EXPECT_DOUBLE_EQ(o.hi, 0.3);
  // A calibrated profile's spread widens the band by half of it on each side.
  const ErrorBar c = error_bar(t, {"", "h100", "", "", "", ""}, 0.04);
  EXPECT_NEAR(c.lo, -0.07, 1e-12);
  EXPECT_NEAR(c.hi, 0.07, 1e-12);
  EXPECT_FALSE(error_bar(ResidualTable{}, {"", "h100"}).known());
}

TEST(ErrorBar, CalibrationSpreadIsTheMedianOfTheMeasuredPoints) {
  HwProfile hw;
  EXPECT_EQ(calibration_spread(hw), 0);
  hw.gemm_samples = {{1024, 1024, 1024, Precision::kBf16, 500, 0.02},
                     {2048, 2048, 2048, Precision::kBf16, 600, 0.06}};
  hw.memory_samples = {{"copy", 1e9, 3000, 0.04}, {"triad", 1e9, 3000, 0}};  // 0: not recorded
  EXPECT_NEAR(calibration_spread(hw), 0.04, 1e-12);
}

TEST(ErrorBar, TableRoundTripsThroughJson) {
  std::vector<ValidationRow> rows;
  for (int i = 0; i < 9; ++i) rows.push_back(row("s", "h100", 0.02 * i - 0.05));
  const ResidualTable t = residual_table(rows);
  auto back = residual_table_from_json(residual_table_to_json(t), "t.json");
  ASSERT_TRUE(back.ok()) << back.error_text();
  ASSERT_EQ(back->classes.size(), t.classes.size());
  EXPECT_DOUBLE_EQ(back->overall.lo, t.overall.lo);
  EXPECT_EQ(back->classes[0].name, t.classes[0].name);
  Json bad = residual_table_to_json(t);
  bad["format"] = "parallax-residuals/9";
  EXPECT_FALSE(residual_table_from_json(bad, "t.json").ok());
}

// Each source's rows are checked against a band built without them.
TEST(ErrorBar, CoverageLeavesEachSourceOut) {
  std::vector<ValidationRow> rows;
  for (int i = 0; i < 10; ++i) rows.push_back(row("a", "h100", 0.01 * i));
  for (int i = 0; i < 10; ++i) rows.push_back(row("b", "h100", 0.01 * i));
  rows.push_back(row("c", "h100", 0.5));  // far outside the others' band
  const BarCoverage c = leave_one_source_out(rows);
  EXPECT_EQ(c.checked, 21);
  // a's rows against the band of b's and c's eleven, [0.01, 0.09]: 9 of 10 inside (0 is not);
  // b's alike; c's row against a's and b's band [0.009, 0.081] is outside.
  EXPECT_EQ(c.inside, 18);
}

TEST(ErrorBar, TheBuiltInTableLoads) {
  const ResidualTable& t = builtin_residuals();
  EXPECT_GT(t.overall.n, 0);
  EXPECT_LE(t.overall.lo, t.overall.hi);
}

}  // namespace
}  // namespace parallax
