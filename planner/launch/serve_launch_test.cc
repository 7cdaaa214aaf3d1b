// Serving launch commands: the exact flags of vLLM and SGLang for a deployment, and each rule
// of the engines refused with its reason.
#include "planner/launch/serve_launch.h"

#include <gtest/gtest.h>

#include <string>

#include "core/model_zoo.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

using testing::mentions;
using testing::text;

ModelSpec zoo(const char* name) { return find_zoo_model(name, "t").value(); }

bool has(const std::string& s, const std::string& needle) {
  return s.find(needle) != std::string::npos;
}

/// Llama 3.1 70B as two tp4 replicas with fp8 weights.
serving::Deployment tp4_dp2() {
  serving::Deployment d;
  d.tp = 4;
  d.dp = 2;
  d.precision = Precision::kFp8;
  d.max_num_seqs = 256;
  d.max_num_batched_tokens = 8192;
  return d;
}

TEST(ServeLaunch, VllmCommandHasTheExactFlags) {
  auto text_or = emit_vllm(zoo("llama3.1-70b"), tp4_dp2(), ServeEngineSettings{.gpus = 8});
  ASSERT_TRUE(text_or.ok()) << text_or.error_text();
  const std::string& t = text_or.value();
  EXPECT_TRUE(has(t, "\nvllm serve meta-llama/Llama-3.1-70B-Instruct \\\n")) << t;
  for (const char* line :
       {"  --tensor-parallel-size 4 \\\n", "  --pipeline-parallel-size 1 \\\n",
        "  --data-parallel-size 2 \\\n", "  --max-num-seqs 256 \\\n",
        "  --max-num-batched-tokens 8192 \\\n", "  --enable-chunked-prefill \\\n",
        "  --gpu-memory-utilization 0.9 \\\n", "  --block-size 16 \\\n",
        "  --kv-cache-dtype auto \\\n", "  --quantization fp8\n"})
    EXPECT_TRUE(has(t, line)) << line << "\n" << t;
  EXPECT_FALSE(has(t, "--enable-expert-parallel")) << t;
  EXPECT_FALSE(has(t, "--max-model-len")) << t;
  // Dense data parallelism: the same as separate instances behind a router, said in a comment.
  EXPECT_TRUE(has(t, "# --data-parallel-size 2 runs the replicas behind one API server")) << t;
  EXPECT_TRUE(has(t, "router")) << t;
}

TEST(ServeLaunch, VllmOneReplicaBf16HasNoDataParallelOrQuantization) {
  serving::Deployment d;
  d.tp = 8;
  auto t = emit_vllm(zoo("llama3.1-70b"), d, {});
  ASSERT_TRUE(t.ok()) << t.error_text();
  EXPECT_FALSE(has(*t, "--data-parallel-size")) << *t;
  EXPECT_FALSE(has(*t, "--quantization")) << *t;
  EXPECT_TRUE(has(*t, "--tensor-parallel-size 8")) << *t;
}

TEST(ServeLaunch, VllmExpertParallelForAMoeModel) {
  serving::Deployment d;
  d.tp = 4;
  d.ep = 4;
  auto t = emit_vllm(zoo("qwen3-30b-a3b"), d, {});
  ASSERT_TRUE(t.ok()) << t.error_text();
  EXPECT_TRUE(has(*t, "vllm serve Qwen/Qwen3-30B-A3B \\\n")) << *t;
  EXPECT_TRUE(has(*t, "  --enable-expert-parallel \\\n")) << *t;
}

TEST(ServeLaunch, VllmWithoutChunkedPrefillWritesTheModelLength) {
  serving::Deployment d;
  d.max_num_batched_tokens = 32768;
  auto t = emit_vllm(zoo("llama3.1-8b"), d,
                     ServeEngineSettings{.enable_chunked_prefill = false, .max_model_len = 32768});
  ASSERT_TRUE(t.ok()) << t.error_text();
  EXPECT_TRUE(has(*t, "  --no-enable-chunked-prefill \\\n")) << *t;
  EXPECT_TRUE(has(*t, "  --max-model-len 32768 \\\n")) << *t;
}

TEST(ServeLaunch, UnknownModelKeepsItsNameAndAsksForThePath) {
  ModelSpec m = zoo("llama3.1-8b");
  m.name = "my-llama";
  auto t = emit_vllm(m, serving::Deployment{}, {});
  ASSERT_TRUE(t.ok()) << t.error_text();
  EXPECT_TRUE(has(*t, "vllm serve my-llama \\\n")) << *t;
  EXPECT_TRUE(has(*t, "replace it with the model's path")) << *t;
  EXPECT_EQ(hf_model_id("LLAMA3.1-70B").value_or(""), "meta-llama/Llama-3.1-70B-Instruct");
  EXPECT_FALSE(hf_model_id("my-llama").has_value());
}

