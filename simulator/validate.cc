#include "simulator/validate.h"

#include <algorithm>
#include <cmath>

#include "core/units.h"
#include "simulator/lower.h"

namespace parallax {

Result<ValidationRow> predict_record(const MeasuredRun& r, const std::vector<HwProfile>& profiles) {
  const std::string where = r.where.empty() ? r.id + ":" : r.where;
  auto hw = find_profile(profiles, r.gpu, where + "/cluster/gpu");
  if (!hw) return hw.errors();
  Cluster c{hw.value(), r.num_gpus};
  const ParallelPlan p = to_plan(r);
  const ModelSpec model = to_model(r);
  SimulationOptions opt;
  opt.locate = json_locator(where);
  auto rep = simulate(model, c, p, opt);
  if (!rep) return rep.errors();
  const StepReport& s = rep.value();
  ValidationRow row;
  row.id = r.id;
  row.source = r.source;
  row.fits = s.fits;
  if (r.step_time_s) {
    row.metric = "step_time_s";
    row.measured = *r.step_time_s;
    row.predicted = s.step_time_s;
  } else if (r.tokens_per_s_per_gpu) {
    row.metric = "tokens_per_s_per_gpu";
    row.measured = *r.tokens_per_s_per_gpu;
    row.predicted = s.tokens_per_s_per_gpu;
  } else {
    // FLOP/s counted as the record counts them.
    const bool causal =
        r.attention_flops.value_or(AttentionCounting::kFull) == AttentionCounting::kCausal;
    const bool hardware = r.flops_basis == FlopsBasis::kHardware;
    const double tflops =
        step_flops(model, p, causal, hardware) / s.step_time_s / r.num_gpus / kTera;
    if (r.tflops_per_gpu) {
      row.metric = "tflops_per_gpu";
      row.measured = *r.tflops_per_gpu;
      row.predicted = tflops;
    } else {
      row.metric = "mfu";
      row.measured = *r.mfu;
      row.predicted = tflops / c.hw.peak_tflops(p.precision);
    }
  }
  row.error = (row.predicted - row.measured) / row.measured;
  return row;
}

ValidationSummary summarize(std::vector<ValidationRow> rows) {
  ValidationSummary s;
  s.rows = std::move(rows);
  for (const auto& r : s.rows) {
    s.mape += std::abs(r.error);
    s.max_abs_error = std::max(s.max_abs_error, std::abs(r.error));
  }
  if (!s.rows.empty()) s.mape /= static_cast<double>(s.rows.size());
  for (const auto& r : s.rows) {
    auto it = std::find_if(s.by_source.begin(), s.by_source.end(),
                           [&](const SourceSummary& g) { return g.source == r.source; });
    if (it == s.by_source.end()) it = s.by_source.insert(s.by_source.end(), {r.source, 0, 0, 0});
    ++it->n;
    it->mape += std::abs(r.error);
    it->mean_error += r.error;
  }
  for (auto& g : s.by_source) {
    g.mape /= g.n;
    g.mean_error /= g.n;
  }
  return s;
}

}  // namespace parallax
