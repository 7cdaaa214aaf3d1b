// vLLM: the `vllm serve` command of a deployment, and the rules vLLM enforces.
//
// Flag names are those of vLLM's engine arguments
// (https://docs.vllm.ai/en/stable/configuration/engine_args.html): --tensor-parallel-size,
// --pipeline-parallel-size, --data-parallel-size, --enable-expert-parallel, --max-num-seqs,
// --max-num-batched-tokens, --enable-chunked-prefill (--no-enable-chunked-prefill),
// --max-model-len, --gpu-memory-utilization, --block-size, --kv-cache-dtype, --quantization.
// Block sizes are vllm/config/cache.py's BlockSize = Literal[1, 8, 16, 32, 64, 128]
// (https://docs.vllm.ai/en/v0.10.0/api/vllm/config.html). SchedulerConfig refuses
// max_num_batched_tokens < max_num_seqs, and, without chunked prefill,
// max_num_batched_tokens < max_model_len (a whole prompt must fit one step). With
// --enable-expert-parallel the experts are spread over every tp x dp rank of the deployment
// (EP size = tp * dp), never over a subset of a replica's tp ranks.
//
// Disaggregated prefill/decode follows vLLM's NixlConnector usage guide
// (https://docs.vllm.ai/en/latest/features/nixl_connector_usage.html, docs/features/
// nixl_connector_usage.md): one `vllm serve` per pool, each with
// --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' (NixlConnector
// ignores kv_role; the proxy decides who prefills), VLLM_NIXL_SIDE_CHANNEL_PORT unique per
// worker on a host (a DP engine uses base + dp_rank), and a proxy in front that sends each
// request to a prefill instance and then to a decode instance (vLLM's example
// tests/v1/kv_connector/nixl_integration/toy_proxy_server.py with --prefiller-hosts/-ports and
// --decoder-hosts/-ports). Data parallelism inside a pool is supported (the compatibility matrix,
// docs/features/nixl_connector_compatibility.md).

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>
#include <string>
#include <vector>

#include "planner/launch/emitters.h"
#include "planner/launch/serve_launch.h"