// Wide expert parallelism (ep = tp*dp) is vLLM's --data-parallel-size with
// --enable-expert-parallel, and SGLang's DP attention over one server of every GPU.
TEST(ServeLaunch, WideExpertParallelismInEachEngine) {
  serving::Deployment d = tp4_dp2();
  d.ep = 8;
  auto v = emit_vllm(zoo("qwen3-30b-a3b"), d, {.gpus = 8});
  ASSERT_TRUE(v.ok()) << v.error_text();
  EXPECT_TRUE(has(*v, "--tensor-parallel-size 4")) << *v;
  EXPECT_TRUE(has(*v, "--data-parallel-size 2")) << *v;
  EXPECT_TRUE(has(*v, "--enable-expert-parallel")) << *v;
  EXPECT_FALSE(has(*v, "not within each replica")) << *v;
  auto g = emit_sglang(zoo("qwen3-30b-a3b"), d, {.gpus = 8});
  ASSERT_TRUE(g.ok()) << g.error_text();
  EXPECT_TRUE(has(*g, "--tp-size 8")) << *g;
  EXPECT_TRUE(has(*g, "--dp-size 2")) << *g;
  EXPECT_TRUE(has(*g, "--enable-dp-attention")) << *g;
  EXPECT_TRUE(has(*g, "--ep-size 8")) << *g;
  EXPECT_TRUE(has(*g, "as parallax simulated it")) << *g;
  // SGLang divides --max-running-requests over the attention-DP ranks: 256 each is 512 in all.
  EXPECT_TRUE(has(*g, "--max-running-requests 512")) << *g;
  d.two_batch_overlap = true;
  v = emit_vllm(zoo("qwen3-30b-a3b"), d, {.gpus = 8});
  ASSERT_TRUE(v.ok()) << v.error_text();
  EXPECT_TRUE(has(*v, "--enable-dbo")) << *v;
  EXPECT_TRUE(has(*v, "--all2all-backend deepep_low_latency")) << *v;
  g = emit_sglang(zoo("qwen3-30b-a3b"), d, {.gpus = 8});
  ASSERT_TRUE(g.ok()) << g.error_text();
  EXPECT_TRUE(has(*g, "--enable-two-batch-overlap")) << *g;
  // tp2 x dp4 split 2:2: each pool one server with DP attention over its own 4 GPUs.
  d.two_batch_overlap = false;
  d.tp = 2;
  d.dp = 4;
  g = emit_sglang(zoo("qwen3-30b-a3b"), d, {.gpus = 8, .prefill_replicas = 2});
  ASSERT_TRUE(g.ok()) << g.error_text();
  EXPECT_TRUE(has(*g,
                  "--disaggregation-mode prefill \\\n  --disaggregation-transfer-backend nixl "
                  "\\\n  --tp-size 4 \\\n  --dp-size 2 \\\n  --enable-dp-attention "
                  "\\\n  --ep-size 4"))
      << *g;
}

// Experts inside each of several replicas (ep = tp): --data-parallel-size would spread them over
// all tp x dp GPUs, so each replica is its own vllm serve on its own GPUs and port.
TEST(ServeLaunch, VllmExpertParallelReplicasAreSeparateInstances) {
  serving::Deployment d = tp4_dp2();
  d.ep = 4;
  auto v = emit_vllm(zoo("qwen3-30b-a3b"), d, {.gpus = 8, .gpus_per_node = 8});
  ASSERT_TRUE(v.ok()) << v.error_text();
  EXPECT_FALSE(has(*v, "  --data-parallel-size")) << *v;
  EXPECT_TRUE(
      has(*v, "CUDA_VISIBLE_DEVICES=0,1,2,3 vllm serve Qwen/Qwen3-30B-A3B \\\n  --port 8000"))
      << *v;
  EXPECT_TRUE(
      has(*v, "CUDA_VISIBLE_DEVICES=4,5,6,7 vllm serve Qwen/Qwen3-30B-A3B \\\n  --port 8001"))
      << *v;
  EXPECT_TRUE(has(*v, "router")) << *v;
}

