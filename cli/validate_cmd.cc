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
#include "cli/validate_report.h"
#include "core/measured_run.h"
#include "planner/replan.h"
#include "simulator/error_bar.h"
#include "simulator/validate.h"

namespace parallax::cli {
namespace {

/// The records of a file, and every line that is no record, with where and why.
struct Records {
  std::vector<MeasuredRun> runs;
  Diagnostics rejected;
};

/// Reads every line of every file; a bad line is rejected and skipped, never the whole file.
/// Fails only when a file cannot be read or holds no line at all. An id counts once over all.
Result<Records> read_records(const std::vector<std::string>& paths) {
  Records out;
  std::map<std::string, std::string> first;  // record id -> where it was first given
  for (const auto& path : paths) {
    auto text = read_file(path);
    if (!text) return text.errors();
    std::istringstream in(text.value());
    std::string line;
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
      if (auto seen = first.find(r->id); seen != first.end()) {
        out.rejected.push_back(
            {where, "record id '" + r->id + "' given twice",
             "first at " + seen->second + "; each run counts once in the error"});
        continue;
      }
      first.emplace(r->id, where);
      out.runs.push_back(r.value());
    }
    if (lines == 0)
      return Diagnostic{path, "no records", "one JSON object per line, see validation/SCHEMA.md"};
  }
  return out;
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

}  // namespace

void add_validate_command(CLI::App& app, int* exit_code) {
  struct Opts {
    std::vector<std::string> files;
    std::string format = "table", profiles_dir, by = "source", residuals_out;
    bool replan = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "validate", "Predict measured runs (JSON Lines, validation/SCHEMA.md) and report the error");
  cmd->add_option("files", o->files, "record files (JSON Lines, one record per line)")->required();
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
  cmd->add_option("--residuals-out", o->residuals_out,
                  "write the residual table behind every prediction's error bar (measured over "
                  "predicted throughput per class) to this file; the corpus's is "
                  "validation/residuals.json, built into the binary");
  cmd->footer(std::string("Fill rule: ") + kFillRule);
  cmd->callback([o, exit_code] {
    const auto by = parse_by(o->by);
    if (!by) {
      *exit_code = report_errors(by.errors());
      return;
    }
    auto records = read_records(o->files);
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
          print_replan(runs, profiles.value(), o->format == "json", records->rejected, o->files);
      return;
    }
    Diagnostics rejected = records->rejected;
    std::vector<ValidationRow> rows = predict_all(runs, profiles.value(), &rejected);
    if (const int rc = report_rejected(rejected, rows.size(), o->files); rc != 0) {
      *exit_code = rc;
      return;
    }
    if (!o->residuals_out.empty()) {
      auto w = write_file_atomic(o->residuals_out,
                                 residual_table_to_json(residual_table(rows)).dump(2) + "\n");
      if (!w) {
        *exit_code = report_errors(w.errors());
        return;
      }
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
