// `parallax serve`: a request-level simulation of serving a model on a deployment (vLLM-style
// continuous batching over a paged KV cache), each engine step priced by the training
// simulator's cost functions.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/json_io.h"
#include "core/text.h"
#include "simulator/serving/pd_sim.h"
#include "simulator/serving/serve_sim.h"
#include "simulator/serving/step_cost.h"
#include "simulator/serving/step_shape.h"
#include "simulator/serving/workload.h"

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
  bool no_prefix_caching = false;
  int64_t prefix_len = 0, prefix_groups = 1, hash_block = 512;
  std::string pd;                        ///< --pd P:D; empty = colocated
  int64_t prefill_max_batched = kUnset;  ///< --prefill-max-num-batched-tokens
};

/// The --pd split of the replicas; prefill = 0 when colocated.
struct PdSplit {
  int prefill = 0, decode = 0;
  bool on() const { return prefill > 0; }
};

/// Parses `--pd P:D` against the dp replicas, appending every problem to `bad`.
PdSplit parse_pd(const Opts& o, int dp, Diagnostics* bad) {
  PdSplit pd;
  if (o.pd.empty()) {
    if (o.prefill_max_batched != kUnset)
      bad->push_back({"--prefill-max-num-batched-tokens",
                      "applies to the prefill pool of a disaggregated deployment, got no --pd",
                      "add --pd P:D"});
    return pd;
  }
  const size_t colon = o.pd.find(':');
  std::size_t used_p = 0, used_d = 0;
  try {
    if (colon == std::string::npos) throw std::invalid_argument("no colon");
    pd.prefill = std::stoi(o.pd.substr(0, colon), &used_p);
    pd.decode = std::stoi(o.pd.substr(colon + 1), &used_d);
  } catch (const std::exception&) {
    used_p = 0;
  }
  if (used_p == 0 || used_p != colon || used_d != o.pd.size() - colon - 1) {
    bad->push_back({"--pd", "must be P:D, prefill and decode replicas, got '" + o.pd + "'",
                    "e.g. --pd 1:1 on two replicas"});
    return PdSplit{};
  }
  if (pd.prefill < 1 || pd.decode < 1 || pd.prefill + pd.decode != dp) {
    bad->push_back(
        {"--pd",
         "P + D must split the dp=" + std::to_string(dp) + " replicas with P, D >= 1, got " +
             std::to_string(pd.prefill) + " + " + std::to_string(pd.decode),
         "dp = gpus / (tp * pp); e.g. --pd " + std::to_string(std::max(1, dp - 1)) + ":1"});
    return PdSplit{};
  }
  if (o.prefill_max_batched != kUnset && o.prefill_max_batched < 1)
    bad->push_back({"--prefill-max-num-batched-tokens",
                    "must be >= 1, got " + std::to_string(o.prefill_max_batched), ""});
  return pd;
}

