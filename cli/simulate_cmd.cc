// `parallax simulate`: one training step of a layout.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "simulator/error_bar.h"
#include "simulator/report.h"
#include "simulator/simulate.h"

namespace parallax::cli {

void add_simulate_command(CLI::App& app, int* exit_code) {
  struct Opts {
    LayoutFlags layout;
    std::string format = "table", trace, stack;
    bool full_ranks = false, trace_all = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "simulate", "Predict step time, throughput, MFU and memory of one training layout");
  add_layout_flags(cmd, &o->layout);
  cmd->add_option("--stack", o->stack,
                  "run the layout under this framework's software stack (stacks/*.json: its "
                  "attention kernel, fused or eager ops, recompute granularity, pipeline sends, "
                  "CP exchange, overlap); flags given beside it win. See `parallax stacks`");
  cmd->add_option("--format", o->format, "output format: table | json")
      ->check(CLI::IsMember({"table", "json"}));
  cmd->add_option("--trace", o->trace,
                  "write a Chrome/Perfetto trace of the step to this file: the operators of the "
                  "first 4 microbatches of each stage, the data-parallel and optimizer spans and "
                  "a memory track per rank");
  cmd->add_flag("--trace-all", o->trace_all,
                "the trace keeps every microbatch's operators (large for long pipelines)");
  cmd->add_flag("--full-ranks", o->full_ranks,
                "simulate every rank instead of one per pipeline stage (slow; for checks)");
  cmd->footer(
      "Defaults: llama3.1-70b on 64 x h100-sxm-80gb, tp8 dp8, mbs 1, gbs 128, seq 8192, SP, full "
      "recompute, ZeRO-1.\n"
      "Exit code: 0 fits in memory, 1 out of memory, 2 bad input.");
  cmd->callback([o, exit_code] {
    auto resolved = resolve_run(o->layout);
    if (!resolved) {
      *exit_code = report_errors(resolved.errors());
      return;
    }
    ResolvedRun run_value = resolved.value();
    if (!o->stack.empty()) {
      auto p = with_stack(o->stack, o->layout, run_value.plan);
      if (!p) {
        *exit_code = report_errors(p.errors());
        return;
      }
      run_value.plan = p.value();
    }
    const ResolvedRun* run = &run_value;
    SimulationOptions opt;
    opt.full_ranks = o->full_ranks;
    opt.record_trace = !o->trace.empty();
    auto rep = simulate(run->model, run->cluster, run->plan, opt);
    if (!rep) {
      *exit_code = report_errors(rep.errors());
      return;
    }
    if (!o->trace.empty()) {
      auto w = write_file_atomic(
          o->trace, chrome_trace(rep.value(), TraceOptions{o->trace_all ? 0 : 4}).dump());
      if (!w) {
        *exit_code = report_errors(w.errors());
        return;
      }
    }
    const ErrorBar bar = prediction_bar(run->model, run->cluster, run->plan, o->stack);
    if (o->format == "json")
      std::cout << to_json(rep.value(), &bar).dump(2) << "\n";
    else
      std::cout << format_table(rep.value(), &bar);
    *exit_code = rep->fits ? 0 : 1;
  });
}

}  // namespace parallax::cli
