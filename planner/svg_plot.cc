#include "planner/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace parallax {
namespace {

constexpr double kWidth = 760, kHeight = 440;
constexpr double kLeft = 80, kRight = 190, kTop = 50, kBottom = 70;
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                   "#9467bd", "#8c564b", "#e377c2", "#17becf"};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string tick_label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

/// A round step giving about five ticks up to `top`.
double tick_step(double top) {
  const double raw = top / 5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double f : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (f * mag >= raw) return f * mag;
  return 10 * mag;
}

std::string text(double x, double y, const std::string& s, const char* anchor = "middle",
                 const char* extra = "") {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" text-anchor=\"" + anchor + "\"" + extra +
         ">" + escape(s) + "</text>\n";
}

}  // namespace

std::string render_svg(const LinePlot& plot) {
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  double top = 0;
  for (const auto& s : plot.series)
    for (double v : s.y)
      if (std::isfinite(v)) top = std::max(top, v);
  const double step = tick_step(top > 0 ? top : 1);
  const double y_max = std::ceil((top > 0 ? top : 1) / step) * step;
  const size_t n = plot.x.size();
  auto px = [&](size_t i) { return kLeft + (n <= 1 ? pw / 2 : pw * i / (n - 1)); };
  auto py = [&](double v) { return kTop + ph * (1 - v / y_max); };

  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(kWidth) +
                    "\" height=\"" + num(kHeight) + "\" viewBox=\"0 0 " + num(kWidth) + " " +
                    num(kHeight) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += text(kWidth / 2, 22, plot.title, "middle", " font-size=\"15\"");
  if (!plot.subtitle.empty())
    svg += text(kWidth / 2, 38, plot.subtitle, "middle", " fill=\"#555\"");
  for (double v = 0; v <= y_max + step / 2; v += step) {
    svg += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(py(v)) + "\" x2=\"" + num(kLeft + pw) +
           "\" y2=\"" + num(py(v)) + "\" stroke=\"#e0e0e0\"/>\n";
    svg += text(kLeft - 8, py(v) + 4, tick_label(v), "end");
  }
  svg += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(kTop + ph) + "\" x2=\"" + num(kLeft + pw) +
         "\" y2=\"" + num(kTop + ph) + "\" stroke=\"black\"/>\n";
  svg += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(kTop) + "\" x2=\"" + num(kLeft) +
         "\" y2=\"" + num(kTop + ph) + "\" stroke=\"black\"/>\n";
  for (size_t i = 0; i < n; ++i) svg += text(px(i), kTop + ph + 18, plot.x[i]);
  svg += text(kLeft + pw / 2, kHeight - 20, plot.x_label);
  svg += text(20, kTop + ph / 2, plot.y_label, "middle",
              (" transform=\"rotate(-90 20 " + num(kTop + ph / 2) + ")\"").c_str());
  for (size_t k = 0; k < plot.series.size(); ++k) {
    const PlotSeries& s = plot.series[k];
    const char* color = kColors[k % (sizeof kColors / sizeof kColors[0])];
    std::string path;
    for (size_t i = 0; i < s.y.size() && i < n; ++i) {
      if (!std::isfinite(s.y[i])) continue;  // a gap: the next point starts a new subpath
      const bool start = i == 0 || !std::isfinite(s.y[i - 1]);
      path += std::string(start ? "M" : "L") + num(px(i)) + "," + num(py(s.y[i])) + " ";
    }
    if (!path.empty())
      svg +=
          "<path d=\"" + path + "\" fill=\"none\" stroke=\"" + color + "\" stroke-width=\"2\"/>\n";
    for (size_t i = 0; i < s.y.size() && i < n; ++i) {
      if (!std::isfinite(s.y[i])) continue;
      const bool marked = i < s.marked.size() && s.marked[i];
      svg += "<circle cx=\"" + num(px(i)) + "\" cy=\"" + num(py(s.y[i])) + "\" r=\"" +
             (marked ? "6" : "3") + "\" fill=\"" + (marked ? "white" : color) + "\" stroke=\"" +
             color + "\" stroke-width=\"2\"/>\n";
      if (i < s.notes.size()) {
        // Stacked above the point, the last line nearest it.
        // The first and last points' notes grow inwards, clear of the axis and the legend.
        const std::vector<std::string>& lines = s.notes[i];
        const char* anchor = n > 1 && i == 0 ? "start" : n > 1 && i + 1 == n ? "end" : "middle";
        // Even series write above their points, odd ones below, so that two close lines'
        // notes do not overprint.
        const bool above = k % 2 == 0;
        for (size_t l = 0; l < lines.size(); ++l) {
          const double dy = above ? -10 - 11.0 * (lines.size() - 1 - l) : 18 + 11.0 * l;
          svg += text(px(i), py(s.y[i]) + dy, lines[l], anchor,
                      (" font-size=\"9\" fill=\"" + std::string(color) + "\"").c_str());
        }
      }
    }
    const double ly = kTop + 10 + 20 * k;
    svg += "<line x1=\"" + num(kLeft + pw + 15) + "\" y1=\"" + num(ly) + "\" x2=\"" +
           num(kLeft + pw + 35) + "\" y2=\"" + num(ly) + "\" stroke=\"" + color +
           "\" stroke-width=\"2\"/>\n";
    svg += text(kLeft + pw + 40, ly + 4, s.name, "start");
  }
  const double ny = kTop + 10 + 20 * plot.series.size() + 10;
  svg += "<circle cx=\"" + num(kLeft + pw + 25) + "\" cy=\"" + num(ny) +
         "\" r=\"6\" fill=\"white\" stroke=\"black\" stroke-width=\"2\"/>\n";
  svg += text(kLeft + pw + 40, ny + 4, "best layout changes", "start");
  svg += "</svg>\n";
  return svg;
}

}  // namespace parallax
