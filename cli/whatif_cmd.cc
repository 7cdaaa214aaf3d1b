// `parallax whatif`: re-plan while one or two things vary; a table and an SVG plot.
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "cli/plan_inputs.h"
#include "core/text.h"
#include "planner/whatif.h"

namespace parallax::cli {
namespace {

/// Why `x` is no value of `axis`, if it is not: every axis is a positive finite quantity, and
/// the counts (GPUs, sequence, batch) are integers within a layout's bounds.
std::optional<std::string> bad_axis_value(WhatIfAxis axis, double x) {
  if (!std::isfinite(x) || x <= 0) return "want a positive finite number";
  double hi = 1e9;  // a hardware figure: GB/s, GiB, TFLOP/s
  if (axis == WhatIfAxis::kGpus) hi = kMaxGpus;
  if (axis == WhatIfAxis::kSeq) hi = static_cast<double>(kMaxSeqLen);
  if (axis == WhatIfAxis::kGlobalBatch) hi = static_cast<double>(kMaxGlobalBatch);
  const bool count =
      axis == WhatIfAxis::kGpus || axis == WhatIfAxis::kSeq || axis == WhatIfAxis::kGlobalBatch;
  if (count && x != std::floor(x)) return "want an integer";
  if (x > hi) return "at most " + format_number("%.0f", hi);
  return std::nullopt;
}

/// "gpus=256,512,1024" or "model=llama3.1-8b,llama3.1-70b".
Result<WhatIfVariable> parse_variable(const std::string& spec, const std::string& flag) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos)
    return Diagnostic{flag, "cannot read '" + text_excerpt(spec, 40) + "'",
                      "write AXIS=v1,v2,... e.g. gpus=256,512"};
  const std::string name = spec.substr(0, eq);
  const auto axis = parse_whatif_axis(name);
  if (!axis)
    return Diagnostic{flag, "unknown axis '" + name + "'",
                      std::string("valid: ") + whatif_axis_names()};
  WhatIfVariable v;
  v.axis = *axis;
  Diagnostics d;
  std::stringstream ss(spec.substr(eq + 1));
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    if (v.axis == WhatIfAxis::kModel) {
      auto m = resolve_model(item, flag);
      if (m)
        v.models.push_back(m.value());
      else
        d.insert(d.end(), m.errors().begin(), m.errors().end());
      continue;
    }
    char* end = nullptr;
    const double x = std::strtod(item.c_str(), &end);
    if (end == item.c_str() || *end != '\0')
      d.push_back({flag, "cannot read '" + text_excerpt(item, 40) + "' as a number", ""});
    else if (auto why = bad_axis_value(v.axis, x))
      d.push_back(
          {flag, to_string(v.axis) + std::string("=") + text_excerpt(item, 40) + ": " + *why, ""});
    else
      v.values.push_back(x);
  }
  if (!d.empty()) return d;
  if (v.size() == 0) return Diagnostic{flag, "no values for " + name, "AXIS=v1,v2,..."};
  return v;
}

}  // namespace

void add_whatif_command(CLI::App& app, int* exit_code) {
  struct Opts {
    LayoutFlags layout;
    PlanFlags plan;
    std::string vary, vary2, svg = "whatif.svg", format = "table";
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "whatif", "Re-plan while one or two things vary; print the effect and plot it as SVG");
  add_layout_flags(cmd, &o->layout);
  add_plan_flags(cmd, &o->plan);
  cmd->add_option("--vary", o->vary,
                  std::string("AXIS=v1,v2,... to sweep; axes: ") + whatif_axis_names() +
                      " (bandwidths in GB/s per GPU, hbm in GiB, tflops dense bf16)")
      ->required();
  cmd->add_option("--vary2", o->vary2, "a second axis: one line of the plot per value");
  cmd->add_option("--svg", o->svg, "where to write the plot (default whatif.svg)");
  cmd->add_option("--format", o->format, "output format: table | json")
      ->check(CLI::IsMember({"table", "json"}));
  cmd->footer(
      "Examples:\n"
      "  parallax whatif --model llama3.1-70b --gbs 512 --vary gpus=128,256,512,1024\n"
      "  parallax whatif --model llama3.1-70b --gpus 256 --gbs 256 --vary nic-bw=12.5,25,50,100 "
      "--vary2 seq=4096,8192");
  cmd->callback([o, exit_code] {
    Diagnostics d;
    auto req = resolve_plan_request(o->layout, o->plan);
    if (!req) d = req.errors();
    auto first = parse_variable(o->vary, "--vary");
    if (!first) d.insert(d.end(), first.errors().begin(), first.errors().end());
    std::optional<WhatIfVariable> second;
    if (!o->vary2.empty()) {
      auto v = parse_variable(o->vary2, "--vary2");
      if (v)
        second = v.value();
      else
        d.insert(d.end(), v.errors().begin(), v.errors().end());
    }
    if (!d.empty()) {
      *exit_code = report_errors(d);
      return;
    }
    const SearchOptions opt = search_options(o->plan);
    auto result = run_whatif(req->request, opt, first.value(), second);
    if (!result) {
      *exit_code = report_errors(result.errors());
      return;
    }
    const bool models =
        first->axis == WhatIfAxis::kModel || (second && second->axis == WhatIfAxis::kModel);
    const LinePlot plot =
        whatif_plot(result.value(), models ? "models" : req->request.model.name, opt.token_budget);
    if (auto w = write_file_atomic(o->svg, render_svg(plot)); !w) {
      *exit_code = report_errors(w.errors());
      return;
    }
    if (o->format == "json") {
      Json points = Json::array();
      for (const WhatIfPoint& p : result->points) {
        Json j = {{to_string(first->axis), result->first.label(p.a)},
                  {"layout_changed", p.layout_changed}};
        if (second) j[to_string(second->axis)] = second->label(p.b);
        if (p.best) {
          const StepReport& r = p.best->report;
          j["layout"] = layout_label(r.plan);
          j["step_time_s"] = r.step_time_s;
          j["tokens_per_s"] = r.tokens_per_s;
          j["tokens_per_s_per_gpu"] = r.tokens_per_s_per_gpu;
          j["mfu"] = r.mfu;
          j["plan"] = plan_to_json(r.plan);
          if (first->axis == WhatIfAxis::kGpus) j["scaling_efficiency"] = p.scaling_efficiency;
        } else {
          j["error"] = p.why_none;
        }
        points.push_back(std::move(j));
      }
      std::cout << Json{{"points", points}, {"svg", o->svg}}.dump(2) << "\n";
    } else {
      std::cout << format_whatif_table(result.value()) << "plot written to " << o->svg << "\n";
    }
    *exit_code = 0;
  });
}

}  // namespace parallax::cli
