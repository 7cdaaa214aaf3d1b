// `parallax validate`: predict measured-run records and report the error.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "cli/inputs.h"
#include "core/measured_run.h"
#include "planner/replan.h"
#include "simulator/validate.h"

namespace parallax::cli {
namespace {

/// The records of a file, and every line that is no record, with where and why.
struct Records {
  std::vector<MeasuredRun> runs;
  Diagnostics rejected;
};

/// Reads every line; a bad line is rejected and skipped, never the whole file. Fails only when
/// the file cannot be read or holds no line at all.
Result<Records> read_records(const std::string& path) {
  auto text = read_file(path);
  if (!text) return text.errors();
  std::istringstream in(text.value());
  std::string line;
  Records out;
  std::map<std::string, int> first_line;  // record id -> the line that gave it
  int lines = 0;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    ++lines;
    const std::string where = path + ":" + std::to_string(n);
    auto j = parse_json(line, path, n);
    if (!j) {
      out.rejected.insert(out.rejected.end(), j.errors().begin(), j.errors().end());
      continue;
    }
    auto r = measured_run_from_json(j.value(), where + ":");
    if (!r) {
      out.rejected.insert(out.rejected.end(), r.errors().begin(), r.errors().end());
      continue;
    }
    if (auto seen = first_line.find(r->id); seen != first_line.end()) {
      out.rejected.push_back({where, "record id '" + r->id + "' given twice",
                              "first on line " + std::to_string(seen->second) +
                                  "; each run counts once in the error"});
      continue;
    }
    first_line.emplace(r->id, n);
    out.runs.push_back(r.value());
  }
  if (lines == 0)
    return Diagnostic{path, "no records", "one JSON object per line, see validation/SCHEMA.md"};
  return out;
}

/// Each rejected record as a warning; an error when no record is left to predict.
int report_rejected(const Diagnostics& rejected, size_t predicted, const std::string& path) {
  Diagnostics notes;
  for (const auto& d : rejected) notes.push_back({d.where, d.what + " (record skipped)", d.hint});
  report_warnings(notes);
  if (predicted > 0) return 0;
  return report_errors({Diagnostic{path, "no record could be predicted",
                                   std::to_string(rejected.size()) + " rejected; see above"}});
}

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
          {"rejected", skipped},
          {"fill_rule", kFillRule}};
}

/// Predicts every record, completing the layouts of records with unknown degrees first.
std::vector<ValidationRow> predict_all(const std::vector<MeasuredRun>& runs,
                                       const std::vector<HwProfile>& profiles,
                                       Diagnostics* rejected) {
  std::vector<ValidationRow> rows;
  for (const auto& r : runs) {
    std::optional<ParallelPlan> completed;
    if (!unknown_degrees(r).empty()) {
      auto hw = find_profile(profiles, r.gpu, r.where + "/cluster/gpu");
      auto plan = hw ? complete_layout(r, hw.value()) : Result<ParallelPlan>(hw.errors());
      if (!plan) {
        rejected->insert(rejected->end(), plan.errors().begin(), plan.errors().end());
        continue;
      }
      completed = plan.value();
    }
    auto row = predict_record(r, profiles, completed);
    if (!row) {
      rejected->insert(rejected->end(), row.errors().begin(), row.errors().end());
      continue;
    }
    rows.push_back(row.value());
    if (completed) rows.back().completed = layout_label(*completed);
  }
  return rows;
}

/// "source,part" -> {"source", "part"}; "all" -> every dimension; an unknown one is an error.
Result<std::vector<std::string>> parse_by(const std::string& list) {
  if (list == "all") return class_dimensions();
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string d; std::getline(in, d, ',');) {
    const auto& dims = class_dimensions();
    if (std::find(dims.begin(), dims.end(), d) == dims.end())
      return Diagnostic{"--by", "unknown class '" + printable(d) + "'",
                        "valid: " + class_dimension_names() + ", or all"};
    if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  }
  return out;
}

/// The planner's best plan against each record's published layout.
int print_replan(const std::vector<MeasuredRun>& runs, const std::vector<HwProfile>& profiles,
                 bool json, Diagnostics rejected, const std::string& path) {
  std::vector<ReplanRow> rows;
  for (const auto& r : runs) {
    auto row = replan_record(r, profiles, SearchOptions{});
    if (row)
      rows.push_back(row.value());
    else
      rejected.insert(rejected.end(), row.errors().begin(), row.errors().end());
  }
  if (const int rc = report_rejected(rejected, rows.size(), path); rc != 0) return rc;
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

}  // namespace

void add_validate_command(CLI::App& app, int* exit_code) {
  struct Opts {
    std::string file, format = "table", profiles_dir, by = "source";
    bool replan = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "validate", "Predict measured runs (JSON Lines, validation/SCHEMA.md) and report the error");
  cmd->add_option("file", o->file, "records, one JSON object per line")->required();
  cmd->add_option("--format", o->format, "output format: table | json")
      ->check(CLI::IsMember({"table", "json"}));
  cmd->add_option("--profiles-dir", o->profiles_dir,
                  "directory of extra hardware profiles (*.json)");
  cmd->add_flag("--replan", o->replan,
                "also search each record's best layout and compare it with the published one "
                "(both simulated)");
  cmd->add_option("--by", o->by,
                  "classes to break the error down by, comma-separated: " +
                      class_dimension_names() + ", or all (default: source)");
  cmd->footer(std::string("Fill rule: ") + kFillRule);
  cmd->callback([o, exit_code] {
    const auto by = parse_by(o->by);
    if (!by) {
      *exit_code = report_errors(by.errors());
      return;
    }
    auto records = read_records(o->file);
    if (!records) {
      *exit_code = report_errors(records.errors());
      return;
    }
    auto profiles = load_profiles(o->profiles_dir);
    if (!profiles) {
      *exit_code = report_errors(profiles.errors());
      return;
    }
    const std::vector<MeasuredRun>& runs = records->runs;
    if (o->replan) {
      *exit_code =
          print_replan(runs, profiles.value(), o->format == "json", records->rejected, o->file);
      return;
    }
    Diagnostics rejected = records->rejected;
    std::vector<ValidationRow> rows = predict_all(runs, profiles.value(), &rejected);
    if (const int rc = report_rejected(rejected, rows.size(), o->file); rc != 0) {
      *exit_code = rc;
      return;
    }
    const ValidationSummary s = summarize(std::move(rows));
    if (o->format == "json") {
      std::cout << summary_json(s, by.value(), rejected).dump(2) << "\n";
    } else {
      std::printf("fill rule: %s\n\n", kFillRule);
      print_table(s, rejected.size(), by.value());
    }
    *exit_code = 0;
  });
}

}  // namespace parallax::cli
