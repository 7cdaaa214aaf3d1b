// `parallax serve`: a request-level simulation of serving a model on a deployment (vLLM-style
// continuous batching over a paged KV cache), each engine step priced by the training
// simulator's cost functions.
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "core/json_io.h"
#include "core/text.h"
#include "simulator/serving/serve_sim.h"
#include "simulator/serving/step_cost.h"
#include "simulator/serving/step_shape.h"

namespace parallax::cli {
namespace {

using serving::Deployment;

struct Opts {
  std::string model = "llama3.1-70b", cluster = "h100-sxm-80gb", profiles_dir;
  std::string precision = "bf16", requests_file, format = "table", trace;
  int64_t gpus = kUnset, dp = kUnset;
  int tp = 8, pp = 1, ep = 1;
  double rate = 4;
  int64_t requests = 1000, prompt_len = 1024, output_len = 256;
  uint64_t seed = 1;
  Deployment engine;
  int chunked_prefill = 1;
  int64_t long_prefill = 0;
  double slo_ttft = 0, slo_tpot = 0;
};

Json stats_json(const serving::Stats& s) {
  return Json{{"mean", s.mean}, {"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99}, {"max", s.max}};
}

/// Chrome trace-event JSON: one process per replica, one complete event per engine step.
Json iteration_trace(const serving::ServeResult& r) {
  Json events = Json::array();
  for (const serving::IterationRecord& it : r.iteration_records)
    events.push_back({{"name", it.prefill_tokens > 0 ? "prefill+decode" : "decode"},
                      {"ph", "X"},
                      {"pid", it.replica},
                      {"tid", 0},
                      {"ts", it.start_s * 1e6},
                      {"dur", it.duration_s * 1e6},
                      {"args",
                       {{"prefill_tokens", it.prefill_tokens},
                        {"decode_tokens", it.decode_tokens},
                        {"seqs", it.num_seqs},
                        {"running", it.running_seqs},
                        {"kv_blocks", it.kv_blocks_used}}}});
  return Json{{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

void print_stats(const char* name, const serving::Stats& s, double scale, const char* unit) {
  std::printf("  %-6s mean %8.1f  p50 %8.1f  p90 %8.1f  p99 %8.1f %s\n", name, s.mean * scale,
              s.p50 * scale, s.p90 * scale, s.p99 * scale, unit);
}

int run(Opts o) {
  auto in = resolve_serving_inputs(o.model, o.cluster, o.profiles_dir, o.precision);
  if (!in) return report_errors(in.errors());
  const ModelSpec* model = &in->model;
  const HwProfile* hw = &in->hw;
  Deployment d = o.engine;
  d.tp = o.tp;
  d.pp = o.pp;
  d.ep = o.ep;
  d.precision = in->precision;
  if (o.dp != kUnset)
    d.dp = static_cast<int>(o.dp);
  else if (o.gpus != kUnset)
    d.dp = static_cast<int>(std::max<int64_t>(1, o.gpus / (int64_t{o.tp} * o.pp)));
  const int gpus = o.gpus != kUnset ? static_cast<int>(o.gpus) : d.gpus();
  Diagnostics bad = serving::check_deployment(*model, d, gpus);
  if (o.rate < 0) bad.push_back({"--rate", "must be 0 (all at once) or more", ""});
  if (o.requests_file.empty() && (o.requests < 1 || o.prompt_len < 1 || o.output_len < 1))
    bad.push_back({"--requests", "requests, prompt and output lengths must be at least 1", ""});
  if (!bad.empty()) return report_errors(bad);
  auto budget = serving::kv_budget(*model, *hw, d);
  if (!budget) return report_errors(budget.errors());

  std::vector<serving::Request> requests;
  if (!o.requests_file.empty()) {
    auto text = read_file(o.requests_file);
    if (!text) return report_errors(text.errors());
    auto parsed = serving::parse_requests(text.value(), o.requests_file);
    if (!parsed) return report_errors(parsed.errors());
    requests = std::move(parsed).value();
  } else {
    requests = serving::poisson_requests(o.requests, o.rate, o.prompt_len, o.output_len, o.seed);
  }
  const serving::ServeConfig config =
      serving::engine_config(d, budget->blocks, o.chunked_prefill != 0, o.long_prefill);
  const serving::StepCost cost(*model, *hw, d);
  auto result = serving::simulate_serving(
      requests, config,
      [&cost](const serving::IterationBatch& b) { return cost.time_s(serving::step_shape(b)); },
      serving::SloSpec{o.slo_ttft, o.slo_tpot}, !o.trace.empty());
  if (!result) return report_errors(result.errors());
  const serving::ServeResult& r = result.value();
  if (!o.trace.empty()) {
    auto w = write_file_atomic(o.trace, iteration_trace(r).dump());
    if (!w) return report_errors(w.errors());
  }
  if (o.format == "json") {
    Json j = {{"model", model->name},
              {"cluster", hw->name},
              {"deployment",
               {{"gpus", d.gpus()}, {"tp", d.tp}, {"pp", d.pp}, {"dp", d.dp}, {"ep", d.ep}}},
              {"requests", static_cast<int64_t>(r.requests.size())},
              {"duration_s", r.duration_s},
              {"requests_per_s", r.requests_per_s},
              {"throughput_tokens_per_s", r.output_tokens_per_s},
              {"output_tokens_per_s_per_gpu", r.output_tokens_per_s / d.gpus()},
              {"total_tokens_per_s", r.total_tokens_per_s},
              {"goodput_requests_per_s", r.goodput_requests_per_s},
              {"ttft_s", stats_json(r.ttft_s)},
              {"tpot_s", stats_json(r.tpot_s)},
              {"itl_s", stats_json(r.itl_s)},
              {"e2e_s", stats_json(r.e2e_s)},
              {"queue_s", stats_json(r.queue_s)},
              {"preemptions", r.preemptions},
              {"iterations", r.iterations},
              {"kv_cache",
               {{"blocks", budget->blocks},
                {"tokens", budget->tokens()},
                {"gib_per_gpu", budget->kv_gib},
                {"weights_gib_per_gpu", budget->weights_gib},
                {"activation_gib_per_gpu", budget->activation_gib},
                {"utilization_mean", r.kv_utilization_mean},
                {"utilization_max", r.kv_utilization_max}}}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("%s on %d x %s: tp%d pp%d dp%d ep%d, %s\n", model->name.c_str(), d.gpus(),
              hw->name.c_str(), d.tp, d.pp, d.dp, d.ep, to_string(d.precision));
  std::printf(
      "  KV cache   %lld blocks of %d (%lld tokens) per replica: %.1f GiB a GPU after %.1f GiB "
      "of weights and %.1f of activations (memory fraction %.2f)\n",
      static_cast<long long>(budget->blocks), d.block_size,
      static_cast<long long>(budget->tokens()), budget->kv_gib, budget->weights_gib,
      budget->activation_gib, d.gpu_memory_utilization);
  std::printf("  requests   %zu over %.1f s (%.2f req/s), %lld engine steps, %lld preemptions\n",
              r.requests.size(), r.duration_s, r.requests_per_s,
              static_cast<long long>(r.iterations), static_cast<long long>(r.preemptions));
  std::printf("  throughput %.0f output tokens/s (%.0f per GPU), %.0f total tokens/s\n",
              r.output_tokens_per_s, r.output_tokens_per_s / d.gpus(), r.total_tokens_per_s);
  print_stats("TTFT", r.ttft_s, 1e3, "ms");
  print_stats("TPOT", r.tpot_s, 1e3, "ms");
  print_stats("ITL", r.itl_s, 1e3, "ms");
  print_stats("E2E", r.e2e_s, 1, "s");
  print_stats("queue", r.queue_s, 1e3, "ms");
  std::printf("  KV cache use: mean %.0f%%, max %.0f%%\n", 100 * r.kv_utilization_mean,
              100 * r.kv_utilization_max);
  if (o.slo_ttft > 0 || o.slo_tpot > 0)
    std::printf("  goodput    %.2f req/s meet TTFT <= %.0f ms and TPOT <= %.0f ms\n",
                r.goodput_requests_per_s, o.slo_ttft * 1e3, o.slo_tpot * 1e3);
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "Simulate serving a model: throughput, TTFT, TPOT and KV-cache use under a load");
  cmd->add_option("--model", o->model,
                  "zoo model name, a model JSON, or a Hugging Face config.json");
  cmd->add_option("--cluster", o->cluster, "hardware profile name or file");
  cmd->add_option("--profiles-dir", o->profiles_dir, "directory of extra hardware profiles");
  cmd->add_option("--gpus", o->gpus, "GPUs (= tp * pp * dp)");
  cmd->add_option("--tp", o->tp, "tensor-parallel size of a replica");
  cmd->add_option("--pp", o->pp, "pipeline-parallel size of a replica");
  cmd->add_option("--dp", o->dp, "replicas (derived from --gpus when left out)");
  cmd->add_option("--ep", o->ep, "expert-parallel ranks of a replica (MoE; must divide tp)");
  cmd->add_option("--precision", o->precision, "weights and GEMMs: bf16 | fp8");
  cmd->add_option("--rate", o->rate, "Poisson arrival rate, requests/s (0: all at once)");
  cmd->add_option("--requests", o->requests, "number of requests");
  cmd->add_option("--prompt-len", o->prompt_len, "prompt tokens of each request");
  cmd->add_option("--output-len", o->output_len, "output tokens of each request");
  cmd->add_option("--requests-file", o->requests_file,
                  "a trace: JSON Lines or CSV with arrival_s, prompt_len, output_len")
      ->check(CLI::ExistingFile);
  cmd->add_option("--seed", o->seed, "seed of the arrivals");
  cmd->add_option("--max-num-seqs", o->engine.max_num_seqs, "running requests at most (vLLM)");
  cmd->add_option("--max-num-batched-tokens", o->engine.max_num_batched_tokens,
                  "tokens of one engine step at most (vLLM)");
  cmd->add_option("--block-size", o->engine.block_size, "KV-cache block, tokens");
  cmd->add_option("--gpu-memory-utilization", o->engine.gpu_memory_utilization,
                  "fraction of HBM the engine may use (vLLM's default 0.9)");
  cmd->add_option("--chunked-prefill", o->chunked_prefill, "1/0: split long prompts over steps");
  cmd->add_option("--long-prefill-token-threshold", o->long_prefill,
                  "tokens a prefill may compute in one step (0: no cap)");
  cmd->add_option("--slo-ttft", o->slo_ttft, "TTFT target for goodput, seconds (0: none)");
  cmd->add_option("--slo-tpot", o->slo_tpot, "TPOT target for goodput, seconds (0: none)");
  cmd->add_option("--format", o->format, "table | json")->check(CLI::IsMember({"table", "json"}));
  cmd->add_option("--trace", o->trace, "write a Chrome/Perfetto trace of the engine steps");
  cmd->footer(
      "Defaults: llama3.1-70b on 8 x h100-sxm-80gb, tp8, 1000 requests of 1024 + 256 tokens "
      "arriving at 4/s, vLLM's engine defaults.\n"
      "Exit code: 0 simulated, 2 bad input (including a deployment that does not fit).");
  cmd->callback([o, exit_code] { *exit_code = run(*o); });
}

}  // namespace parallax::cli
