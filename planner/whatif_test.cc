// What-if sweeps and their SVG plot.
#include "planner/whatif.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/json_io.h"
#include "core/model_zoo.h"
#include "core/text.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

PlanRequest base_request() {
  PlanRequest r;
  r.model = find_zoo_model("llama3.1-8b", "test").value();
  r.cluster = {find_profile(builtin_profiles().value(), "h100-sxm-80gb", "t").value(), 8};
  r.global_batch = 64;
  r.seq_len = 4096;
  return r;
}

TEST(WhatIf, GpuSweepReplansEachPointAndMeasuresScaling) {
  WhatIfVariable v;
  v.axis = WhatIfAxis::kGpus;
  v.values = {8, 16, 32};
  auto r = run_whatif(base_request(), SearchOptions{}, v, std::nullopt);
  ASSERT_TRUE(r) << r.error_text();
  ASSERT_EQ(r->points.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(r->points[i].best);
    EXPECT_EQ(r->points[i].best->report.gpus, static_cast<int>(v.values[i]));
  }
  EXPECT_DOUBLE_EQ(r->points[0].scaling_efficiency, 1.0);
  // Scaling efficiency = tokens/s/GPU at the point over that of the first point.
  testing::expect_rel(r->points[2].scaling_efficiency,
                      r->points[2].best->report.tokens_per_s_per_gpu /
                          r->points[0].best->report.tokens_per_s_per_gpu);
  for (size_t i = 1; i < 3; ++i) {
    const bool differs = layout_label(r->points[i].best->report.plan) !=
                         layout_label(r->points[i - 1].best->report.plan);
    EXPECT_EQ(r->points[i].layout_changed, differs);
  }
}

// The plot names its axis with the unit and prints each point's layout and, with a token
// budget, its days and GPU-hours.
TEST(WhatIf, PlotLabelsEveryPointWithItsLayoutDaysAndCost) {
  WhatIfVariable v;
  v.axis = WhatIfAxis::kGpus;
  v.values = {8, 16};
  SearchOptions opt;
  opt.token_budget = 1e10;
  auto r = run_whatif(base_request(), opt, v, std::nullopt);
  ASSERT_TRUE(r) << r.error_text();
  const LinePlot plot = whatif_plot(*r, "m", opt.token_budget);
  EXPECT_EQ(plot.x_label, "GPUs");
  ASSERT_EQ(plot.series.size(), 1u);
  ASSERT_EQ(plot.series[0].notes.size(), 2u);
  const RankedPlan& best = *r->points[1].best;
  const auto& notes = plot.series[0].notes[1];
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0].rfind("tp" + std::to_string(best.report.plan.tp) + " pp", 0), 0u) << notes[0];
  EXPECT_EQ(notes[1].rfind(format_number("%.1f days, ", best.time_to_train_days), 0), 0u)
      << notes[1];
  EXPECT_NE(notes[1].find(" GPU-h"), std::string::npos) << notes[1];
  const std::string svg = render_svg(plot);
  EXPECT_NE(svg.find(notes[1]), std::string::npos);
  EXPECT_NE(svg.find("days and GPU-hours to train 1e+10 tokens"), std::string::npos);
}

TEST(WhatIf, HardwareAxesChangeTheProfileOfThePoint) {
  const PlanRequest base = base_request();
  WhatIfVariable v;
  v.axis = WhatIfAxis::kPeakTflops;
  v.values = {1978.0};
  const PlanRequest r = apply_point(base, v, 0);
  EXPECT_DOUBLE_EQ(r.cluster.hw.bf16_tflops, 1978.0);
  // fp8 keeps its ratio to bf16.
  testing::expect_rel(r.cluster.hw.fp8_tflops,
                      base.cluster.hw.fp8_tflops * 1978.0 / base.cluster.hw.bf16_tflops);
  v.axis = WhatIfAxis::kNicBw;
  v.values = {25};
  EXPECT_DOUBLE_EQ(apply_point(base, v, 0).cluster.hw.scale_out_bw_gbps, 25);
  v.axis = WhatIfAxis::kHbm;
  v.values = {141};
  EXPECT_DOUBLE_EQ(apply_point(base, v, 0).cluster.hw.hbm_gib, 141);
}

// A point where nothing fits is reported, and the next feasible point does not claim a change.
TEST(WhatIf, InfeasiblePointsAreReportedNotFatal) {
  WhatIfVariable v;
  v.axis = WhatIfAxis::kHbm;
  v.values = {80, 4, 80};
  auto r = run_whatif(base_request(), SearchOptions{}, v, std::nullopt);
  ASSERT_TRUE(r) << r.error_text();
  EXPECT_TRUE(r->points[0].best.has_value());
  EXPECT_FALSE(r->points[1].best.has_value());
  EXPECT_NE(r->points[1].why_none.find("fits"), std::string::npos);
  EXPECT_FALSE(r->points[2].layout_changed);
  EXPECT_NE(format_whatif_table(*r).find("no plan fits"), std::string::npos);
}

TEST(WhatIf, BadVariablesAreRefused) {
  WhatIfVariable v;
  v.axis = WhatIfAxis::kGpus;
  v.values = {8, -1, 2.5};
  auto r = run_whatif(base_request(), SearchOptions{}, v, v);
  ASSERT_FALSE(r);
  EXPECT_TRUE(testing::mentions(r.errors(), "must be positive"));
  EXPECT_TRUE(testing::mentions(r.errors(), "must be whole"));
  EXPECT_TRUE(testing::mentions(r.errors(), "repeats the first"));
  EXPECT_FALSE(parse_whatif_axis("nvlink"));
  EXPECT_EQ(parse_whatif_axis("nvlink-bw"), WhatIfAxis::kNvlinkBw);
}

TEST(SvgPlot, DrawsEverySeriesWithGapsMarkersAndEscapedText) {
  LinePlot p;
  p.title = "a < b & c";
  p.x_label = "gpus";
  p.y_label = "tokens/s per GPU";
  p.x = {"8", "16", "32"};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  p.series = {{"seq=4096", {100, nan, 300}, {false, false, true}},
              {"seq=8192", {90, 80, 70}, {false, true, false}}};
  const std::string svg = render_svg(p);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("a &lt; b &amp; c"), std::string::npos);
  // The gap splits the first series into two subpaths ("M" twice); the second is one.
  size_t paths = 0, moves = 0;
  for (size_t at = svg.find("<path d=\""); at != std::string::npos;
       at = svg.find("<path d=\"", at + 1)) {
    ++paths;
    const std::string d = svg.substr(at, svg.find('"', at + 9) - at);
    for (char ch : d) moves += ch == 'M';
  }
  EXPECT_EQ(paths, 2u);
  EXPECT_EQ(moves, 3u);
  // Hollow (white-filled) markers: the two flagged points and the legend's example.
  size_t hollow = 0;
  for (size_t at = svg.find("fill=\"white\" stroke"); at != std::string::npos;
       at = svg.find("fill=\"white\" stroke", at + 1))
    ++hollow;
  EXPECT_EQ(hollow, 3u);
}

}  // namespace
}  // namespace parallax
