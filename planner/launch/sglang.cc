// SGLang: the `python -m sglang.launch_server` command of a deployment, and SGLang's rules.
//
// Flag names are those of SGLang's server arguments
// (https://docs.sglang.io/advanced_features/server_arguments.html; the parallelism fields in
// https://docs.sglang.io/cookbook/base/reference/server_arguments): --model-path, --tp-size,
// --pp-size, --dp-size, --ep-size, --enable-dp-attention, --max-running-requests,
// --chunked-prefill-size (-1 turns chunked prefill off), --mem-fraction-static, --page-size,
// --quantization. Rules, from python/sglang/srt/server_args.py: the MoE layers run
// tensor-parallel over tp/ep ranks, so ep must divide tp; with --enable-dp-attention the
// attention is data-parallel inside the tp ranks (which are then all the instance's GPUs),
// `assert self.tp_size % self.dp_size == 0`, and chunked_prefill_size is divided by dp_size.
// Without DP attention, --dp-size runs dp copies of a tp x pp model inside one server
// (https://docs.sglang.io/docs/advanced_features/dp_dpa_smg_guide.md).
//
// Disaggregated prefill/decode follows SGLang's PD disaggregation guide
// (https://docs.sglang.io/advanced_features/pd_disaggregation.html, "NIXL" section) and its
// router's (https://docs.sglang.io/advanced_features/router.html, "Prefill/Decode
// Disaggregation"): one server per pool with --disaggregation-mode prefill | decode and
// --disaggregation-transfer-backend nixl (choices mooncake, the default, nixl, ascend, ...), and
// in front `python -m sglang_router.launch_router --pd-disaggregation --prefill URL --decode URL`.

#include <string>
#include <vector>

#include "planner/launch/emitters.h"
#include "planner/launch/serve_launch.h"

