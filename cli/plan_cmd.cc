// `parallax plan`: search every layout, rank by simulated throughput, emit a launch config.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/plan_inputs.h"
#include "planner/launch/launch.h"
#include "planner/plan_report.h"
#include "planner/search.h"

namespace parallax::cli {
namespace {

/// A progress line on stderr when it is a terminal and the search has run for over a second.
std::function<void(const char*, int64_t, int64_t)> progress_bar(bool enabled) {
  if (!enabled || !isatty(STDERR_FILENO)) return {};
  const auto start = std::chrono::steady_clock::now();
  return [start](const char* phase, int64_t done, int64_t total) {
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (s < 1.0) return;
    const int width = 30;
    const int fill = total > 0 ? static_cast<int>(width * done / total) : width;
    std::fprintf(stderr, "\r%-10s [%s%s] %lld/%lld  %.1fs", phase, std::string(fill, '#').c_str(),
                 std::string(width - fill, '.').c_str(), static_cast<long long>(done),
                 static_cast<long long>(total), s);
    if (done == total && std::string(phase) == "simulating") std::fprintf(stderr, "\n");
    std::fflush(stderr);
  };
}

}  // namespace

void add_plan_command(CLI::App& app, int* exit_code) {
  struct Opts {
    LayoutFlags layout;
    PlanFlags plan;
    std::string format = "table", out, emit;
    int top = 5;
    bool explain = false, no_progress = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "Search every layout of a model on a cluster and rank them by simulated throughput");
  add_layout_flags(cmd, &o->layout);
  add_plan_flags(cmd, &o->plan);
  cmd->add_option("--top", o->top, "how many plans to show")->check(CLI::Range(1, 1000));
  cmd->add_option("--format", o->format, "output format: table | json")
      ->check(CLI::IsMember({"table", "json"}));
  cmd->add_flag("--explain", o->explain,
                "say how many candidates each rule pruned and why the winner beats the runner-up");
  cmd->add_option("--out", o->out, "write the best plan to this plan file (JSON)");
  cmd->add_option("--emit", o->emit,
                  std::string("print the best plan's launch config: ") + launch_target_names());
  cmd->add_flag("--no-progress", o->no_progress, "no progress bar on the terminal");
  cmd->footer(
      "Layout flags (--tp, --pp, --cp, --dp, --ep, --etp, --vpp, --mbs, --zero, --fsdp, --sp, "
      "--recompute, --schedule, --cp-comm) pin that dimension; everything else is searched.\n"
      "Defaults: llama3.1-70b on 64 x h100-sxm-80gb, gbs 128, seq 8192, bf16.\n"
      "Exit code: 0 a plan was found, 1 nothing fits, 2 bad input.");
  cmd->callback([o, exit_code] {
    auto req = resolve_plan_request(o->layout, o->plan);
    if (!req) {
      *exit_code = report_errors(req.errors());
      return;
    }
    std::optional<LaunchTarget> emit;
    if (!o->emit.empty()) {
      emit = parse_launch_target(o->emit);
      if (!emit) {
        *exit_code = report_errors({{"--emit", "unknown launch target '" + o->emit + "'",
                                     std::string("valid: ") + launch_target_names()}});
        return;
      }
    }
    SearchOptions opt = search_options(o->plan);
    opt.top_k = std::max(o->top, 2);  // the runner-up is needed to explain the winner
    opt.progress = progress_bar(!o->no_progress);
    auto found = search_plans(req->request, opt);
    if (!found) {
      const bool bad_input = found.errors().front().where != "plan";
      *exit_code = bad_input ? report_errors(found.errors()) : (report_errors(found.errors()), 1);
      return;
    }
    SearchResult result = std::move(found.value());
    const StepReport& best = result.top.front().report;
    if (!o->out.empty()) {
      auto w = write_file_atomic(o->out, plan_file_json(req->request.model, best).dump(2) + "\n");
      if (!w) {
        *exit_code = report_errors(w.errors());
        return;
      }
    }
    std::optional<Result<std::string>> launch;
    if (emit) {
      Cluster c = req->request.cluster;
      c.num_gpus = best.gpus;
      launch = emit_launch(*emit, LaunchRequest{req->request.model, c, best.plan});
    }
    if (result.top.size() > static_cast<size_t>(o->top)) result.top.resize(o->top);
    const std::vector<ErrorBar> bars =
        plan_error_bars(result, req->request.model, req->request.cluster.hw);
    if (o->format == "json") {
      Json j = plan_search_json(result, opt, &bars);
      if (launch && *launch) j["launch"] = {{"target", o->emit}, {"text", launch->value()}};
      std::cout << j.dump(2) << "\n";
    } else {
      std::cout << format_plan_table(result, opt) << format_error_bars(result, bars);
      if (o->explain) std::cout << "\n" << explain_search(result);
      if (launch && *launch) std::cout << "\n" << launch->value();
    }
    if (launch && !*launch) {
      std::cerr << "error: the best plan cannot be emitted for " << o->emit << ":\n";
      *exit_code = report_errors(launch->errors());
      return;
    }
    *exit_code = 0;
  });
}

void add_launch_command(CLI::App& app, int* exit_code) {
  struct Opts {
    LayoutFlags layout;
    std::string target, out, torchtitan_version = "0.2.2";
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "launch", "Write the launch config of a plan file (or of layout flags) for a framework");
  cmd->add_option("--torchtitan-version", o->torchtitan_version,
                  "with --target torchtitan: 0.2.2 (the release, a TOML job config; the rules "
                  "plan checks) or main (b5bcd76c, a Python configuration module)")
      ->check(CLI::IsMember({"0.2.2", "main"}));
  add_layout_flags(cmd, &o->layout);
  cmd->add_option("--target", o->target, std::string("framework: ") + launch_target_names())
      ->required();
  cmd->add_option("--out", o->out, "write to this file instead of standard output");
  cmd->footer("Example: parallax launch --plan plan.json --target megatron");
  cmd->callback([o, exit_code] {
    auto target = parse_launch_target(o->target);
    if (target == LaunchTarget::kTorchTitan && o->torchtitan_version == "main")
      target = LaunchTarget::kTorchTitanMain;
    if (!target) {
      *exit_code = report_errors({{"--target", "unknown launch target '" + o->target + "'",
                                   std::string("valid: ") + launch_target_names()}});
      return;
    }
    auto run = resolve_run(o->layout);
    if (!run) {
      *exit_code = report_errors(run.errors());
      return;
    }
    auto text = emit_launch(*target, LaunchRequest{run->model, run->cluster, run->plan});
    if (!text) {
      *exit_code = report_errors(text.errors());
      return;
    }
    if (o->out.empty()) {
      std::cout << text.value();
    } else if (auto w = write_file_atomic(o->out, text.value()); !w) {
      *exit_code = report_errors(w.errors());
      return;
    }
    // DeepSpeed's JSON has no comments; the other formats carry their notes inside.
    if (*target == LaunchTarget::kDeepSpeed)
      for (const std::string& n :
           launch_notes(*target, LaunchRequest{run->model, run->cluster, run->plan}))
        std::cerr << "note: " << n << "\n";
    *exit_code = 0;
  });
}

}  // namespace parallax::cli
