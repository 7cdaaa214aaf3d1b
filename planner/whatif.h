#pragma once
/// What-if sweeps: vary one or two things (GPU count, a hardware number, sequence length, global
/// batch, model), re-plan at every point, and report the best layout there, its throughput and
/// where the best layout changes.

#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "planner/search.h"
#include "planner/svg_plot.h"

namespace parallax {

enum class WhatIfAxis { kGpus, kNvlinkBw, kNicBw, kHbm, kPeakTflops, kSeq, kGlobalBatch, kModel };
/// "gpus, nvlink-bw, nic-bw, hbm, tflops, seq, gbs, model"
const char* whatif_axis_names();
std::optional<WhatIfAxis> parse_whatif_axis(const std::string& s);
const char* to_string(WhatIfAxis a);

/// One swept variable: numeric values, or models for kModel (with their names as labels).
struct WhatIfVariable {
  WhatIfAxis axis = WhatIfAxis::kGpus;
  std::vector<double> values;
  std::vector<ModelSpec> models;
  size_t size() const { return axis == WhatIfAxis::kModel ? models.size() : values.size(); }
  std::string label(size_t i) const;
};

struct WhatIfPoint {
  size_t a = 0, b = 0;             ///< indices into the first and second variable
  std::optional<RankedPlan> best;  ///< empty when nothing fits there
  std::string why_none;            ///< the search's message when empty
  bool layout_changed = false;     ///< the best layout differs from the previous point's
  double scaling_efficiency = 0;   ///< GPU sweeps: tokens/s/GPU over the first point's
};

struct WhatIfResult {
  WhatIfVariable first;
  std::optional<WhatIfVariable> second;
  std::vector<WhatIfPoint> points;  ///< second-major: each series runs over the first variable
};

/// Sets the point's values on a copy of the request (hardware numbers on the copy's profile).
PlanRequest apply_point(const PlanRequest& base, const WhatIfVariable& v, size_t i);

/// Re-plans at every point. Fails only on a bad variable (empty, non-positive value); a point
/// where nothing fits is reported as such.
Result<WhatIfResult> run_whatif(const PlanRequest& base, const SearchOptions& opt,
                                const WhatIfVariable& first,
                                const std::optional<WhatIfVariable>& second);

std::string format_whatif_table(const WhatIfResult& r);
/// Tokens/s per GPU against the first variable (with its unit), one line per value of the
/// second; each point carries its layout and, with a token budget, days and GPU-hours.
LinePlot whatif_plot(const WhatIfResult& r, const std::string& model_name, double token_budget = 0);

}  // namespace parallax
