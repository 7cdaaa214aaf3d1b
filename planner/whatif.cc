#include "planner/whatif.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/text.h"

namespace parallax {
namespace {

/// The layout without batch and sequence (which a sweep may vary on purpose).
std::string layout_key(const ParallelPlan& p) { return layout_label(p); }

Diagnostics check_variable(const WhatIfVariable& v, const char* where) {
  Diagnostics d;
  if (v.size() == 0) d.push_back({where, "no values to sweep", "e.g. gpus=256,512,1024"});
  for (double x : v.values)
    if (!(x > 0))
      d.push_back({where,
                   std::string(to_string(v.axis)) + " values must be positive, got " +
                       format_number("%g", x),
                   ""});
  if (v.axis == WhatIfAxis::kGpus || v.axis == WhatIfAxis::kSeq ||
      v.axis == WhatIfAxis::kGlobalBatch)
    for (double x : v.values)
      if (x != std::floor(x))
        d.push_back({where,
                     std::string(to_string(v.axis)) + " values must be whole, got " +
                         format_number("%g", x),
                     ""});
  return d;
}

}  // namespace

const char* whatif_axis_names() { return "gpus, nvlink-bw, nic-bw, hbm, tflops, seq, gbs, model"; }

std::optional<WhatIfAxis> parse_whatif_axis(const std::string& s) {
  for (WhatIfAxis a :
       {WhatIfAxis::kGpus, WhatIfAxis::kNvlinkBw, WhatIfAxis::kNicBw, WhatIfAxis::kHbm,
        WhatIfAxis::kPeakTflops, WhatIfAxis::kSeq, WhatIfAxis::kGlobalBatch, WhatIfAxis::kModel})
    if (s == to_string(a)) return a;
  return std::nullopt;
}

const char* to_string(WhatIfAxis a) {
  switch (a) {
    case WhatIfAxis::kGpus:
      return "gpus";
    case WhatIfAxis::kNvlinkBw:
      return "nvlink-bw";
    case WhatIfAxis::kNicBw:
      return "nic-bw";
    case WhatIfAxis::kHbm:
      return "hbm";
    case WhatIfAxis::kPeakTflops:
      return "tflops";
    case WhatIfAxis::kSeq:
      return "seq";
    case WhatIfAxis::kGlobalBatch:
      return "gbs";
    case WhatIfAxis::kModel:
      return "model";
  }
  return "?";
}

std::string WhatIfVariable::label(size_t i) const {
  if (axis == WhatIfAxis::kModel) return models[i].name;
  return format_number("%g", values[i]);
}

PlanRequest apply_point(const PlanRequest& base, const WhatIfVariable& v, size_t i) {
  PlanRequest r = base;
  HwProfile& hw = r.cluster.hw;
  const double x = v.axis == WhatIfAxis::kModel ? 0 : v.values[i];
  switch (v.axis) {
    case WhatIfAxis::kGpus:
      r.cluster.num_gpus = static_cast<int>(x);
      break;
    case WhatIfAxis::kNvlinkBw:
      hw.scale_up_bw_gbps = x;
      break;
    case WhatIfAxis::kNicBw:
      hw.scale_out_bw_gbps = x;
      break;
    case WhatIfAxis::kHbm:
      hw.hbm_gib = x;
      break;
    case WhatIfAxis::kPeakTflops:
      // The dense bf16 peak; fp8 keeps its ratio to it.
      hw.fp8_tflops *= x / hw.bf16_tflops;
      hw.bf16_tflops = x;
      break;
    case WhatIfAxis::kSeq:
      r.seq_len = static_cast<int64_t>(x);
      break;
    case WhatIfAxis::kGlobalBatch:
      r.global_batch = static_cast<int64_t>(x);
      break;
    case WhatIfAxis::kModel:
      r.model = v.models[i];
      break;
  }
  if (v.axis != WhatIfAxis::kGpus && v.axis != WhatIfAxis::kModel && v.axis != WhatIfAxis::kSeq &&
      v.axis != WhatIfAxis::kGlobalBatch)
    hw.name += " (" + std::string(to_string(v.axis)) + "=" + format_number("%g", x) + ")";
  return r;
}

Result<WhatIfResult> run_whatif(const PlanRequest& base, const SearchOptions& opt,
                                const WhatIfVariable& first,
                                const std::optional<WhatIfVariable>& second) {
  Diagnostics d = check_variable(first, "--vary");
  if (second) {
    const Diagnostics d2 = check_variable(*second, "--vary2");
    d.insert(d.end(), d2.begin(), d2.end());
    if (second->axis == first.axis)
      d.push_back({"--vary2", "the second variable repeats the first", ""});
  }
  if (!d.empty()) return d;
  WhatIfResult out;
  out.first = first;
  out.second = second;
  const size_t nb = second ? second->size() : 1;
  for (size_t b = 0; b < nb; ++b) {
    std::string previous;
    double first_per_gpu = 0;
    for (size_t a = 0; a < first.size(); ++a) {
      PlanRequest r = apply_point(base, first, a);
      if (second) r = apply_point(r, *second, b);
      WhatIfPoint pt;
      pt.a = a;
      pt.b = b;
      auto found = search_plans(r, opt);
      if (found) {
        pt.best = found->top.front();
        const std::string key = layout_key(pt.best->report.plan);
        pt.layout_changed = !previous.empty() && key != previous;
        previous = key;
        const double per_gpu = pt.best->report.tokens_per_s_per_gpu;
        if (first_per_gpu == 0) first_per_gpu = per_gpu;
        if (first.axis == WhatIfAxis::kGpus) pt.scaling_efficiency = per_gpu / first_per_gpu;
      } else {
        pt.why_none = found.errors().front().str();
        previous.clear();
      }
      out.points.push_back(std::move(pt));
    }
  }
  return out;
}

std::string format_whatif_table(const WhatIfResult& r) {
  const bool gpus = r.first.axis == WhatIfAxis::kGpus;
  size_t w = 8;
  for (const auto& p : r.points)
    if (p.best) w = std::max(w, layout_label(p.best->report.plan).size() + 2);
  std::string out;
  if (r.second) out += pad_right(to_string(r.second->axis), 12);
  out += pad_right(to_string(r.first.axis), 12) + pad_right("best layout", w) +
         pad_right("step s", 9) + pad_right("tokens/s", 12) + pad_right("tok/s/GPU", 11) +
         pad_right("MFU", 7);
  if (gpus) out += pad_right("scaling", 9);
  // With a token budget the search gives each plan its days and GPU-hours.
  const bool budget = std::any_of(r.points.begin(), r.points.end(), [](const WhatIfPoint& p) {
    return p.best && p.best->gpu_hours > 0;
  });
  if (budget) out += pad_right("days", 8) + pad_right("GPU-hours", 11);
  out += "\n";
  for (const WhatIfPoint& p : r.points) {
    if (r.second) out += pad_right(r.second->label(p.b), 12);
    out += pad_right(r.first.label(p.a), 12);
    if (!p.best) {
      out += "no plan fits\n";
      continue;
    }
    const StepReport& rep = p.best->report;
    out += pad_right(layout_label(rep.plan), w) +
           pad_right(format_number("%.3f", rep.step_time_s), 9) +
           pad_right(format_number("%.4g", rep.tokens_per_s), 12) +
           pad_right(format_number("%.0f", rep.tokens_per_s_per_gpu), 11) +
           pad_right(format_number("%.1f%%", 100 * rep.mfu), 7);
    if (gpus) out += pad_right(format_number("%.0f%%", 100 * p.scaling_efficiency), 9);
    if (budget)
      out += pad_right(format_number("%.1f", p.best->time_to_train_days), 8) +
             pad_right(format_number("%.3g", p.best->gpu_hours), 11);
    if (p.layout_changed) out += "<- best layout changes";
    out += "\n";
  }
  return out;
}

namespace {

/// The axis with its unit, for a plot.
std::string axis_title(WhatIfAxis a) {
  switch (a) {
    case WhatIfAxis::kGpus:
      return "GPUs";
    case WhatIfAxis::kNvlinkBw:
      return "scale-up (NVLink) bandwidth, GB/s per GPU";
    case WhatIfAxis::kNicBw:
      return "scale-out (NIC) bandwidth, GB/s per GPU";
    case WhatIfAxis::kHbm:
      return "HBM capacity, GiB";
    case WhatIfAxis::kPeakTflops:
      return "dense bf16 peak, TFLOP/s";
    case WhatIfAxis::kSeq:
      return "sequence length, tokens";
    case WhatIfAxis::kGlobalBatch:
      return "global batch, sequences";
    case WhatIfAxis::kModel:
      return "model";
  }
  return to_string(a);
}

/// "tp8 pp4 dp2 cp1": the degrees of a layout, short enough to print beside a point.
std::string short_layout(const ParallelPlan& p) {
  std::string s =
      "tp" + std::to_string(p.tp) + " pp" + std::to_string(p.pp) + " dp" + std::to_string(p.dp);
  if (p.cp > 1) s += " cp" + std::to_string(p.cp);
  if (p.ep > 1) s += " ep" + std::to_string(p.ep);
  return s;
}

/// "3.49M GPU-h", "812k GPU-h", "95 GPU-h".
std::string gpu_hours_text(double h) {
  if (h >= 1e6) return format_number("%.2fM GPU-h", h / 1e6);
  if (h >= 1e3) return format_number("%.0fk GPU-h", h / 1e3);
  return format_number("%.0f GPU-h", h);
}

/// The notes beside a point: its layout, and with a token budget the days and GPU-hours.
std::vector<std::string> point_notes(const RankedPlan& best, bool budget) {
  std::vector<std::string> notes = {short_layout(best.report.plan)};
  if (budget)
    notes.push_back(format_number("%.1f days", best.time_to_train_days) + ", " +
                    gpu_hours_text(best.gpu_hours));
  return notes;
}

}  // namespace

LinePlot whatif_plot(const WhatIfResult& r, const std::string& model_name, double token_budget) {
  LinePlot plot;
  plot.title = "Best layout at each point: " + model_name;
  plot.subtitle = token_budget > 0 ? "days and GPU-hours to train " +
                                         format_number("%.3g", token_budget) + " tokens"
                                   : "layout at each point; --tokens N adds days and GPU-hours";
  plot.x_label = axis_title(r.first.axis);
  plot.y_label = "tokens/s per GPU";
  for (size_t a = 0; a < r.first.size(); ++a) plot.x.push_back(r.first.label(a));
  const size_t nb = r.second ? r.second->size() : 1;
  plot.series.resize(nb);
  for (size_t b = 0; b < nb; ++b)
    plot.series[b].name =
        r.second ? std::string(to_string(r.second->axis)) + "=" + r.second->label(b) : "best plan";
  for (const WhatIfPoint& p : r.points) {
    PlotSeries& s = plot.series[p.b];
    s.y.push_back(p.best ? p.best->report.tokens_per_s_per_gpu
                         : std::numeric_limits<double>::quiet_NaN());
    s.marked.push_back(p.layout_changed);
    s.notes.push_back(p.best ? point_notes(*p.best, token_budget > 0) : std::vector<std::string>{});
  }
  return plot;
}

}  // namespace parallax
