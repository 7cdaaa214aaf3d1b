// `parallax serve-plan`: search the deployments of a model on N GPUs (tensor, pipeline and expert
// parallelism of a replica, replicas, engine limits, prefill/decode disaggregation), simulate each
// on the same request load and rank them by throughput under p90 latency targets; print the vLLM
// or SGLang command of the best.
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "core/json_io.h"
#include "core/text.h"
#include "planner/launch/serve_launch.h"
#include "planner/serve_plan.h"
#include "simulator/serving/workload.h"

namespace parallax::cli {
namespace {

struct Opts {
  std::string model = "llama3.1-70b", cluster = "h100-sxm-80gb", profiles_dir;
  std::string precision = "bf16", format = "table", emit;
  int gpus = 8, tp = 0, pp = 0, top = 10, threads = 0;
  ServeWorkload workload;
  ServeSlo slo;
  double gpu_memory_utilization = 0.9;
  int block_size = 16;
  bool no_pd = false;  ///< --no-pd: colocated deployments only
};

Json candidate_json(const ServeCandidate& c, int rank) {
  const serving::Deployment& d = c.deployment;
  Json j = {
      {"rank", rank},
      {"label", deployment_label(d, c.engine.prefill_replicas)},
      {"deployment", {{"gpus", d.gpus()}, {"tp", d.tp}, {"pp", d.pp}, {"dp", d.dp}, {"ep", d.ep}}},
      {"engine",
       {{"max_num_seqs", d.max_num_seqs},
        {"max_num_batched_tokens", d.max_num_batched_tokens},
        {"block_size", d.block_size},
        {"gpu_memory_utilization", d.gpu_memory_utilization},
        {"chunked_prefill", c.engine.enable_chunked_prefill}}},
      {"kv_cache_tokens_per_replica", c.kv_tokens},
      {"output_tokens_per_s", c.output_tokens_per_s},
      {"output_tokens_per_s_per_gpu", c.output_tokens_per_s_per_gpu},
      {"ttft_p90_s", c.ttft_p90_s},
      {"tpot_p90_s", c.tpot_p90_s},
      {"goodput_requests_per_s", c.goodput_requests_per_s},
      {"meets", c.meets},
      {"miss", c.miss}};
  if (c.engine.prefill_replicas > 0)
    j["pd"] = {{"prefill_replicas", c.engine.prefill_replicas},
               {"decode_replicas", d.dp - c.engine.prefill_replicas},
               {"kv_transfer_s_mean", c.kv_transfer_mean_s}};
  if (c.load_searched)
    j["max_load"] = {{"max_rate_per_s", c.max_rate_per_s},
                     {"failing_rate_per_s", c.failing_rate_per_s},
                     {"capped", c.max_rate_capped},
                     {"saturation_rate_per_s", c.saturation_rate_per_s}};
  return j;
}

Json result_json(const ServePlanRequest& r, const ServePlanResult& s, int top) {
  Json pruned = Json::array();
  for (const PruneCount& c : s.pruned) pruned.push_back({{"rule", c.rule}, {"count", c.count}});
  Json ranked = Json::array();
  for (size_t i = 0; i < s.ranked.size() && i < static_cast<size_t>(top); ++i)
    ranked.push_back(candidate_json(s.ranked[i], static_cast<int>(i) + 1));
  const ServeWorkload& w = r.workload;
  return Json{{"model", r.model.name},
              {"cluster", r.hw.name},
              {"gpus", r.gpus},
              {"precision", to_string(r.precision)},
              {"workload",
               {{"requests", w.requests},
                {"rate_per_s", w.rate_per_s},
                {"prompt_len", w.prompt_len},
                {"output_len", w.output_len},
                {"prefix_len", w.prefix_len},
                {"prefix_groups", w.prefix_groups},
                {"seed", w.seed}}},
              {"slo", {{"ttft_p90_s", r.slo.ttft_p90_s}, {"tpot_p90_s", r.slo.tpot_p90_s}}},
              {"candidates", s.candidates},
              {"pd_candidates", s.pd_candidates},
              {"pruned", pruned},
              {"simulated", s.simulated},
              {"feasible", static_cast<int64_t>(s.ranked.size())},
              {"ranked", ranked}};
}

void print_table(const ServePlanRequest& r, const ServePlanResult& s, int top) {
  const ServeWorkload& w = r.workload;
  std::printf("%s on %d x %s (%s): %lld requests of %lld + %lld tokens at %g req/s\n",
              r.model.name.c_str(), r.gpus, r.hw.name.c_str(), to_string(r.precision),
              static_cast<long long>(w.requests), static_cast<long long>(w.prompt_len),
              static_cast<long long>(w.output_len), w.rate_per_s);
  const bool load = !s.ranked.empty() && s.ranked.front().load_searched;
  std::printf("%-4s %-21s %5s %6s %9s %7s %9s %9s %-5s%s\n", "rank", "deployment", "seqs", "tokens",
              "tok/s", "per GPU", "TTFT p90", "TPOT p90", "meets", load ? "  max req/s" : "");
  for (size_t i = 0; i < s.ranked.size() && i < static_cast<size_t>(top); ++i) {
    const ServeCandidate& c = s.ranked[i];
    std::string rate;
    if (c.load_searched)
      rate = "  " + format_number("%.2f", c.max_rate_per_s) + (c.max_rate_capped ? "+" : "");
    std::printf("%-4zu %-21s %5lld %6lld %9.0f %7.0f %6.0f ms %6.1f ms %-5s%s\n", i + 1,
                deployment_label(c.deployment, c.engine.prefill_replicas).c_str(),
                static_cast<long long>(c.deployment.max_num_seqs),
                static_cast<long long>(c.deployment.max_num_batched_tokens), c.output_tokens_per_s,
                c.output_tokens_per_s_per_gpu, c.ttft_p90_s * 1e3, c.tpot_p90_s * 1e3,
                c.meets ? "yes" : "no", rate.c_str());
  }
}

int run(const Opts& o, ServePlanOptions opt) {
  auto in = resolve_serving_inputs(o.model, o.cluster, o.profiles_dir, o.precision);
  if (!in) return report_errors(in.errors());
  ServePlanRequest r;
  r.model = in->model;
  r.hw = in->hw;
  r.gpus = o.gpus;
  r.workload = o.workload;
  r.slo = o.slo;
  r.precision = in->precision;
  r.gpu_memory_utilization = o.gpu_memory_utilization;
  r.block_size = o.block_size;
  r.tp = o.tp;
  r.pp = o.pp;
  r.search_pd = !o.no_pd;
  auto found = search_deployments(r, opt);
  if (!found) {
    const bool nothing_fits = found.errors().front().where == "serve-plan";
    const int rc = report_errors(found.errors());
    return nothing_fits ? 1 : rc;
  }
  const ServePlanResult& s = found.value();
  const ServeCandidate& best = s.ranked.front();
  std::optional<Result<std::string>> launch;
  if (o.emit == "vllm") launch = emit_vllm(r.model, best.deployment, best.engine);
  if (o.emit == "sglang") launch = emit_sglang(r.model, best.deployment, best.engine);
  if (o.format == "json") {
    Json j = result_json(r, s, o.top);
    if (launch && *launch) j["launch"] = {{"target", o.emit}, {"text", launch->value()}};
    std::cout << j.dump(2) << "\n";
  } else {
    print_table(r, s, o.top);
    std::cout << "\n" << explain_serve_plan(r, s);
    if (launch && *launch) std::cout << "\n" << launch->value();
  }
  if (launch && !*launch) {
    std::cerr << "error: the best deployment cannot be emitted for " << o.emit << ":\n";
    return report_errors(launch->errors());
  }
  return 0;
}

}  // namespace

void add_serve_plan_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<Opts>();
  auto opt = std::make_shared<ServePlanOptions>();
  CLI::App* cmd = app.add_subcommand(
      "serve-plan",
      "Search serving deployments of a model on N GPUs and rank them by throughput under p90 "
      "latency targets");
  cmd->add_option("--model", o->model,
                  "zoo model name, a model JSON, or a Hugging Face config.json");
  cmd->add_option("--cluster", o->cluster, "hardware profile name or file");
  cmd->add_option("--profiles-dir", o->profiles_dir, "directory of extra hardware profiles");
  cmd->add_option("--gpus", o->gpus, "GPUs of the deployment")->check(count_in(1, kMaxGpus));
  cmd->add_option("--tp", o->tp, "pin the tensor-parallel size of a replica (0: searched)")
      ->check(count_in(0, 1 << 16));
  cmd->add_option("--pp", o->pp, "pin the pipeline-parallel size of a replica (0: searched)")
      ->check(count_in(0, 1 << 16));
  cmd->add_option("--precision", o->precision, "weights and GEMMs: bf16 | fp8");
  cmd->add_option("--rate", o->workload.rate_per_s, "Poisson arrival rate, requests/s")
      ->check(finite_in(0, 1e9, "requests per second"));
  cmd->add_option("--requests", o->workload.requests, "requests simulated per candidate")
      ->check(count_in(1, serving::kMaxRequests, "each request is simulated"));
  cmd->add_option("--prompt-len", o->workload.prompt_len, "prompt tokens of each request")
      ->check(count_in(1, kMaxSeqLen));
  cmd->add_option("--output-len", o->workload.output_len, "output tokens of each request")
      ->check(count_in(1, kMaxSeqLen));
  cmd->add_option("--prefix-len", o->workload.prefix_len,
                  "tokens of each prompt shared with other requests (served from the prefix "
                  "cache; 0: none)")
      ->check(count_in(0, kMaxSeqLen));
  cmd->add_option("--prefix-groups", o->workload.prefix_groups,
                  "distinct shared prefixes, one drawn per request")
      ->check(count_in(1, 1 << 30));
  cmd->add_option("--seed", o->workload.seed, "seed of the arrivals");
  cmd->add_option("--ttft-p90", o->slo.ttft_p90_s, "p90 time-to-first-token target, s (0: none)")
      ->check(finite_in(0, 1e6, "seconds"));
  cmd->add_option("--tpot-p90", o->slo.tpot_p90_s, "p90 time-per-output-token target, s (0: none)")
      ->check(finite_in(0, 1e6, "seconds"));
  cmd->add_option("--gpu-memory-utilization", o->gpu_memory_utilization,
                  "fraction of HBM the engine may use")
      ->check(finite_in(0.01, 1, "a fraction of HBM"));
  cmd->add_option("--block-size", o->block_size, "KV-cache block, tokens")
      ->check(count_in(1, 1 << 20));
  cmd->add_flag("--no-pd", o->no_pd,
                "colocated deployments only: do not also search prefill/decode splits P:D");
  cmd->add_flag("--max-load", opt->max_load,
                "also bisect, for the first candidates, the highest rate meeting the SLO");
  cmd->add_option("--max-load-top", opt->max_load_top, "how many candidates --max-load bisects")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--top", o->top, "how many deployments to show")->check(CLI::Range(1, 10000));
  cmd->add_option("--emit", o->emit, "print the best deployment's command: vllm | sglang")
      ->check(CLI::IsMember({"vllm", "sglang"}));
  cmd->add_option("--format", o->format, "table | json")->check(CLI::IsMember({"table", "json"}));
  cmd->add_option("--threads", opt->threads, "simulation threads (0: all cores)")
      ->check(count_in(0, 1024));
  cmd->footer(
      "Defaults: llama3.1-70b on 8 x h100-sxm-80gb, 2000 requests of 1024 + 256 tokens at "
      "4 req/s, no SLO; every layout with 2 or more replicas is also tried disaggregated into "
      "P prefill + D decode replicas (--no-pd: not).\n"
      "Example: parallax serve-plan --model llama3.1-70b --gpus 8 --rate 8 --ttft-p90 0.5 "
      "--tpot-p90 0.05 --max-load --emit vllm\n"
      "Exit code: 0 ranked, 1 no deployment fits, 2 bad input.");
  cmd->callback([o, opt, exit_code] { *exit_code = run(*o, *opt); });
}

}  // namespace parallax::cli
