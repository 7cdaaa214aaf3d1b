#include "simulator/error_bar.h"

#include <algorithm>
#include <cmath>

#include "core/text.h"

namespace parallax {

const char* builtin_residuals_text();  // generated from validation/residuals.json

namespace {

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double at = q * static_cast<double>(v.size() - 1);
  const size_t i = static_cast<size_t>(at);
  if (i + 1 >= v.size()) return v.back();
  return v[i] + (at - static_cast<double>(i)) * (v[i + 1] - v[i]);
}

ResidualClass band(std::string dimension, std::string name, const std::vector<double>& r) {
  ResidualClass c{std::move(dimension), std::move(name), static_cast<int>(r.size()), 0, 0};
  if (!r.empty()) {
    c.lo = quantile(r, kBarLowQuantile);
    c.hi = quantile(r, kBarHighQuantile);
  }
  return c;
}

double residual(const ValidationRow& r) {
  return r.measured_throughput / r.predicted_throughput - 1;
}

}  // namespace

ResidualTable residual_table(const std::vector<ValidationRow>& rows) {
  ResidualTable t;
  std::vector<double> all;
  for (const auto& r : rows)
    if (r.predicted_throughput > 0) all.push_back(residual(r));
  t.overall = band("all", "all runs", all);
  const auto& dims = class_dimensions();
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] == "source") continue;
    std::vector<std::string> names;
    for (const auto& r : rows)
      if (k < r.classes.size() &&
          std::find(names.begin(), names.end(), r.classes[k]) == names.end())
        names.push_back(r.classes[k]);
    for (const auto& name : names) {
      std::vector<double> v;
      for (const auto& r : rows)
        if (r.predicted_throughput > 0 && r.classes[k] == name) v.push_back(residual(r));
      if (static_cast<int>(v.size()) >= kMinClassRuns) t.classes.push_back(band(dims[k], name, v));
    }
  }
  return t;
}

Json residual_table_to_json(const ResidualTable& t) {
  auto one = [](const ResidualClass& c) {
    return Json{
        {"dimension", c.dimension}, {"class", c.name}, {"n", c.n}, {"lo", c.lo}, {"hi", c.hi}};
  };
  Json classes = Json::array();
  for (const auto& c : t.classes) classes.push_back(one(c));
  return {{"format", "parallax-residuals/1"},
          {"what",
           "measured over predicted throughput, minus 1: 10th and 90th percentile per "
           "class of the validation corpus (parallax validate --residuals-out)"},
          {"overall", one(t.overall)},
          {"classes", classes}};
}

Result<ResidualTable> residual_table_from_json(const Json& j, const std::string& where) {
  Diagnostics d;
  JsonFields f(j, where, &d);
  f.reject_unknown({"format", "what", "overall", "classes"});
  if (f.string("format") != "parallax-residuals/1" && d.empty())
    d.push_back({f.path("format"), "unknown format", "parallax-residuals/1"});
  auto read = [&d](const Json& c, const std::string& at) {
    JsonFields cf(c, at, &d);
    cf.reject_unknown({"dimension", "class", "n", "lo", "hi"});
    return ResidualClass{cf.string("dimension"), cf.string("class"),
                         static_cast<int>(cf.integer_in("n", 0, 1 << 30, "runs")), cf.number("lo"),
                         cf.number("hi")};
  };
  ResidualTable t;
  if (const Json* o = f.object("overall")) t.overall = read(*o, where + "/overall");
  if (const Json* cs = f.array("classes"))
    for (size_t i = 0; i < cs->size(); ++i)
      t.classes.push_back(read((*cs)[i], where + "/classes/" + std::to_string(i)));
  if (!d.empty()) return d;
  return t;
}

const ResidualTable& builtin_residuals() {
  static const ResidualTable table = [] {
    const std::string text = builtin_residuals_text();
    if (text.empty()) return ResidualTable{};
    auto j = parse_json(text, "validation/residuals.json", 1);
    PX_CHECK(j.ok(), "built-in residual table: " + j.error_text());
    auto t = residual_table_from_json(j.value(), "validation/residuals.json");
    PX_CHECK(t.ok(), "built-in residual table: " + t.error_text());
    return t.value();
  }();
  return table;
}

ErrorBar error_bar(const ResidualTable& t, const std::vector<std::string>& classes,
                   double calibration_spread) {
  ErrorBar bar;
  const auto& dims = class_dimensions();
  for (const auto& c : t.classes) {
    const auto at = std::find(dims.begin(), dims.end(), c.dimension);
    const size_t k = static_cast<size_t>(at - dims.begin());
    if (at == dims.end() || k >= classes.size() || classes[k] != c.name) continue;
    if (bar.known() && c.hi - c.lo <= bar.hi - bar.lo) continue;
    bar = {c.lo, c.hi, c.n, c.dimension + "=" + c.name + " (n=" + std::to_string(c.n) + ")"};
  }
  if (!bar.known() && t.overall.n > 0)
    bar = {t.overall.lo, t.overall.hi, t.overall.n,
           "all runs (n=" + std::to_string(t.overall.n) + ")"};
  if (bar.known() && calibration_spread > 0) {
    bar.lo -= calibration_spread / 2;
    bar.hi += calibration_spread / 2;
    bar.basis += " + calibration spread " + format_number("%.0f%%", 100 * calibration_spread);
  }
  return bar;
}

ErrorBar prediction_bar(const ModelSpec& m, const Cluster& c, const ParallelPlan& p,
                        const std::string& stack) {
  std::vector<std::string> classes =
      prediction_classes("", m, c.hw.name, p.precision, c.num_gpus, stack);
  if (stack.empty()) classes.back().clear();  // no stack class: "unstated" records are not it
  return error_bar(builtin_residuals(), classes, calibration_spread(c.hw));
}

double calibration_spread(const HwProfile& hw) {
  std::vector<double> s;
  for (const auto& g : hw.gemm_samples) s.push_back(g.spread);
  for (const auto& c : hw.collective_samples) s.push_back(c.spread);
  for (const auto& m : hw.memory_samples) s.push_back(m.spread);
  for (const auto& a : hw.attention_samples) s.push_back(a.spread);
  std::erase_if(s, [](double x) { return !(x > 0); });
  return s.empty() ? 0 : quantile(s, 0.5);
}

BarCoverage leave_one_source_out(const std::vector<ValidationRow>& rows) {
  BarCoverage cov;
  std::vector<std::string> sources;
  for (const auto& r : rows)
    if (!r.classes.empty() &&
        std::find(sources.begin(), sources.end(), r.classes[0]) == sources.end())
      sources.push_back(r.classes[0]);
  for (const auto& source : sources) {
    std::vector<ValidationRow> others;
    for (const auto& r : rows)
      if (r.classes.empty() || r.classes[0] != source) others.push_back(r);
    const ResidualTable t = residual_table(others);
    for (const auto& r : rows) {
      if (r.classes.empty() || r.classes[0] != source || !(r.predicted_throughput > 0)) continue;
      const ErrorBar bar = error_bar(t, r.classes);
      if (!bar.known()) continue;
      ++cov.checked;
      cov.inside += bar.holds(r.measured_throughput / r.predicted_throughput);
    }
  }
  return cov;
}

}  // namespace parallax
