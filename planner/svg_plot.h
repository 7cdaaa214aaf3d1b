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
};

struct LinePlot {
  std::string title, x_label, y_label;
  std::vector<std::string> x;
  std::vector<PlotSeries> series;
};

/// The SVG document (UTF-8 text). Labels are XML-escaped.
std::string render_svg(const LinePlot& plot);

}  // namespace parallax