// On several hosts: replicas of one command with vLLM's multi-node data parallelism (the first
// host serving the API, the others headless); an instance wider than a host over a Ray cluster.
TEST(ServeLaunch, VllmOnSeveralHosts) {
  serving::Deployment d = tp4_dp2();
  d.dp = 4;
  auto v = emit_vllm(zoo("llama3.1-70b"), d, {.gpus = 16, .gpus_per_node = 8});
  ASSERT_TRUE(v.ok()) << v.error_text();
  EXPECT_TRUE(has(*v,
                  "# host 0\nvllm serve meta-llama/Llama-3.1-70B-Instruct \\\n  "
                  "--tensor-parallel-size 4"))
      << *v;
  EXPECT_TRUE(has(*v,
                  "# host 1\nvllm serve meta-llama/Llama-3.1-70B-Instruct \\\n  "
                  "--headless"))
      << *v;
  EXPECT_TRUE(has(*v, "--data-parallel-size-local 2")) << *v;
  EXPECT_TRUE(has(*v, "--data-parallel-start-rank 2")) << *v;
  EXPECT_TRUE(has(*v, "--data-parallel-address $HEAD_IP")) << *v;
  serving::Deployment wide;
  wide.tp = 16;
  v = emit_vllm(zoo("llama3.1-405b"), wide, {.gpus = 16, .gpus_per_node = 8});
  ASSERT_TRUE(v.ok()) << v.error_text();
  EXPECT_TRUE(has(*v, "ray start --head")) << *v;
  EXPECT_TRUE(has(*v, "ray start --address $HEAD_IP:6379")) << *v;
  EXPECT_TRUE(has(*v, "--distributed-executor-backend ray")) << *v;
  wide.tp = 12;  // an instance over one and a half hosts
  EXPECT_TRUE(
      mentions(check_vllm(zoo("llama3.1-405b"), wide, {.gpus_per_node = 8}), "spans whole hosts"));
}

// SGLang on several hosts: one server per host rank with --nnodes/--node-rank/--dist-init-addr;
// plain --dp-size replicas, which SGLang does not run over hosts, as one server a host behind a
// router.
TEST(ServeLaunch, SglangOnSeveralHosts) {
  serving::Deployment wide;
  wide.tp = 16;
  auto g = emit_sglang(zoo("llama3.1-405b"), wide, {.gpus = 16, .gpus_per_node = 8});
  ASSERT_TRUE(g.ok()) << g.error_text();
  EXPECT_TRUE(has(*g, "--nnodes 2 \\\n  --node-rank 1 \\\n  --dist-init-addr $HEAD_IP:20000"))
      << *g;
  serving::Deployment d = tp4_dp2();
  d.tp = 8;
  g = emit_sglang(zoo("llama3.1-70b"), d, {.gpus = 16, .gpus_per_node = 8});
  ASSERT_TRUE(g.ok()) << g.error_text();
  EXPECT_FALSE(has(*g, "  --dp-size")) << *g;
  EXPECT_TRUE(has(*g, "# host 1\npython -m sglang.launch_server")) << *g;
  EXPECT_TRUE(has(*g, "--worker-urls http://$HOST_0:30000 http://$HOST_1:30000")) << *g;
  wide.dp = 2;
  EXPECT_TRUE(mentions(check_sglang(zoo("llama3.1-405b"), wide, {.gpus_per_node = 8}),
                       "only with DP attention"));
}

TEST(ServeLaunch, VllmRefusesEachRuleWithItsReason) {
  const ModelSpec dense = zoo("llama3.1-70b");
  auto refused = [&](const ModelSpec& m, const serving::Deployment& d, const ServeEngineSettings& s,
                     const std::string& needle) {
    auto t = emit_vllm(m, d, s);
    ASSERT_FALSE(t.ok()) << needle;
    EXPECT_TRUE(mentions(t.errors(), needle)) << needle << "\n" << text(t.errors());
  };
  refused(dense, tp4_dp2(), {.gpus = 16}, "--gpus: gpus=16 but tp*pp*dp = 8");
  serving::Deployment d = tp4_dp2();
  d.max_num_batched_tokens = 128;
  refused(dense, d, {}, "--max-num-batched-tokens: 128 is below max-num-seqs=256");
  refused(dense, tp4_dp2(), {.enable_chunked_prefill = false, .max_model_len = 131072},
          "whole prompt must fit one step, got 8192, want >= max_model_len=131072");
  refused(dense, tp4_dp2(), {.enable_chunked_prefill = false}, "no max_model_len was given");
  d = tp4_dp2();
  d.block_size = 24;
  refused(dense, d, {}, "--block-size: vLLM's CUDA KV-cache block size");
  d = tp4_dp2();
  d.ep = 2;
  refused(dense, d, {}, "--ep: ep=2 needs a MoE model");
  d.dp = 1;
  refused(zoo("qwen3-30b-a3b"), d, {}, "want 1, tp=4 or tp*dp=4");
  // Every reason at once.
  d = tp4_dp2();
  d.block_size = 24;
  d.ep = 2;
  d.max_num_batched_tokens = 128;
  auto all = emit_vllm(dense, d, {.gpus = 16});
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.errors().size(), 4u) << text(all.errors());
}

