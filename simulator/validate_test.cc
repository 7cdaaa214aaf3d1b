#include "simulator/validate.h"

#include <gtest/gtest.h>

namespace parallax {
namespace {

ValidationRow row(const std::string& source, const std::string& part, double error) {
  ValidationRow r;
  r.id = source + std::to_string(error);
  r.classes = {source, part, "dense", "bf16", "1-64 GPUs", "unstated"};
  r.error = error;
  return r;
}

// MAPE = mean |error| overall and per class; the per-class mean signed error is the bias.
TEST(Validate, SummaryGroupsByClassInOrderOfAppearance) {
  const std::vector<ValidationRow> rows = {row("a", "h100", 0.1), row("b", "a100", -0.3),
                                           row("a", "a100", -0.2), row("b", "a100", -0.1)};
  const ValidationSummary s = summarize(rows);
  EXPECT_NEAR(s.mape, (0.1 + 0.3 + 0.2 + 0.1) / 4, 1e-12);
  EXPECT_NEAR(s.max_abs_error, 0.3, 1e-12);
  EXPECT_NEAR(s.mean_error, -0.125, 1e-12);
  const auto by_source = summarize_by(rows, "source");
  ASSERT_EQ(by_source.size(), 2u);
  EXPECT_EQ(by_source[0].name, "a");
  EXPECT_EQ(by_source[0].n, 2);
  EXPECT_NEAR(by_source[0].mape, 0.15, 1e-12);
  EXPECT_NEAR(by_source[0].mean_error, -0.05, 1e-12);
  EXPECT_NEAR(by_source[0].max_abs_error, 0.2, 1e-12);
  EXPECT_EQ(by_source[1].name, "b");
  EXPECT_NEAR(by_source[1].mape, 0.2, 1e-12);
  EXPECT_NEAR(by_source[1].mean_error, -0.2, 1e-12);
  const auto by_part = summarize_by(rows, "part");
  ASSERT_EQ(by_part.size(), 2u);
  EXPECT_EQ(by_part[0].name, "h100");
  EXPECT_EQ(by_part[1].name, "a100");
  EXPECT_EQ(by_part[1].n, 3);
  EXPECT_NEAR(by_part[1].max_abs_error, 0.3, 1e-12);
  EXPECT_TRUE(summarize_by(rows, "colour").empty());
}

TEST(Validate, SpearmanRanksWithTies) {
  EXPECT_NEAR(spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0, 1e-12);
  EXPECT_NEAR(spearman({1, 2, 3, 4}, {40, 30, 20, 10}), -1.0, 1e-12);
  // One swap among four: rho = 1 - 6*2 / (4*15) = 0.8.
  EXPECT_NEAR(spearman({1, 2, 3, 4}, {1, 3, 2, 4}), 0.8, 1e-12);
  // Tied values share their mean rank: ranks (1.5, 1.5, 3) against (1, 2, 3).
  EXPECT_NEAR(spearman({5, 5, 7}, {1, 2, 3}), 0.8660254037844386, 1e-12);
  EXPECT_EQ(spearman({1, 1, 1}, {1, 2, 3}), 0);
  EXPECT_EQ(spearman({1}, {1}), 0);
}

// Sweeps of three or more rows are ranked on throughput, whatever each record measured.
TEST(Validate, SweepsRankOnThroughput) {
  std::vector<ValidationRow> rows;
  for (double m : {100.0, 200.0, 300.0}) {
    ValidationRow r = row("a", "h100", 0);
    r.sweep = "s1";
    r.measured_throughput = m;
    r.predicted_throughput = 1000 - m;  // ranked backwards
    rows.push_back(r);
  }
  ValidationRow lone = row("a", "h100", 0);
  lone.sweep = "s2";
  rows.push_back(lone);
  const ValidationSummary s = summarize(rows);
  ASSERT_EQ(s.sweeps.size(), 1u);
  EXPECT_EQ(s.sweeps[0].sweep, "s1");
  EXPECT_EQ(s.sweeps[0].n, 3);
  EXPECT_NEAR(s.sweeps[0].spearman, -1.0, 1e-12);
  EXPECT_NEAR(s.mean_spearman, -1.0, 1e-12);
}

}  // namespace
}  // namespace parallax