Json stats_json(const serving::Stats& s) {
  return Json{{"mean", s.mean}, {"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99}, {"max", s.max}};
}

/// Chrome trace-event JSON: one process per engine (a decode replica after every prefill one),
/// one complete event per engine step.
Json iteration_trace(const serving::ServeResult& r, int prefill_replicas) {
  Json events = Json::array();
  for (const serving::IterationRecord& it : r.iteration_records) {
    const char* name = it.prefill_tokens == 0  ? "decode"
                       : it.decode_tokens == 0 ? "prefill"
                                               : "prefill+decode";
    events.push_back({{"name", name},
                      {"ph", "X"},
                      {"pid", it.pool == 1 ? prefill_replicas + it.replica : it.replica},
                      {"tid", it.lane},
                      {"ts", it.start_s * 1e6},
                      {"dur", it.duration_s * 1e6},
                      {"args",
                       {{"prefill_tokens", it.prefill_tokens},
                        {"decode_tokens", it.decode_tokens},
                        {"seqs", it.num_seqs},
                        {"running", it.running_seqs},
                        {"kv_blocks", it.kv_blocks_used}}}});
  }
  return Json{{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

void print_stats(const char* name, const serving::Stats& s, double scale, const char* unit) {
  std::printf("  %-6s mean %8.1f  p50 %8.1f  p90 %8.1f  p99 %8.1f %s\n", name, s.mean * scale,
              s.p50 * scale, s.p90 * scale, s.p99 * scale, unit);
}

/// What a simulation was run on, for the report.
struct Setup {
  const ModelSpec* model = nullptr;
  const HwProfile* hw = nullptr;
  Deployment d;
  serving::KvBudget budget;       ///< of a colocated or decode replica
  PdSplit pd;                     ///< prefill = 0: colocated
  int64_t prefill_blocks = 0;     ///< KV blocks of a prefill replica
  double kv_transfer_mean_s = 0;  ///< over the requests that reach the decode pool
  int64_t typical_prompt = 0;     ///< --prompt-len, or a trace's mean prompt
  double typical_transfer_s = 0;  ///< the KV transfer of that prompt
};

Result<std::vector<serving::Request>> load_requests(const Opts& o) {
  Result<std::vector<serving::Request>> out =
      serving::poisson_requests(o.requests, o.rate, o.prompt_len, o.output_len, o.seed);
  if (!o.requests_file.empty()) {
    auto text = read_file(o.requests_file);
    if (!text) return text.errors();
    Diagnostics notes;
    out = serving::parse_requests(text.value(), o.requests_file, o.hash_block, &notes);
    report_warnings(notes);
  }
  if (out && o.prefix_len > 0)
    serving::assign_shared_prefixes(&out.value(), o.prefix_len, o.prefix_groups, o.seed);
  return out;
}

/// Runs the simulation `s` describes: colocated on d.dp replicas, or disaggregated on the
/// --pd split (then also fills the prefill pool's blocks and the KV transfer times in `s`).
Result<serving::ServeResult> simulate(const Opts& o, const std::vector<serving::Request>& requests,
                                      Setup* s) {
  const serving::ServeConfig config =
      serving::engine_config(s->d, s->budget.blocks, o.chunked_prefill != 0, o.long_prefill);
  const serving::StepCost cost(*s->model, *s->hw, s->d);
  const serving::SloSpec slo{o.slo_ttft, o.slo_tpot};
  // Stage by stage, so a pipeline-parallel engine keeps pp steps in flight as vLLM V1 does.
  if (!s->pd.on() && s->d.wide_ep())
    return serving::simulate_lockstep(requests, config, serving::lockstep_cost(cost), slo,
                                      !o.trace.empty());
  if (!s->pd.on())
    return serving::simulate_serving(requests, config, serving::stage_cost(cost), slo,
                                     !o.trace.empty());

  const bool wide = s->d.wide_ep();
  Deployment pre = wide ? serving::wide_ep_pool(s->d, s->pd.prefill) : s->d;
  if (o.prefill_max_batched != kUnset) pre.max_num_batched_tokens = o.prefill_max_batched;
  auto pre_budget = serving::kv_budget(*s->model, *s->hw, pre);
  if (!pre_budget) return pre_budget.errors();
  s->prefill_blocks = pre_budget->blocks;
  const serving::StepCost pre_cost(*s->model, *s->hw, pre);
  serving::PdConfig pd;
  pd.prefill =
      serving::engine_config(pre, pre_budget->blocks, o.chunked_prefill != 0, o.long_prefill)
          .scheduler;
  pd.decode = config.scheduler;
  pd.prefill_replicas = s->pd.prefill;
  pd.decode_replicas = s->pd.decode;
  pd.pipeline_stages = s->d.pp;
  const serving::KvTransferTime transfer =
      serving::kv_transfer_time(*s->hw, s->budget.kv_bytes_per_token);
  double sum = 0, prompts = 0;
  int64_t moved = 0;
  for (const serving::Request& r : requests) {
    prompts += static_cast<double>(r.prompt_len);
    if (r.output_len < 2) continue;
    sum += transfer(r.prompt_len);
    ++moved;
  }
  s->kv_transfer_mean_s = moved > 0 ? sum / static_cast<double>(moved) : 0.0;
  s->typical_prompt =
      o.requests_file.empty() || requests.empty()
          ? o.prompt_len
          : static_cast<int64_t>(std::llround(prompts / static_cast<double>(requests.size())));
  s->typical_transfer_s = transfer(s->typical_prompt);
  if (wide) {  // each pool's replicas step together, its experts over its own GPUs
    const serving::StepCost dec_cost(*s->model, *s->hw, serving::wide_ep_pool(s->d, s->pd.decode));
    return serving::simulate_disaggregated(requests, pd, serving::lockstep_cost(pre_cost),
                                           serving::lockstep_cost(dec_cost), transfer, slo,
                                           !o.trace.empty());
  }
  return serving::simulate_disaggregated(requests, pd, serving::stage_cost(pre_cost),
                                         serving::stage_cost(cost), transfer, slo,
                                         !o.trace.empty());
}

void print_json(const Setup& s, const serving::ServeResult& r) {
  const Deployment& d = s.d;
  Json j = {
      {"model", s.model->name},
      {"cluster", s.hw->name},
      {"deployment", {{"gpus", d.gpus()}, {"tp", d.tp}, {"pp", d.pp}, {"dp", d.dp}, {"ep", d.ep}}},
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
      {"prefix_cache",
       {{"enabled", d.enable_prefix_caching},
        {"hit_rate", r.prefix_cache_hit_rate},
        {"hit_tokens", r.prefix_hit_tokens}}},
      {"kv_cache",
       {{"blocks", s.budget.blocks},
        {"tokens", s.budget.tokens()},
        {"gib_per_gpu", s.budget.kv_gib},
        {"weights_gib_per_gpu", s.budget.weights_gib},
        {"activation_gib_per_gpu", s.budget.activation_gib},
        {"utilization_mean", r.kv_utilization_mean},
        {"utilization_max", r.kv_utilization_max}}}};
  if (s.pd.on())
    j["pd"] = {{"prefill_replicas", s.pd.prefill},
               {"decode_replicas", s.pd.decode},
               {"prefill_kv_blocks", s.prefill_blocks},
               {"kv_transfer_s_mean", s.kv_transfer_mean_s}};
  std::cout << j.dump(2) << "\n";
}

void print_table(const Opts& o, const Setup& s, const serving::ServeResult& r) {
  const Deployment& d = s.d;
  std::printf("%s on %d x %s: tp%d pp%d dp%d ep%d, %s\n", s.model->name.c_str(), d.gpus(),
              s.hw->name.c_str(), d.tp, d.pp, d.dp, d.ep, to_string(d.precision));
  std::printf(
      "  KV cache   %lld blocks of %d (%lld tokens) per replica: %.1f GiB a GPU after %.1f GiB "
      "of weights and %.1f of activations (memory fraction %.2f)\n",
      static_cast<long long>(s.budget.blocks), d.block_size,
      static_cast<long long>(s.budget.tokens()), s.budget.kv_gib, s.budget.weights_gib,
      s.budget.activation_gib, d.gpu_memory_utilization);
  if (s.pd.on())
    std::printf(
        "  disaggregated: %d prefill + %d decode replicas, KV transfer of a %lld-token prompt "
        "%.2f ms (mean %.2f ms)\n",
        s.pd.prefill, s.pd.decode, static_cast<long long>(s.typical_prompt),
        s.typical_transfer_s * 1e3, s.kv_transfer_mean_s * 1e3);
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
  if (d.enable_prefix_caching)
    std::printf("  prefix cache: %.1f%% of the tokens looked up were cached (%lld tokens)\n",
                100 * r.prefix_cache_hit_rate, static_cast<long long>(r.prefix_hit_tokens));
  else
    std::printf("  prefix cache: off\n");
  if (o.slo_ttft > 0 || o.slo_tpot > 0)
    std::printf("  goodput    %.2f req/s meet TTFT <= %.0f ms and TPOT <= %.0f ms\n",
                r.goodput_requests_per_s, o.slo_ttft * 1e3, o.slo_tpot * 1e3);
}

int run(Opts o) {
  auto in = resolve_serving_inputs(o.model, o.cluster, o.profiles_dir, o.precision);
  if (!in) return report_errors(in.errors());
  Setup s;
  s.model = &in->model;
  s.hw = &in->hw;
  Deployment& d = s.d;
  d = o.engine;
  d.enable_prefix_caching = !o.no_prefix_caching;
  d.tp = o.tp;
  d.pp = o.pp;
  d.ep = o.ep;
  d.precision = in->precision;
  // Counts past the largest cluster become kMaxGpus + 1, which check_deployment refuses, rather
  // than wrapping around in int.
  auto bounded = [](int64_t v) {
    return static_cast<int>(std::clamp<int64_t>(v, -1, int64_t{kMaxGpus} + 1));
  };
  if (o.dp != kUnset)
    d.dp = bounded(o.dp);
  else if (o.gpus != kUnset && o.tp > 0 && o.pp > 0)  // else check_deployment says tp, pp >= 1
    d.dp = bounded(std::max<int64_t>(1, o.gpus / (int64_t{o.tp} * o.pp)));
  // Without --gpus there is nothing to compare tp*pp*dp with.
  const int gpus = o.gpus == kUnset ? 0 : bounded(o.gpus);
  Diagnostics bad = serving::check_deployment(*s.model, d, gpus);
  if (o.rate < 0) bad.push_back({"--rate", "must be 0 (all at once) or more", ""});
  if (o.requests_file.empty() && (o.requests < 1 || o.prompt_len < 1 || o.output_len < 1))
    bad.push_back({"--requests", "requests, prompt and output lengths must be at least 1", ""});
  if (o.prefix_len < 0 || o.prefix_groups < 1 || o.hash_block < 1)
    bad.push_back({"--prefix-len",
                   "--prefix-len must be >= 0, --prefix-groups and --hash-block >= 1, got " +
                       std::to_string(o.prefix_len) + ", " + std::to_string(o.prefix_groups) +
                       ", " + std::to_string(o.hash_block),
                   ""});
  else if (o.requests_file.empty() && o.prefix_len > o.prompt_len)
    bad.push_back({"--prefix-len",
                   "a shared prefix is part of the prompt: " + std::to_string(o.prefix_len) +
                       " tokens exceed --prompt-len " + std::to_string(o.prompt_len),
                   ""});
  if (o.no_prefix_caching && o.prefix_len > 0)
    bad.push_back({"--prefix-len", "shared prefixes need prefix caching, got --no-prefix-caching",
                   "drop one of them"});
  s.pd = parse_pd(o, d.dp, &bad);
  // Wide ep with --pd: each pool spreads the experts over its own GPUs (ep = tp * its replicas).
  if (bad.empty() && s.pd.on() && d.wide_ep())
    for (const auto& [name, replicas] :
         {std::pair{"prefill", s.pd.prefill}, std::pair{"decode", s.pd.decode}})
      for (Diagnostic& e :
           serving::check_deployment(*s.model, serving::wide_ep_pool(d, replicas), 0))
        bad.push_back({"--pd",
                       std::string("the ") + name + " pool (experts over its " +
                           std::to_string(d.tp * replicas) + " GPUs): " + e.str(),
                       ""});
  if (!bad.empty()) return report_errors(bad);
  auto budget = serving::kv_budget(
      *s.model, *s.hw, s.pd.on() && d.wide_ep() ? serving::wide_ep_pool(d, s.pd.decode) : d);
  if (!budget) return report_errors(budget.errors());
  s.budget = budget.value();

  auto requests = load_requests(o);
  if (!requests) return report_errors(requests.errors());
  auto result = simulate(o, requests.value(), &s);
  if (!result) return report_errors(result.errors());
  const serving::ServeResult& r = result.value();
  if (!o.trace.empty()) {
    auto w = write_file_atomic(o.trace, iteration_trace(r, s.pd.prefill).dump());
    if (!w) return report_errors(w.errors());
  }
  if (o.format == "json")
    print_json(s, r);
  else
    print_table(o, s, r);
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
  cmd->add_option("--gpus", o->gpus, "GPUs (= tp * pp * dp)")->check(count_in(1, kMaxGpus));
  cmd->add_option("--tp", o->tp, "tensor-parallel size of a replica")->check(count_in(1, 1 << 16));
  cmd->add_option("--pp", o->pp, "pipeline-parallel size of a replica")
      ->check(count_in(1, 1 << 16));
  cmd->add_option("--dp", o->dp, "replicas (derived from --gpus when left out)")
      ->check(count_in(1, kMaxGpus));
  cmd->add_option("--ep", o->ep,
                  "expert-parallel ranks (MoE): dividing tp (inside each replica), or tp*dp "
                  "(experts over every replica, which then step together)")
      ->check(count_in(1, kMaxGpus));
  cmd->add_option("--precision", o->precision, "weights and GEMMs: bf16 | fp8");
  cmd->add_option("--rate", o->rate, "Poisson arrival rate, requests/s (0: all at once)")
      ->check(finite_in(0, 1e9, "requests per second"));
  cmd->add_option("--requests", o->requests, "number of requests")
      ->check(count_in(1, serving::kMaxRequests, "each request is simulated"));
  cmd->add_option("--prompt-len", o->prompt_len, "prompt tokens of each request")
      ->check(count_in(1, kMaxSeqLen));
  cmd->add_option("--output-len", o->output_len, "output tokens of each request")
      ->check(count_in(1, kMaxSeqLen));
  cmd->add_option("--requests-file", o->requests_file,
                  "a trace: JSON Lines or CSV with arrival_s, prompt_len, output_len (and "
                  "hash_ids in JSON Lines)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--seed", o->seed, "seed of the arrivals");
  cmd->add_option("--max-num-seqs", o->engine.max_num_seqs, "running requests at most (vLLM)")
      ->check(count_in(1, 1 << 20));
  cmd->add_option("--max-num-batched-tokens", o->engine.max_num_batched_tokens,
                  "tokens of one engine step at most (vLLM)")
      ->check(count_in(1, 1 << 30));
  cmd->add_option("--block-size", o->engine.block_size, "KV-cache block, tokens")
      ->check(count_in(1, 1 << 20));
  cmd->add_option("--gpu-memory-utilization", o->engine.gpu_memory_utilization,
                  "fraction of HBM the engine may use (vLLM's default 0.9)")
      ->check(finite_in(0.01, 1, "a fraction of HBM"));
  cmd->add_option("--chunked-prefill", o->chunked_prefill, "1/0: split long prompts over steps")
      ->check(count_in(0, 1));
  cmd->add_option("--long-prefill-token-threshold", o->long_prefill,
                  "tokens a prefill may compute in one step (0: no cap)")
      ->check(count_in(0, 1 << 30));
  cmd->add_flag("--two-batch-overlap", o->engine.two_batch_overlap,
                "with --ep tp*dp: each step as two micro-batches, one's all-to-alls overlapping "
                "the other's compute (vLLM --enable-dbo, SGLang --enable-two-batch-overlap)");
  cmd->add_flag("--no-prefix-caching", o->no_prefix_caching,
                "turn off automatic prefix caching (vLLM V1 and SGLang have it on)");
  cmd->add_option("--prefix-len", o->prefix_len,
                  "tokens of each prompt shared with other requests (a system prompt; 0: none)")
      ->check(count_in(0, kMaxSeqLen));
  cmd->add_option("--prefix-groups", o->prefix_groups,
                  "distinct shared prefixes, one drawn per request (with --prefix-len)")
      ->check(count_in(1, 1 << 30));
  cmd->add_option("--hash-block", o->hash_block,
                  "tokens each hash_ids entry of a JSON Lines trace names (Mooncake: 512)")
      ->check(count_in(1, kMaxSeqLen));
  cmd->add_option("--slo-ttft", o->slo_ttft, "TTFT target for goodput, seconds (0: none)")
      ->check(finite_in(0, 1e6, "seconds"));
  cmd->add_option("--slo-tpot", o->slo_tpot, "TPOT target for goodput, seconds (0: none)")
      ->check(finite_in(0, 1e6, "seconds"));
  cmd->add_option("--pd", o->pd,
                  "P:D: disaggregate the dp replicas into P prefill and D decode replicas");
  cmd->add_option("--prefill-max-num-batched-tokens", o->prefill_max_batched,
                  "tokens of one prefill-pool step at most (default --max-num-batched-tokens)")
      ->check(count_in(1, 1 << 30));
  cmd->add_option("--format", o->format, "table | json")->check(CLI::IsMember({"table", "json"}));
  cmd->add_option("--trace", o->trace, "write a Chrome/Perfetto trace of the engine steps");
  cmd->footer(
      "Defaults: llama3.1-70b on 8 x h100-sxm-80gb, tp8, 1000 requests of 1024 + 256 tokens "
      "arriving at 4/s, vLLM's engine defaults, colocated prefill and decode.\n"
      "Exit code: 0 simulated, 2 bad input (including a deployment that does not fit).");
  cmd->callback([o, exit_code] { *exit_code = run(*o); });
}

}  // namespace parallax::cli