namespace parallax {
namespace {

constexpr std::array<int, 6> kVllmBlockSizes = {1, 8, 16, 32, 64, 128};

std::string flag(const char* name, int64_t v) {
  return std::string(name) + " " + std::to_string(v);
}

struct HfName {
  const char* zoo;
  const char* hf;
};

// Instruction-tuned checkpoints, the ones a server is deployed with.
constexpr HfName kHfNames[] = {
    {"llama2-7b", "meta-llama/Llama-2-7b-chat-hf"},
    {"llama2-70b", "meta-llama/Llama-2-70b-chat-hf"},
    {"llama3.1-8b", "meta-llama/Llama-3.1-8B-Instruct"},
    {"llama3.1-70b", "meta-llama/Llama-3.1-70B-Instruct"},
    {"llama3.1-405b", "meta-llama/Llama-3.1-405B-Instruct"},
    {"mixtral-8x7b", "mistralai/Mixtral-8x7B-Instruct-v0.1"},
    {"mixtral-8x22b", "mistralai/Mixtral-8x22B-Instruct-v0.1"},
    {"qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B"},
    {"qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B"},
    {"deepseek-v3", "deepseek-ai/DeepSeek-V3"},
};

constexpr int kNixlSideChannelPort = 5600;  // vLLM's default VLLM_NIXL_SIDE_CHANNEL_PORT
constexpr int kPrefillPort = 8100, kDecodePort = 8200, kProxyPort = 8000;

/// The notes on running the replicas of one engine command (`d.dp` of them).
void replica_notes(const ModelSpec& m, const serving::Deployment& d,
                   std::vector<std::string>* notes) {
  if (d.dp > 1 && !m.moe)
    notes->push_back("--data-parallel-size " + std::to_string(d.dp) +
                     " runs the replicas behind one API server; for a dense model, " +
                     std::to_string(d.dp) + " separate `vllm serve` instances of " +
                     std::to_string(d.tp * d.pp) +
                     " GPUs each (CUDA_VISIBLE_DEVICES, one port each) behind a router serve the "
                     "same.");
}

std::string gpu_list(int first, int count) {
  std::string s;
  for (int g = first; g < first + count; ++g) s += (s.empty() ? "" : ",") + std::to_string(g);
  return s;
}

std::vector<std::string> vllm_pd_notes(const ModelSpec& m, const serving::Deployment& d, int p) {
  const int per = d.tp * d.pp, decode = d.dp - p;
  std::vector<std::string> notes = {
      "vLLM: " + m.name + " on " + std::to_string(d.gpus()) + " GPUs, tp" + std::to_string(d.tp) +
          " pp" + std::to_string(d.pp) + " dp" + std::to_string(d.dp) +
          (d.ep > 1 ? " ep" + std::to_string(d.ep) : "") + " disaggregated into " +
          std::to_string(p) + " prefill + " + std::to_string(decode) +
          " decode replicas, as parallax serve-plan simulated it.",
      "the KV cache moves from the prefill to the decode instances over NIXL (pip install nixl; "
      "UCX_NET_DEVICES picks the NICs).",
      "on one host: CUDA_VISIBLE_DEVICES=" + gpu_list(0, p * per) + " for the prefill pool, " +
          gpu_list(p * per, decode * per) +
          " for the decode pool; on separate hosts set VLLM_NIXL_SIDE_CHANNEL_HOST to each "
          "host's address.",
      "in front, a proxy that sends each request to a prefill instance, then to a decode "
      "instance, e.g. vLLM's example: python tests/v1/kv_connector/nixl_integration/"
      "toy_proxy_server.py --port " +
          std::to_string(kProxyPort) + " --prefiller-hosts localhost --prefiller-ports " +
          std::to_string(kPrefillPort) + " --decoder-hosts localhost --decoder-ports " +
          std::to_string(kDecodePort)};
  if (!hf_model_id(m.name))
    notes.push_back("parallax knows no Hugging Face repository for '" + m.name +
                    "': replace it with the model's path or repository id.");
  if (d.pp > 1)
    notes.push_back(
        "vLLM's NixlConnector compatibility matrix does not list pipeline parallelism: "
        "check it with your vLLM version.");
  return notes;
}

std::vector<std::string> vllm_notes(const ModelSpec& m, const serving::Deployment& d) {
  std::vector<std::string> notes;
  notes.push_back("vLLM: " + m.name + " on " + std::to_string(d.gpus()) + " GPUs, tp" +
                  std::to_string(d.tp) + " pp" + std::to_string(d.pp) + " dp" +
                  std::to_string(d.dp) + (d.ep > 1 ? " ep" + std::to_string(d.ep) : "") +
                  ", as parallax serve-plan simulated it.");
  if (!hf_model_id(m.name))
    notes.push_back("parallax knows no Hugging Face repository for '" + m.name +
                    "': replace it with the model's path or repository id.");
  replica_notes(m, d, &notes);
  if (d.two_batch_overlap)
    notes.push_back(
        "--enable-dbo (dual-batch overlap) runs with DeepEP: add --all2all-backend "
        "deepep_low_latency for decode-heavy load or deepep_high_throughput for prefill-heavy.");
  return notes;
}

/// The engine flags of `d` (its dp replicas behind one server), one flag per entry.
std::vector<std::string> vllm_flags(const serving::Deployment& d, const ServeEngineSettings& s) {
  std::vector<std::string> lines = {flag("--tensor-parallel-size", d.tp)};
  lines.push_back(flag("--pipeline-parallel-size", d.pp));
  if (d.dp > 1) lines.push_back(flag("--data-parallel-size", d.dp));
  if (d.ep > 1) lines.push_back("--enable-expert-parallel");
  if (d.two_batch_overlap) lines.push_back("--enable-dbo");
  lines.push_back(flag("--max-num-seqs", d.max_num_seqs));
  lines.push_back(flag("--max-num-batched-tokens", d.max_num_batched_tokens));
  lines.push_back(s.enable_chunked_prefill ? "--enable-chunked-prefill"
                                           : "--no-enable-chunked-prefill");
  if (s.max_model_len > 0) lines.push_back(flag("--max-model-len", s.max_model_len));
  lines.push_back("--gpu-memory-utilization " + launch::number_text(d.gpu_memory_utilization));
  lines.push_back(flag("--block-size", d.block_size));
  lines.push_back("--kv-cache-dtype auto");  // the simulated KV cache is bf16
  if (d.precision == Precision::kFp8) lines.push_back("--quantization fp8");
  if (d.precision == Precision::kFp32) lines.push_back("--dtype float32");
  return lines;
}

/// One `vllm serve` per pool, each of the pool's replicas behind its own API server.
std::string emit_vllm_pd(const ModelSpec& m, const serving::Deployment& d,
                         const ServeEngineSettings& s) {
  const std::string model = hf_model_id(m.name).value_or(m.name);
  std::string out = launch::comment_lines(vllm_pd_notes(m, d, s.prefill_replicas));
  const struct {
    const char* name;
    int replicas, port, side_channel;
  } pools[] = {{"prefill", s.prefill_replicas, kPrefillPort, kNixlSideChannelPort},
               {"decode", d.dp - s.prefill_replicas, kDecodePort,
                kNixlSideChannelPort + s.prefill_replicas}};
  for (const auto& pool : pools) {
    serving::Deployment one = d;
    one.dp = pool.replicas;
    std::vector<std::string> notes = {std::string(pool.name) +
                                      " pool: " + std::to_string(pool.replicas) + " x tp" +
                                      std::to_string(d.tp) + " pp" + std::to_string(d.pp) + "."};
    replica_notes(m, one, &notes);
    std::vector<std::string> lines = {flag("--port", pool.port)};
    for (std::string& l : vllm_flags(one, s)) lines.push_back(std::move(l));
    lines.push_back(
        R"(--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}')");
    out += "\n" + launch::comment_lines(notes) +
           "VLLM_NIXL_SIDE_CHANNEL_PORT=" + std::to_string(pool.side_channel) + " vllm serve " +
           model + " \\\n" + launch::shell_continued(lines, 2);
  }
  return out;
}

constexpr int kServePort = 8000, kDpRpcPort = 13345, kRayPort = 6379;

/// Expert parallelism inside each replica, with several replicas: vLLM's
/// --enable-expert-parallel with --data-parallel-size would spread the experts over all tp x dp
/// ranks, so each replica is its own `vllm serve`.
bool separate_replicas(const ModelSpec& m, const serving::Deployment& d) {
  return m.moe && d.ep > 1 && d.dp > 1 && !d.wide_ep();
}

/// GPUs of one host, or every GPU of the deployment when the host size is not given.
int host_gpus(const serving::Deployment& d, const ServeEngineSettings& s) {
  return s.gpus_per_node > 0 ? s.gpus_per_node : d.gpus();
}

std::string command(const std::string& prefix, const std::string& model,
                    const std::vector<std::string>& lines) {
  return prefix + "vllm serve " + model + " \\\n" + launch::shell_continued(lines, 2);
}

/// dp separate instances, `per_host` of them on each host, each on its own GPUs and port; a
/// router in front.
std::string emit_vllm_replicas(const ModelSpec& m, const serving::Deployment& d,
                               const ServeEngineSettings& s) {
  const std::string model = hf_model_id(m.name).value_or(m.name);
  const int per = d.tp * d.pp, per_host = std::max(1, host_gpus(d, s) / per);
  std::vector<std::string> notes = vllm_notes(m, d);
  notes.push_back("each of the " + std::to_string(d.dp) +
                  " replicas is its own `vllm serve` with the experts over its own " +
                  std::to_string(d.tp) +
                  " tensor-parallel GPUs, as simulated: with "
                  "--data-parallel-size, --enable-expert-parallel would spread them over all "
                  "tp x dp = " +
                  std::to_string(d.tp * d.dp) + " GPUs.");
  notes.push_back("put a router (vLLM's router, or any HTTP load balancer) in front of the " +
                  std::to_string(d.dp) + " ports.");
  serving::Deployment one = d;
  one.dp = 1;
  std::string out = launch::comment_lines(notes);
  for (int r = 0; r < d.dp; ++r) {
    if (r % per_host == 0 && d.gpus() > host_gpus(d, s))
      out += "\n# host " + std::to_string(r / per_host) + "\n";
    std::vector<std::string> lines = {flag("--port", kServePort + r % per_host)};
    for (std::string& l : vllm_flags(one, s)) lines.push_back(std::move(l));
    out +=
        command("CUDA_VISIBLE_DEVICES=" + gpu_list((r % per_host) * per, per) + " ", model, lines);
  }
  return out;
}

/// One instance over several hosts (tp * pp above a host): a Ray cluster of the hosts, and the
/// command on its head with the Ray executor (and Ray data parallelism for several replicas).
std::string emit_vllm_ray(const ModelSpec& m, const serving::Deployment& d,
                          const ServeEngineSettings& s) {
  const int hosts = (d.gpus() + host_gpus(d, s) - 1) / host_gpus(d, s);
  std::vector<std::string> notes = vllm_notes(m, d);
  notes.push_back("one instance spans " + std::to_string(d.tp * d.pp) +
                  " GPUs, more than a "
                  "host's " +
                  std::to_string(host_gpus(d, s)) + ": start a Ray cluster over the " +
                  std::to_string(hosts) +
                  " hosts, then run vllm serve on its head "
                  "(HEAD_IP: the head host's address).");
  std::vector<std::string> lines = vllm_flags(d, s);
  lines.push_back("--distributed-executor-backend ray");
  if (d.dp > 1) lines.push_back("--data-parallel-backend ray");
  return launch::comment_lines(notes) + "\n# head host\nray start --head --port " +
         std::to_string(kRayPort) +
         "\n# each other host\nray start --address $HEAD_IP:" + std::to_string(kRayPort) +
         "\n\n# then, on the head host\n" +
         command("", hf_model_id(m.name).value_or(m.name), lines);
}

/// The replicas of one command over several hosts: vLLM's multi-node data parallelism, the
/// first host running the API server and the others headless.
std::string emit_vllm_multinode_dp(const ModelSpec& m, const serving::Deployment& d,
                                   const ServeEngineSettings& s) {
  const int per_host = host_gpus(d, s) / (d.tp * d.pp);
  const int hosts = d.dp / per_host;
  std::vector<std::string> notes = vllm_notes(m, d);
  notes.push_back("the " + std::to_string(d.dp) + " data-parallel ranks run " +
                  std::to_string(per_host) + " to a host on " + std::to_string(hosts) +
                  " hosts (HEAD_IP: the first host's address); the API server runs on the first.");
  std::string out = launch::comment_lines(notes);
  for (int h = 0; h < hosts; ++h) {
    std::vector<std::string> lines = vllm_flags(d, s);
    if (h > 0) lines.insert(lines.begin(), "--headless");
    lines.push_back(flag("--data-parallel-size-local", per_host));
    if (h > 0) lines.push_back(flag("--data-parallel-start-rank", h * per_host));
    lines.push_back("--data-parallel-address $HEAD_IP");
    lines.push_back(flag("--data-parallel-rpc-port", kDpRpcPort));
    out += "\n# host " + std::to_string(h) + "\n" +
           command("", hf_model_id(m.name).value_or(m.name), lines);
  }
  return out;
}

}  // namespace

std::optional<std::string> hf_model_id(const std::string& model_name) {
  std::string key = model_name;
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const HfName& n : kHfNames)
    if (key == n.zoo) return std::string(n.hf);
  return std::nullopt;
}

