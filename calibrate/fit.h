#pragma once
/// From measurements to a hardware profile: the measured tables (every point kept, with its
/// spread) and the fitted numbers the analytical model uses outside them (peaks and
/// efficiencies, memory bandwidth, kernel overhead, latency and bandwidth per link class).
/// Every number gets a source saying how it was measured or where it came from.

#include <optional>
#include <string>
#include <vector>

#include "calibrate/suite.h"
#include "core/hw_profile.h"

namespace parallax::calibrate {

/// t = latency + bytes / bandwidth, least squares weighted by 1/t^2 (relative error, so small
/// and large messages count alike).
struct LatencyBandwidth {
  double latency_s = 0;
  double bandwidth_gbps = 0;
  double rms_rel_error = 0;  ///< of the fit over its points
  int points = 0;
};
/// Needs at least two distinct sizes; fails when the slope is not positive (time does not grow
/// with size) or the intercept is negative beyond noise (clamped to 0 when small).
std::optional<LatencyBandwidth> fit_latency_bandwidth(const std::vector<double>& bytes,
                                                      const std::vector<double>& seconds);

struct FitOptions {
  std::string name;               ///< the profile's name
  std::optional<HwProfile> base;  ///< datasheet profile: peaks stay, efficiencies are fitted
  std::string command;            ///< how it was measured, for the sources
};

struct Fitted {
  HwProfile profile;
  std::vector<std::string> notes;  ///< what was not measured, what was out of range
  std::vector<Rejected> rejected;  ///< points the fit refused (above a datasheet peak, ...)
};

/// Fits a profile to `d`. Without a base, peaks are the best measured values (efficiency 1 by
/// definition) and what cannot be measured here (scale-out with one node) is derived from what
/// was, saying so in its source. Fails when the result is not a valid profile (e.g. no GEMM
/// point survived).
Result<Fitted> fit_profile(const CalibrationData& d, const FitOptions& opt);

/// One re-measured point against the profile.
struct CheckRow {
  std::string table, what;
  double profile = 0, measured = 0;  ///< TFLOP/s or GB/s
  double ratio() const { return profile > 0 ? measured / profile : 0; }
};
struct CheckReport {
  std::vector<CheckRow> rows;
  std::vector<std::string> unmatched;  ///< re-measured points the profile has no entry for
  /// Median and largest |measured / profile - 1| over all rows.
  double median_deviation = 0, max_deviation = 0;
};
/// Matches the points of `d` to the samples of `p` (same shape, size and group).
CheckReport compare_to_profile(const HwProfile& p, const CalibrationData& d);

}  // namespace parallax::calibrate
