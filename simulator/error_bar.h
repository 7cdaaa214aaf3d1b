#pragma once
/// Error bars from measured runs: how far the measured throughput of the corpus's runs fell from
/// the predictions, per class (part, dense/MoE, precision, scale, stack), widened by the spread
/// of a calibrated profile's measurements. A new prediction gets the widest 80% band among the
/// classes it belongs to that hold enough runs; `validate` checks the bands on runs left out.

#include <string>
#include <vector>

#include "core/json_io.h"
#include "simulator/validate.h"

namespace parallax {

/// Central band of the residuals: 10th to 90th percentile.
inline constexpr double kBarLowQuantile = 0.10, kBarHighQuantile = 0.90;
/// A class takes part only with this many runs; below it the band is noise.
inline constexpr int kMinClassRuns = 8;

/// Measured over predicted throughput, minus 1, of one class's runs: the band [lo, hi] holds
/// the central 80% of them.
struct ResidualClass {
  std::string dimension, name;
  int n = 0;
  double lo = 0, hi = 0;
};

struct ResidualTable {
  std::vector<ResidualClass> classes;  ///< classes of kMinClassRuns or more runs
  ResidualClass overall;               ///< every run
};

/// The table of `rows` (each with its measured and predicted throughput). The `source`
/// dimension is left out: a new prediction has no source.
ResidualTable residual_table(const std::vector<ValidationRow>& rows);
Json residual_table_to_json(const ResidualTable& t);
Result<ResidualTable> residual_table_from_json(const Json& j, const std::string& where);
/// validation/residuals.json as built into the binary (`parallax validate --residuals-out`
/// writes it from the corpus); empty when the build carries none.
const ResidualTable& builtin_residuals();

/// Where the measured throughput is expected: [predicted * (1 + lo), predicted * (1 + hi)].
struct ErrorBar {
  double lo = 0, hi = 0;
  int n = 0;          ///< runs behind the band
  std::string basis;  ///< "part=h100-sxm-80gb (n=40)" or "all runs (n=250)", "+ calibration"
  bool known() const { return n > 0; }
  bool holds(double measured_over_predicted) const {
    return measured_over_predicted - 1 >= lo && measured_over_predicted - 1 <= hi;
  }
};

/// The band of a prediction of `classes` (prediction_classes): the widest of its classes in
/// the table, or the overall band when none has enough runs; `calibration_spread` (the
/// interdecile spread of the profile's measurements) widens it by half on each side.
ErrorBar error_bar(const ResidualTable& t, const std::vector<std::string>& classes,
                   double calibration_spread = 0);

/// The built-in band (builtin_residuals, widened by the profile's calibration spread) of a
/// prediction of `p` for `m` on `c`, run by `stack` (a framework name; empty: any).
ErrorBar prediction_bar(const ModelSpec& m, const Cluster& c, const ParallelPlan& p,
                        const std::string& stack = "");

/// The median interdecile spread ((p90 - p10) / median) of a calibrated profile's measured
/// points; 0 for a datasheet profile.
double calibration_spread(const HwProfile& hw);

/// The share of `rows` whose measured throughput falls inside the band built from the runs of
/// the other sources only (leave one source out), and how many rows had a band.
struct BarCoverage {
  int inside = 0, checked = 0;
};
BarCoverage leave_one_source_out(const std::vector<ValidationRow>& rows);

}  // namespace parallax