Diagnostics check_vllm(const ModelSpec& m, const serving::Deployment& d,
                       const ServeEngineSettings& s) {
  Diagnostics out = serving::check_deployment(m, d, s.gpus);
  if (d.tp < 1 || d.pp < 1 || d.dp < 1 || d.ep < 1) return out;  // reported; nothing more to say
  if (std::find(kVllmBlockSizes.begin(), kVllmBlockSizes.end(), d.block_size) ==
      kVllmBlockSizes.end())
    out.push_back({"--block-size",
                   "vLLM's CUDA KV-cache block size must be one of its sizes, got " +
                       std::to_string(d.block_size) + ", want 1, 8, 16, 32, 64 or 128",
                   "--block-size 16 (vLLM's default)"});
  if (!s.enable_chunked_prefill) {
    if (s.max_model_len <= 0)
      out.push_back({"--max-model-len",
                     "without chunked prefill vLLM needs max_num_batched_tokens >= max_model_len, "
                     "and no max_model_len was given",
                     "give the longest prompt + output, or turn chunked prefill on"});
    else if (d.max_num_batched_tokens < s.max_model_len)
      out.push_back({"--max-num-batched-tokens",
                     "without chunked prefill a whole prompt must fit one step, got " +
                         std::to_string(d.max_num_batched_tokens) +
                         ", want >= max_model_len=" + std::to_string(s.max_model_len),
                     "--max-num-batched-tokens " + std::to_string(s.max_model_len) +
                         ", or --enable-chunked-prefill"});
  }
  if (auto pd = launch::pd_split_problem(s.prefill_replicas, d.dp)) out.push_back(*pd);
  const int host = s.gpus_per_node;
  const int per = d.tp * d.pp;
  if (host > 0 && d.gpus() > host && per < host && (host % per != 0 || d.dp % (host / per) != 0))
    out.push_back({"--tp",
                   "on several hosts of " + std::to_string(host) +
                       " GPUs each replica's tp*pp=" + std::to_string(per) +
                       " GPUs must divide a host and the replicas fill "
                       "whole hosts, got dp=" +
                       std::to_string(d.dp),
                   "tp*pp in " + launch::divisors_text(host) + " with dp a multiple of " +
                       std::to_string(host / std::max(1, per))});
  if (host > 0 && per > host && per % host != 0)
    out.push_back({"--tp",
                   "an instance over several hosts spans whole hosts of " + std::to_string(host) +
                       " GPUs, got tp*pp=" + std::to_string(per),
                   "tp*pp a multiple of " + std::to_string(host)});
  if (auto pd = launch::multi_host_pd_problem("vLLM", d.gpus(), host, s.prefill_replicas))
    out.push_back(*pd);
  if (d.ep > 1 && m.moe && d.ep != d.tp && d.ep != d.tp * d.dp)
    out.push_back({"--ep",
                   "vLLM's --enable-expert-parallel spreads the experts over all tensor-parallel "
                   "ranks of an instance (and over every data-parallel rank), got ep=" +
                       std::to_string(d.ep) + ", want 1, tp=" + std::to_string(d.tp) +
                       " or tp*dp=" + std::to_string(d.tp * d.dp),
                   "--ep " + std::to_string(d.tp) + " or --ep 1"});
  return out;
}

Result<std::string> emit_vllm(const ModelSpec& m, const serving::Deployment& d,
                              const ServeEngineSettings& s) {
  Diagnostics bad = check_vllm(m, d, s);
  if (!bad.empty()) return bad;
  if (s.prefill_replicas > 0) return emit_vllm_pd(m, d, s);
  if (separate_replicas(m, d)) return emit_vllm_replicas(m, d, s);
  if (d.tp * d.pp > host_gpus(d, s)) return emit_vllm_ray(m, d, s);
  if (d.gpus() > host_gpus(d, s)) return emit_vllm_multinode_dp(m, d, s);
  return launch::comment_lines(vllm_notes(m, d)) +
         command("", hf_model_id(m.name).value_or(m.name), vllm_flags(d, s));
}

}  // namespace parallax
