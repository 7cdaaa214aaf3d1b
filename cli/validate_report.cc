// `parallax validate`'s output: the table, the classes, the sweeps and the JSON.
#include "cli/validate_report.h"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/inputs.h"
#include "planner/replan.h"

namespace parallax::cli {
namespace {

void print_classes(const ValidationSummary& s, const std::vector<std::string>& by) {
  for (const auto& dim : by) {
    std::printf("\nby %s:\n  %-5s %7s %7s %8s  %s\n", dim.c_str(), "n", "MAPE", "max", "bias",
                "class");
    for (const auto& g : summarize_by(s.rows, dim))
      std::printf("  %-5d %6.1f%% %6.1f%% %+7.1f%%  %s\n", g.n, 100 * g.mape, 100 * g.max_abs_error,
                  100 * g.mean_error, g.name.c_str());
  }
}

void print_sweeps(const ValidationSummary& s) {
  if (s.sweeps.empty()) return;
  std::printf("\nrank correlation within sweeps (Spearman, predicted vs measured throughput):\n");
  for (const auto& w : s.sweeps)
    std::printf("  n=%-3d rho %+5.2f  %s\n", w.n, w.spearman, w.sweep.c_str());
  std::printf("  mean rho %+.2f over %zu sweeps\n", s.mean_spearman, s.sweeps.size());
}

}  // namespace

void print_table(const ValidationSummary& s, size_t rejected, const std::vector<std::string>& by) {
  std::printf("%-40s %-22s %12s %12s %9s\n", "id", "metric", "measured", "predicted", "error");
  for (const auto& r : s.rows) {
    std::printf("%-40s %-22s %12.4g %12.4g %+8.1f%%%s\n", r.id.c_str(), r.metric.c_str(),
                r.measured, r.predicted, 100 * r.error,
                r.fits ? "" : "  (filled plan does not fit in memory)");
    if (!r.completed.empty()) std::printf("  completed by search: %s\n", r.completed.c_str());
  }
  std::printf(
      "\nn=%zu  MAPE %.1f%%  max |error| %.1f%%  bias %+.1f%%  completed %d  rejected %zu\n",
      s.rows.size(), 100 * s.mape, 100 * s.max_abs_error, 100 * s.mean_error, s.completed,
      rejected);
  if (s.bar_checked > 0)
    std::printf(
        "error bars (80%% band from the other sources' runs): measured inside for %d of %d "
        "(%.0f%%)\n",
        s.bar_inside, s.bar_checked, 100.0 * s.bar_inside / s.bar_checked);
  print_classes(s, by);
  print_sweeps(s);
}

Json summary_json(const ValidationSummary& s, const std::vector<std::string>& by,
                  const Diagnostics& rejected) {
  Json recs = Json::array();
  for (const auto& r : s.rows) {
    Json j = {{"id", r.id},
              {"metric", r.metric},
              {"measured", r.measured},
              {"predicted", r.predicted},
              {"error", r.error},
              {"fits", r.fits}};
    for (size_t k = 0; k < r.classes.size(); ++k) j[class_dimensions()[k]] = r.classes[k];
    if (!r.sweep.empty()) j["sweep"] = r.sweep;
    if (!r.completed.empty()) j["completed_layout"] = r.completed;
    recs.push_back(j);
  }
  Json classes = Json::object();
  for (const auto& dim : by) {
    Json groups = Json::array();
    for (const auto& g : summarize_by(s.rows, dim))
      groups.push_back({{"class", g.name},
                        {"n", g.n},
                        {"mape", g.mape},
                        {"max_abs_error", g.max_abs_error},
                        {"mean_error", g.mean_error}});
    classes[dim] = groups;
  }
  Json sweeps = Json::array();
  for (const auto& w : s.sweeps)
    sweeps.push_back({{"sweep", w.sweep}, {"n", w.n}, {"spearman", w.spearman}});
  Json skipped = Json::array();
  for (const auto& d : rejected)
    skipped.push_back({{"where", d.where}, {"reason", d.what}, {"hint", d.hint}});
  return {{"records", recs},
          {"by", classes},
          {"sweeps", sweeps},
          {"mean_spearman", s.mean_spearman},
          {"mape", s.mape},
          {"max_abs_error", s.max_abs_error},
          {"mean_error", s.mean_error},
          {"n", s.rows.size()},
          {"completed", s.completed},
          {"error_bars", {{"inside", s.bar_inside}, {"checked", s.bar_checked}}},
          {"rejected", skipped},
          {"fill_rule", kFillRule}};
}

/// Each rejected record as a warning; an error when no record is left to predict.
int report_rejected(const Diagnostics& rejected, size_t predicted,
                    const std::vector<std::string>& paths) {
  Diagnostics notes;
  for (const auto& d : rejected) notes.push_back({d.where, d.what + " (record skipped)", d.hint});
  report_warnings(notes);
  if (predicted > 0) return 0;
  return report_errors(
      {Diagnostic{paths.size() == 1 ? paths.front() : "validate", "no record could be predicted",
                  std::to_string(rejected.size()) + " rejected; see above"}});
}

/// The planner's best plan against each record's published layout.
int print_replan(const std::vector<MeasuredRun>& runs, const std::vector<HwProfile>& profiles,
                 bool json, Diagnostics rejected, const std::vector<std::string>& paths) {
  std::vector<ReplanRow> rows;
  for (const auto& r : runs) {
    auto row = replan_record(r, profiles, SearchOptions{});
    if (row)
      rows.push_back(row.value());
    else
      rejected.insert(rejected.end(), row.errors().begin(), row.errors().end());
  }
  if (const int rc = report_rejected(rejected, rows.size(), paths); rc != 0) return rc;
  if (json) {
    Json out = Json::array();
    for (const auto& r : rows)
      out.push_back({{"id", r.id},
                     {"published_layout", r.published_layout},
                     {"published_step_s", r.published_step_s},
                     {"published_fits", r.published_fits},
                     {"best_layout", r.best_layout},
                     {"best_step_s", r.best_step_s},
                     {"gain", r.gain}});
    std::cout << Json{{"replan", out}}.dump(2) << "\n";
    return 0;
  }
  size_t w = 20;
  for (const auto& r : rows) w = std::max({w, r.published_layout.size(), r.best_layout.size()});
  std::printf("%-28s %-*s %9s  %-*s %9s  %s\n", "record", static_cast<int>(w), "published layout",
              "step s", static_cast<int>(w), "planner's best", "step s", "gain");
  int slower = 0;
  for (const auto& r : rows) {
    std::printf("%-28s %-*s %9.3f%s %-*s %9.3f  %+.1f%%\n", r.id.c_str(), static_cast<int>(w),
                r.published_layout.c_str(), r.published_step_s, r.published_fits ? " " : "!",
                static_cast<int>(w), r.best_layout.c_str(), r.best_step_s, 100 * r.gain);
    slower += r.gain < 0;
  }
  std::printf(
      "\n%zu records; the planner's best is slower than the published layout in %d "
      "(! = the published layout does not fit per the simulator)\n",
      rows.size(), slower);
  return 0;
}

}  // namespace parallax::cli