TEST(ServeLaunch, SglangCommandHasTheExactFlags) {
  auto t = emit_sglang(zoo("llama3.1-70b"), tp4_dp2(), ServeEngineSettings{.gpus = 8});
  ASSERT_TRUE(t.ok()) << t.error_text();
  EXPECT_TRUE(has(
      *t, "\npython -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B-Instruct \\\n"))
      << *t;
  for (const char* line :
       {"  --tp-size 4 \\\n", "  --dp-size 2 \\\n", "  --max-running-requests 256 \\\n",
        "  --chunked-prefill-size 8192 \\\n", "  --mem-fraction-static 0.9 \\\n",
        "  --page-size 16 \\\n", "  --quantization fp8\n"})
    EXPECT_TRUE(has(*t, line)) << line << "\n" << *t;
  EXPECT_FALSE(has(*t, "--pp-size")) << *t;
  EXPECT_FALSE(has(*t, "--ep-size")) << *t;
  EXPECT_FALSE(has(*t, "--enable-dp-attention")) << *t;
  EXPECT_TRUE(has(*t, "runs 2 copies of the model (tp4 pp1 each) inside one server")) << *t;
}

TEST(ServeLaunch, SglangExpertParallelPipelineAndNoChunkedPrefill) {
  serving::Deployment d;
  d.tp = 4;
  d.pp = 2;
  d.ep = 4;
  auto t = emit_sglang(zoo("qwen3-30b-a3b"), d, {.enable_chunked_prefill = false});
  ASSERT_TRUE(t.ok()) << t.error_text();
  EXPECT_TRUE(has(*t, "  --pp-size 2 \\\n")) << *t;
  EXPECT_TRUE(has(*t, "  --ep-size 4 \\\n")) << *t;
  EXPECT_TRUE(has(*t, "  --chunked-prefill-size -1 \\\n")) << *t;
}

TEST(ServeLaunch, SglangRefusesEachRuleWithItsReason) {
  serving::Deployment d;
  d.tp = 4;
  d.ep = 3;
  auto t = emit_sglang(zoo("qwen3-30b-a3b"), d, {});
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(mentions(t.errors(), "ep=3 must divide tp=4")) << text(t.errors());

  d = serving::Deployment{};
  d.tp = 4;
  d.dp = 3;
  t = emit_sglang(zoo("llama3.1-70b"), d, {.sglang_dp_attention = true});
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(mentions(t.errors(), "--enable-dp-attention needs 1 < dp-size dividing tp-size"))
      << text(t.errors());
  d.dp = 2;
  t = emit_sglang(zoo("llama3.1-70b"), d, {.gpus = 4, .sglang_dp_attention = true});
  ASSERT_TRUE(t.ok()) << t.error_text();  // DP attention runs inside the 4 tp ranks
  EXPECT_TRUE(has(*t, "  --enable-dp-attention \\\n")) << *t;

  d = serving::Deployment{};
  d.gpu_memory_utilization = 1.0;
  d.ep = 2;
  t = emit_sglang(zoo("llama3.1-8b"), d, {.gpus = 2});
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(mentions(t.errors(), "--mem-fraction-static must leave room")) << text(t.errors());
  EXPECT_TRUE(mentions(t.errors(), "needs a MoE model")) << text(t.errors());
  EXPECT_TRUE(mentions(t.errors(), "--gpus: gpus=2 but tp*pp*dp = 1")) << text(t.errors());
  // vLLM's token-budget rule is not SGLang's.
  d = serving::Deployment{};
  d.max_num_batched_tokens = 64;
  EXPECT_TRUE(emit_sglang(zoo("llama3.1-8b"), d, {}).ok());
}

/// How often `needle` occurs in `s`.
int count(const std::string& s, const std::string& needle) {
  int n = 0;
  for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + 1)) ++n;
  return n;
}

