#include "simulator/validate.h"

#include <gtest/gtest.h>

namespace parallax {
namespace {

ValidationRow row(const std::string& source, double error) {
  ValidationRow r;
  r.id = source + std::to_string(error);
  r.source = source;
  r.error = error;
  return r;
}

// MAPE = mean |error| overall and per source; the per-source mean signed error is the bias.
TEST(Validate, SummaryGroupsBySourceInOrderOfAppearance) {
  const ValidationSummary s =
      summarize({row("a", 0.1), row("b", -0.3), row("a", -0.2), row("b", -0.1)});
  EXPECT_NEAR(s.mape, (0.1 + 0.3 + 0.2 + 0.1) / 4, 1e-12);
  EXPECT_NEAR(s.max_abs_error, 0.3, 1e-12);
  ASSERT_EQ(s.by_source.size(), 2u);
  EXPECT_EQ(s.by_source[0].source, "a");
  EXPECT_EQ(s.by_source[0].n, 2);
  EXPECT_NEAR(s.by_source[0].mape, 0.15, 1e-12);
  EXPECT_NEAR(s.by_source[0].mean_error, -0.05, 1e-12);
  EXPECT_EQ(s.by_source[1].source, "b");
  EXPECT_NEAR(s.by_source[1].mape, 0.2, 1e-12);
  EXPECT_NEAR(s.by_source[1].mean_error, -0.2, 1e-12);
}

}  // namespace
}  // namespace parallax
