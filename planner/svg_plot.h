#pragma once
/// A dependency-free SVG line plot: categorical x (the points of a sweep, evenly spaced and
/// labelled), linear y from zero, one polyline per series, hollow markers where a point is
/// flagged (the what-if sweep flags where the best layout changes).

#include <string>
#include <vector>

namespace parallax {

struct PlotSeries {
  std::string name;
  std::vector<double> y;     ///< one per x label; NaN leaves a gap (no feasible plan)
  std::vector<bool> marked;  ///< same length as y, or empty
  /// Text beside each point (e.g. its layout, days and cost), one entry per line; same length
  /// as y, or empty.
  std::vector<std::vector<std::string>> notes;
};

struct LinePlot {
  std::string title, subtitle, x_label, y_label;
  std::vector<std::string> x;
  std::vector<PlotSeries> series;
};

/// The SVG document (UTF-8 text). Labels are XML-escaped.
std::string render_svg(const LinePlot& plot);

}  // namespace parallax