// Disaggregated 1 prefill + 3 decode replicas of tp2: one `vllm serve` per pool, each with the
// NIXL connector, the decode pool's three replicas behind one server, distinct side-channel ports.
TEST(ServeLaunch, VllmDisaggregatedRunsOneServePerPoolWithTheNixlConnector) {
  serving::Deployment d;
  d.tp = 2;
  d.dp = 4;
  auto t = emit_vllm(zoo("llama3.1-8b"), d, {.gpus = 8, .prefill_replicas = 1});
  ASSERT_TRUE(t.ok()) << t.error_text();
  EXPECT_EQ(count(*t, "vllm serve meta-llama/Llama-3.1-8B-Instruct \\\n"), 2) << *t;
  EXPECT_EQ(count(*t,
                  "  --kv-transfer-config "
                  "'{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'\n"),
            2)
      << *t;
  EXPECT_EQ(count(*t, "  --tensor-parallel-size 2 \\\n"), 2) << *t;
  const size_t decode = t->find("# decode pool");
  ASSERT_NE(decode, std::string::npos) << *t;
  const std::string prefill_part = t->substr(0, decode), decode_part = t->substr(decode);
  EXPECT_TRUE(has(prefill_part, "VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve")) << *t;
  EXPECT_TRUE(has(prefill_part, "  --port 8100 \\\n")) << *t;
  EXPECT_FALSE(has(prefill_part, "--data-parallel-size")) << *t;
  EXPECT_TRUE(has(decode_part, "VLLM_NIXL_SIDE_CHANNEL_PORT=5601 vllm serve")) << *t;
  EXPECT_TRUE(has(decode_part, "  --port 8200 \\\n")) << *t;
  EXPECT_TRUE(has(decode_part, "  --data-parallel-size 3 \\\n")) << *t;
  EXPECT_TRUE(has(*t, "CUDA_VISIBLE_DEVICES=0,1 for the prefill pool, 2,3,4,5,6,7")) << *t;
  EXPECT_TRUE(has(*t, "toy_proxy_server.py --port 8000 --prefiller-hosts localhost")) << *t;
}

TEST(ServeLaunch, SglangDisaggregatedRunsAPrefillAndADecodeServerBehindTheRouter) {
  auto t = emit_sglang(zoo("llama3.1-70b"), tp4_dp2(), {.gpus = 8, .prefill_replicas = 1});
  ASSERT_TRUE(t.ok()) << t.error_text();
  EXPECT_EQ(count(*t,
                  "python -m sglang.launch_server --model-path "
                  "meta-llama/Llama-3.1-70B-Instruct \\\n"),
            2)
      << *t;
  for (const char* line :
       {"  --port 30000 \\\n  --disaggregation-mode prefill \\\n"
        "  --disaggregation-transfer-backend nixl \\\n  --tp-size 4 \\\n",
        "  --port 30001 \\\n  --disaggregation-mode decode \\\n"
        "  --disaggregation-transfer-backend nixl \\\n  --tp-size 4 \\\n",
        "\npython -m sglang_router.launch_router --pd-disaggregation \\\n"
        "  --prefill http://127.0.0.1:30000 \\\n  --decode http://127.0.0.1:30001 \\\n"})
    EXPECT_TRUE(has(*t, line)) << line << "\n" << *t;
  EXPECT_FALSE(has(*t, "--dp-size")) << *t;  // one replica a pool
  EXPECT_EQ(count(*t, "  --chunked-prefill-size 8192 \\\n"), 2) << *t;
  EXPECT_TRUE(has(*t, "--base-gpu-id 4")) << *t;
}

TEST(ServeLaunch, ADisaggregatedSplitMustLeaveEachPoolAReplica) {
  for (int p : {2, 3, -1}) {
    auto v = emit_vllm(zoo("llama3.1-70b"), tp4_dp2(), {.prefill_replicas = p});
    ASSERT_FALSE(v.ok()) << p;
    EXPECT_TRUE(mentions(v.errors(), "--pd: a disaggregated deployment needs P prefill + D decode"))
        << text(v.errors());
    auto g = emit_sglang(zoo("llama3.1-70b"), tp4_dp2(), {.prefill_replicas = p});
    ASSERT_FALSE(g.ok()) << p;
    EXPECT_TRUE(mentions(g.errors(), "P + D = dp=2, got P=" + std::to_string(p)))
        << text(g.errors());
  }
}

}  // namespace
}  // namespace parallax