namespace parallax {
namespace {

std::string flag(const char* name, int64_t v) {
  return std::string(name) + " " + std::to_string(v);
}

/// The server flags of `d` (its dp replicas inside one server), one flag per entry.
std::vector<std::string> sglang_flags(const serving::Deployment& d, const ServeEngineSettings& s) {
  std::vector<std::string> lines = {flag("--tp-size", d.tp)};
  if (d.pp > 1) lines.push_back(flag("--pp-size", d.pp));
  if (d.dp > 1) lines.push_back(flag("--dp-size", d.dp));
  if (s.sglang_dp_attention) lines.push_back("--enable-dp-attention");
  if (d.ep > 1) lines.push_back(flag("--ep-size", d.ep));
  if (d.two_batch_overlap) lines.push_back("--enable-two-batch-overlap");
  // With DP attention the cap is the server's: each attention-DP rank gets
  // max_running_requests // dp_size (model_runner_kv_cache_mixin.py, _resolve_max_num_reqs).
  // Without, --dp-size runs whole replicas that each take the full value.
  lines.push_back(flag("--max-running-requests",
                       s.sglang_dp_attention ? d.max_num_seqs * d.dp : d.max_num_seqs));
  lines.push_back(flag("--chunked-prefill-size",
                       s.enable_chunked_prefill ? d.max_num_batched_tokens : int64_t{-1}));
  if (s.max_model_len > 0) lines.push_back(flag("--context-length", s.max_model_len));
  lines.push_back("--mem-fraction-static " + launch::number_text(d.gpu_memory_utilization));
  lines.push_back(flag("--page-size", d.block_size));
  if (d.precision == Precision::kFp8) lines.push_back("--quantization fp8");
  if (d.precision == Precision::kFp32) lines.push_back("--dtype float32");
  return lines;
}

std::vector<std::string> sglang_notes(const ModelSpec& m, const serving::Deployment& d,
                                      const ServeEngineSettings& s) {
  std::vector<std::string> notes;
  const int gpus = s.sglang_dp_attention ? d.tp * d.pp : d.gpus();
  notes.push_back(
      "SGLang: " + m.name + " on " + std::to_string(gpus) + " GPUs, tp" + std::to_string(d.tp) +
      " pp" + std::to_string(d.pp) + " dp" + std::to_string(d.dp) +
      (d.ep > 1 ? " ep" + std::to_string(d.ep) : "") +
      (s.sglang_dp_attention && d.ep != d.tp ? " with DP attention (not simulated by parallax)."
       : s.sglang_dp_attention ? " with DP attention and the experts over every GPU, as parallax "
                                 "simulated it (ep = tp*dp, the replicas stepping together)."
                               : ", as parallax serve-plan simulated it."));
  if (!hf_model_id(m.name))
    notes.push_back("parallax knows no Hugging Face repository for '" + m.name +
                    "': replace it with the model's path or repository id.");
  if (d.dp > 1 && !s.sglang_dp_attention)
    notes.push_back("--dp-size " + std::to_string(d.dp) + " runs " + std::to_string(d.dp) +
                    " copies of the model (tp" + std::to_string(d.tp) + " pp" +
                    std::to_string(d.pp) +
                    " each) inside one server; the SGLang Model Gateway (router) over " +
                    std::to_string(d.dp) + " separate servers serves the same.");
  if (s.sglang_dp_attention)
    notes.push_back(
        "with --enable-dp-attention SGLang divides --chunked-prefill-size by "
        "--dp-size.");
  if (d.two_batch_overlap)
    notes.push_back(
        "--enable-two-batch-overlap runs with DeepEP's all-to-alls: add --moe-a2a-backend "
        "deepep.");
  notes.push_back(
      "--mem-fraction-static is the share of HBM for weights and KV cache; "
      "parallax sized the KV cache as vLLM's --gpu-memory-utilization does.");
  return notes;
}

constexpr int kPrefillPort = 30000, kDecodePort = 30001, kRouterPort = 8000, kDistPort = 20000;
constexpr int kServerPort = 30000;

std::string server_command(const std::string& model, const std::vector<std::string>& lines) {
  return "python -m sglang.launch_server --model-path " + model + " \\\n" +
         launch::shell_continued(lines, 2);
}

/// The GPUs of one server: tp * pp (its dp groups inside the tp ranks) with DP attention,
/// every replica's without.
int server_gpus(const serving::Deployment& d, const ServeEngineSettings& s) {
  return s.sglang_dp_attention ? d.tp * d.pp : d.gpus();
}

/// One server over several hosts (SGLang's multi-node: --nnodes, --node-rank, --dist-init-addr),
/// the same command on each host but its rank.
std::string emit_sglang_multinode(const ModelSpec& m, const serving::Deployment& d,
                                  const ServeEngineSettings& s) {
  const int hosts = server_gpus(d, s) / s.gpus_per_node;
  std::vector<std::string> notes = sglang_notes(m, d, s);
  notes.push_back("one server over " + std::to_string(hosts) + " hosts of " +
                  std::to_string(s.gpus_per_node) +
                  " GPUs: run the command on each host with its --node-rank (HEAD_IP: host 0's "
                  "address); requests go to host 0.");
  std::string out = launch::comment_lines(notes);
  for (int h = 0; h < hosts; ++h) {
    std::vector<std::string> lines = sglang_flags(d, s);
    lines.push_back(flag("--nnodes", hosts));
    lines.push_back(flag("--node-rank", h));
    lines.push_back("--dist-init-addr $HEAD_IP:" + std::to_string(kDistPort));
    out += "\n# host " + std::to_string(h) + "\n" +
           server_command(hf_model_id(m.name).value_or(m.name), lines);
  }
  return out;
}

/// Replicas without DP attention over several hosts: SGLang's --dp-size does not span hosts, so
/// each host runs a server of its own replicas and a router spreads requests over them.
std::string emit_sglang_per_host(const ModelSpec& m, const serving::Deployment& d,
                                 const ServeEngineSettings& s) {
  const int per_host = s.gpus_per_node / (d.tp * d.pp), hosts = d.dp / per_host;
  serving::Deployment one = d;
  one.dp = per_host;
  std::vector<std::string> notes = sglang_notes(m, d, s);
  // The note on --dp-size inside one server is about a command this is not.
  std::erase_if(notes, [](const std::string& n) { return n.rfind("--dp-size ", 0) == 0; });
  notes.push_back("SGLang's --dp-size does not span hosts: each of the " + std::to_string(hosts) +
                  " hosts runs a server of " + std::to_string(per_host) +
                  " replicas, and the router in front spreads requests over them (HOST_k: "
                  "host k's address).");
  std::string out = launch::comment_lines(notes);
  std::vector<std::string> workers;
  for (int h = 0; h < hosts; ++h) {
    std::vector<std::string> lines = {flag("--port", kServerPort), "--host 0.0.0.0"};
    for (std::string& l : sglang_flags(one, s)) lines.push_back(std::move(l));
    out += "\n# host " + std::to_string(h) + "\n" +
           server_command(hf_model_id(m.name).value_or(m.name), lines);
    workers.push_back("http://$HOST_" + std::to_string(h) + ":" + std::to_string(kServerPort));
  }
  std::string urls;
  for (const std::string& w : workers) urls += (urls.empty() ? "" : " ") + w;
  return out + "\n# the router, on any host\npython -m sglang_router.launch_router \\\n" +
         launch::shell_continued(
             {"--worker-urls " + urls, "--host 0.0.0.0 --port " + std::to_string(kRouterPort)}, 2);
}

/// One server per pool and the router in front, each pool's replicas inside its server
/// (--dp-size).
std::string emit_sglang_pd(const ModelSpec& m, const serving::Deployment& d,
                           const ServeEngineSettings& s) {
  const int p = s.prefill_replicas, per = d.tp * d.pp;
  std::vector<std::string> notes = {
      "SGLang: " + m.name + " on " + std::to_string(d.gpus()) + " GPUs, tp" + std::to_string(d.tp) +
          " pp" + std::to_string(d.pp) + " dp" + std::to_string(d.dp) +
          (d.ep > 1 ? " ep" + std::to_string(d.ep) : "") + " disaggregated into " +
          std::to_string(p) + " prefill + " + std::to_string(d.dp - p) +
          " decode replicas, as parallax serve-plan simulated it.",
      "the KV cache moves from the prefill to the decode server over NIXL (pip install nixl); "
      "--disaggregation-transfer-backend mooncake with --disaggregation-ib-device is the other "
      "choice.",
      "on one host the decode server starts at GPU " + std::to_string(p * per) +
          " (--base-gpu-id " + std::to_string(p * per) +
          "); on separate hosts give each server --host and the router their addresses."};
  if (p > 1 || d.dp - p > 1)
    notes.push_back(
        "a pool of several replicas runs them inside one server (--dp-size); separate servers, "
        "each given to the router with its own --prefill or --decode, serve the same.");
  if (!hf_model_id(m.name))
    notes.push_back("parallax knows no Hugging Face repository for '" + m.name +
                    "': replace it with the model's path or repository id.");
  const std::string model = hf_model_id(m.name).value_or(m.name);
  std::string out = launch::comment_lines(notes);
  const struct {
    const char* mode;
    int replicas, port;
  } pools[] = {{"prefill", p, kPrefillPort}, {"decode", d.dp - p, kDecodePort}};
  for (const auto& pool : pools) {
    serving::Deployment one = d;
    one.dp = pool.replicas;
    ServeEngineSettings mine = s;
    if (d.wide_ep()) {  // the pool's experts over its own GPUs, with DP attention if several
      one.ep = d.tp * pool.replicas;
      if (pool.replicas > 1) {
        one.tp = one.ep;
        mine.sglang_dp_attention = true;
      }
    }
    std::vector<std::string> lines = {flag("--port", pool.port),
                                      std::string("--disaggregation-mode ") + pool.mode,
                                      "--disaggregation-transfer-backend nixl"};
    for (std::string& l : sglang_flags(one, mine)) lines.push_back(std::move(l));
    out += "\n# " + std::string(pool.mode) + " pool: " + std::to_string(pool.replicas) + " x tp" +
           std::to_string(d.tp) + " pp" + std::to_string(d.pp) +
           "\npython -m sglang.launch_server --model-path " + model + " \\\n" +
           launch::shell_continued(lines, 2);
  }
  return out + "\n# the router in front: clients send requests to port " +
         std::to_string(kRouterPort) +
         "\npython -m sglang_router.launch_router --pd-disaggregation \\\n" +
         launch::shell_continued({"--prefill http://127.0.0.1:" + std::to_string(kPrefillPort),
                                  "--decode http://127.0.0.1:" + std::to_string(kDecodePort),
                                  "--host 0.0.0.0 --port " + std::to_string(kRouterPort)},
                                 2);
}

}  // namespace

Diagnostics check_sglang(const ModelSpec& m, const serving::Deployment& d,
                         const ServeEngineSettings& s) {
  // With DP attention the dp groups live inside the tp ranks: the GPUs are tp * pp.
  serving::Deployment structural = d;
  // With DP attention one server's tp ranks are every GPU: its experts span them all, what the
  // simulator calls wide ep (so two-batch overlap has its all-to-alls).
  if (s.sglang_dp_attention) {
    structural.dp = 1;
    structural.two_batch_overlap = false;
  }
  Diagnostics out;
  for (Diagnostic& g : serving::check_deployment(m, structural, s.gpus))
    // max_num_batched_tokens >= max_num_seqs is vLLM's rule: SGLang's chunked prefill size
    // bounds prefill tokens only.
    if (g.where != "--max-num-batched-tokens") out.push_back(std::move(g));
  if (s.sglang_dp_attention && d.dp >= 1 && d.tp >= 1 && (d.dp < 2 || d.tp % d.dp != 0))
    out.push_back({"--dp",
                   "SGLang's --enable-dp-attention needs 1 < dp-size dividing tp-size, got dp=" +
                       std::to_string(d.dp) + " tp=" + std::to_string(d.tp) + ", want dp in " +
                       launch::divisors_text(d.tp) + " and > 1",
                   "the attention data-parallel groups split the tensor-parallel ranks"});
  if (auto pd = launch::pd_split_problem(s.prefill_replicas, d.dp))
    out.push_back(*pd);
  else if (s.prefill_replicas > 0 && s.sglang_dp_attention)
    out.push_back({"--enable-dp-attention",
                   "parallax does not emit DP attention for a disaggregated deployment, got "
                   "both",
                   "one of the two"});
  const int host = s.gpus_per_node, per = d.tp * d.pp;
  if (host > 0 && server_gpus(d, s) > host && per > 0 &&
      (s.sglang_dp_attention || per > host ? per % host != 0
                                           : host % per != 0 || d.dp % (host / per) != 0))
    out.push_back({"--tp",
                   "on hosts of " + std::to_string(host) +
                       " GPUs a server spans whole hosts "
                       "and a replica fits one, got tp*pp=" +
                       std::to_string(per) + " dp=" + std::to_string(d.dp),
                   "tp*pp a multiple or a divisor of " + std::to_string(host)});
  if (host > 0 && server_gpus(d, s) > host && per > host && d.dp > 1 && !s.sglang_dp_attention)
    out.push_back({"--dp",
                   "SGLang runs data parallelism over several hosts only with DP attention, got "
                   "dp=" +
                       std::to_string(d.dp) + " replicas of " + std::to_string(per) +
                       " GPUs, each over several hosts",
                   "one replica, or --enable-dp-attention"});
  if (auto pd = launch::multi_host_pd_problem("SGLang", d.gpus(), host, s.prefill_replicas))
    out.push_back(*pd);
  if (d.gpu_memory_utilization >= 1)
    out.push_back({"--gpu-memory-utilization",
                   "SGLang's --mem-fraction-static must leave room for activations, got " +
                       launch::number_text(d.gpu_memory_utilization) + ", want < 1",
                   "--gpu-memory-utilization 0.9"});
  return out;
}

Result<std::string> emit_sglang(const ModelSpec& m, const serving::Deployment& simulated,
                                const ServeEngineSettings& settings) {
  // Wide expert parallelism is SGLang's DP attention: one server over every GPU (--tp-size),
  // the attention data-parallel in dp groups, the experts over all of them.
  serving::Deployment d = simulated;
  ServeEngineSettings s = settings;
  if (simulated.wide_ep() && settings.prefill_replicas == 0) {  // P/D: per pool, below
    d.tp = simulated.tp * simulated.dp;
    s.sglang_dp_attention = true;
  }
  Diagnostics bad = check_sglang(m, d, s);
  if (!bad.empty()) return bad;
  if (s.prefill_replicas > 0) return emit_sglang_pd(m, d, s);
  if (s.gpus_per_node > 0 && server_gpus(d, s) > s.gpus_per_node)
    return d.tp * d.pp > s.gpus_per_node || s.sglang_dp_attention ? emit_sglang_multinode(m, d, s)
                                                                  : emit_sglang_per_host(m, d, s);
  return launch::comment_lines(sglang_notes(m, d, s)) +
         server_command(hf_model_id(m.name).value_or(m.name), sglang_flags(d, s));
}

}  // namespace parallax
