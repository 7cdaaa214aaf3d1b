#include "simulator/validate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/units.h"
#include "simulator/error_bar.h"
#include "simulator/lower.h"

namespace parallax {
namespace {

/// GPU-count buckets: single node to one pod, one to a few pods, and the largest runs.
std::string scale_class(int gpus) {
  if (gpus <= 64) return "1-64 GPUs";
  if (gpus <= 512) return "65-512 GPUs";
  if (gpus <= 4096) return "513-4096 GPUs";
  return "4097+ GPUs";
}

/// Sets the row's metric, measured and predicted values: the most direct measurement first.
void compare(const MeasuredRun& r, const ModelSpec& model, const ParallelPlan& p,
             const StepReport& s, double peak_tflops, ValidationRow* row) {
  if (r.step_time_s) {
    row->metric = "step_time_s";
    row->measured = *r.step_time_s;
    row->predicted = s.step_time_s;
  } else if (r.tokens_per_s_per_gpu) {
    row->metric = "tokens_per_s_per_gpu";
    row->measured = *r.tokens_per_s_per_gpu;
    row->predicted = s.tokens_per_s_per_gpu;
  } else {
    // FLOP/s counted as the record counts them.
    const bool causal =
        r.attention_flops.value_or(AttentionCounting::kFull) == AttentionCounting::kCausal;
    const bool hardware = r.flops_basis == FlopsBasis::kHardware;
    const double tflops =
        step_flops(model, p, causal, hardware) / s.step_time_s / r.num_gpus / kTera;
    row->metric = r.tflops_per_gpu ? "tflops_per_gpu" : "mfu";
    row->measured = r.tflops_per_gpu ? *r.tflops_per_gpu : *r.mfu;
    row->predicted = r.tflops_per_gpu ? tflops : tflops / peak_tflops;
  }
  row->error = (row->predicted - row->measured) / row->measured;
  // Step time falls as throughput rises; every other metric is proportional to throughput.
  row->predicted_throughput = s.tokens_per_s_per_gpu;
  row->measured_throughput = row->metric == "step_time_s"
                                 ? s.tokens_per_s_per_gpu * (1 + row->error)
                                 : s.tokens_per_s_per_gpu / (1 + row->error);
}

/// Ranks from 1, ties sharing their mean rank.
std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> rank(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    for (size_t k = i; k <= j; ++k) rank[order[k]] = 0.5 * static_cast<double>(i + j) + 1;
    i = j + 1;
  }
  return rank;
}

std::vector<SweepRank> rank_sweeps(const std::vector<ValidationRow>& rows) {
  std::vector<SweepRank> out;
  std::vector<std::string> seen;
  for (const auto& r : rows) {
    if (r.sweep.empty() || std::find(seen.begin(), seen.end(), r.sweep) != seen.end()) continue;
    seen.push_back(r.sweep);
    std::vector<double> measured, predicted;
    for (const auto& o : rows)
      if (o.sweep == r.sweep) {
        measured.push_back(o.measured_throughput);
        predicted.push_back(o.predicted_throughput);
      }
    if (measured.size() >= 3)
      out.push_back({r.sweep, static_cast<int>(measured.size()), spearman(predicted, measured)});
  }
  return out;
}

}  // namespace

std::vector<std::string> prediction_classes(const std::string& source, const ModelSpec& m,
                                            const std::string& part, Precision precision, int gpus,
                                            const std::string& stack) {
  return {source,
          part,
          m.moe ? "moe" : "dense",
          to_string(precision),
          scale_class(gpus),
          stack.empty() ? "unstated" : stack};
}

const std::vector<std::string>& class_dimensions() {
  static const std::vector<std::string> dims = {"source",    "part",  "kind",
                                                "precision", "scale", "stack"};
  return dims;
}

std::string class_dimension_names() {
  std::string s;
  for (const auto& d : class_dimensions()) s += (s.empty() ? "" : ", ") + d;
  return s;
}

Result<ValidationRow> predict_record(const MeasuredRun& r, const std::vector<HwProfile>& profiles,
                                     const std::optional<ParallelPlan>& completed) {
  const std::string where = r.where.empty() ? r.id + ":" : r.where;
  if (const auto unknown = unknown_degrees(r); !unknown.empty() && !completed)
    return Diagnostic{where + "/parallel/" + unknown.front(),
                      "unknown degree, and no completed layout to predict on",
                      "complete the layout first (complete_layout)"};
  auto hw = find_profile(profiles, r.gpu, where + "/cluster/gpu");
  if (!hw) return hw.errors();
  Cluster c{hw.value(), r.num_gpus};
  const ParallelPlan p = completed ? *completed : to_plan(r);
  const ModelSpec model = to_model(r);
  SimulationOptions opt;
  opt.locate = json_locator(where);
  auto rep = simulate(model, c, p, opt);
  if (!rep) return rep.errors();
  ValidationRow row;
  row.id = r.id;
  row.sweep = r.sweep;
  row.classes =
      prediction_classes(r.source, r.model, r.gpu, r.precision, r.num_gpus, r.stack.framework);
  row.fits = rep->fits;
  compare(r, model, p, rep.value(), c.hw.mfu_peak_tflops(p.precision), &row);
  return row;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.size() < 2) return 0;
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double mean = 0.5 * static_cast<double>(a.size() + 1);
  double cov = 0, va = 0, vb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    cov += (ra[i] - mean) * (rb[i] - mean);
    va += (ra[i] - mean) * (ra[i] - mean);
    vb += (rb[i] - mean) * (rb[i] - mean);
  }
  return va > 0 && vb > 0 ? cov / std::sqrt(va * vb) : 0;
}

ValidationSummary summarize(std::vector<ValidationRow> rows) {
  ValidationSummary s;
  s.rows = std::move(rows);
  for (const auto& r : s.rows) {
    s.mape += std::abs(r.error);
    s.mean_error += r.error;
    s.max_abs_error = std::max(s.max_abs_error, std::abs(r.error));
    s.completed += !r.completed.empty();
  }
  if (!s.rows.empty()) {
    s.mape /= static_cast<double>(s.rows.size());
    s.mean_error /= static_cast<double>(s.rows.size());
  }
  s.sweeps = rank_sweeps(s.rows);
  for (const auto& w : s.sweeps)
    s.mean_spearman += w.spearman / static_cast<double>(s.sweeps.size());
  const BarCoverage bars = leave_one_source_out(s.rows);
  s.bar_inside = bars.inside;
  s.bar_checked = bars.checked;
  return s;
}

std::vector<ClassSummary> summarize_by(const std::vector<ValidationRow>& rows,
                                       const std::string& dimension) {
  const auto& dims = class_dimensions();
  const auto at = std::find(dims.begin(), dims.end(), dimension);
  if (at == dims.end()) return {};
  const size_t k = static_cast<size_t>(at - dims.begin());
  std::vector<ClassSummary> out;
  for (const auto& r : rows) {
    const std::string& name = k < r.classes.size() ? r.classes[k] : dimension;
    auto it =
        std::find_if(out.begin(), out.end(), [&](const ClassSummary& g) { return g.name == name; });
    if (it == out.end()) it = out.insert(out.end(), ClassSummary{name});
    ++it->n;
    it->mape += std::abs(r.error);
    it->mean_error += r.error;
    it->max_abs_error = std::max(it->max_abs_error, std::abs(r.error));
  }
  for (auto& g : out) {
    g.mape /= g.n;
    g.mean_error /= g.n;
  }
  return out;
}

}  // namespace parallax
