// `parallax serve-plan` end to end: the JSON contract, the table with its explanation, the
// launch command of the best deployment, prefill/decode splits (the same numbers as
// `parallax serve --pd`, the disaggregated launch commands, --no-pd), and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tests/cli_support.h"

namespace parallax::testing::cli {
namespace {

// Llama 3.1 8B on 2 H100, a few hundred short requests: a second or so.
const char kSmall[] =
    "serve-plan --model llama3.1-8b --cluster h100-sxm-80gb --gpus 2 --rate 10 --requests 200 "
    "--prompt-len 512 --output-len 64 --ttft-p90 1 --tpot-p90 0.1";

TEST(ServePlanCli, JsonRanksTheDeployments) {
  const CliRun r =
      Parallax(std::string(kSmall) + " --format json --emit vllm", Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  const Json j = ParseOrFail(r.out, "serve-plan");
  for (const char* k : {"model", "cluster", "gpus", "workload", "slo", "candidates", "pruned",
                        "simulated", "ranked", "launch"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["gpus"], 2);
  EXPECT_EQ(j["workload"]["requests"], 200);
  ASSERT_GE(j["ranked"].size(), 1u);
  const Json& best = j["ranked"][0];
  EXPECT_EQ(best["rank"], 1);
  EXPECT_EQ(best["meets"], true);
  EXPECT_EQ(best["deployment"]["gpus"], 2);
  for (const char* k : {"output_tokens_per_s", "output_tokens_per_s_per_gpu", "ttft_p90_s",
                        "tpot_p90_s", "goodput_requests_per_s"})
    EXPECT_GT(best[k].get<double>(), 0.0) << k;
  for (const char* k : {"max_num_seqs", "max_num_batched_tokens", "block_size"})
    EXPECT_TRUE(best["engine"].contains(k)) << k;
  EXPECT_LE(best["ttft_p90_s"].get<double>(), 1.0);
  EXPECT_EQ(j["launch"]["target"], "vllm");
  const std::string cmd = j["launch"]["text"];
  EXPECT_NE(cmd.find("vllm serve meta-llama/Llama-3.1-8B-Instruct"), std::string::npos) << cmd;
  EXPECT_NE(
      cmd.find("--tensor-parallel-size " + std::to_string(best["deployment"]["tp"].get<int>())),
      std::string::npos)
      << cmd;
}

TEST(ServePlanCli, TableExplainsAndEmitsTheSglangCommand) {
  const CliRun r = Parallax(std::string(kSmall) + " --max-load --max-load-top 2 --emit sglang");
  ASSERT_EQ(r.exit_code, 0) << r;
  for (const char* s : {"rank", "deployment", "TTFT p90", "max req/s",
                        "search space: ", "winner: ", "runner-up: ", "why: ",
                        "python -m sglang.launch_server --model-path "
                        "meta-llama/Llama-3.1-8B-Instruct",
                        "--max-running-requests"})
    EXPECT_TRUE(Has(r, s)) << s << "\n" << r;
}

// Llama 3.1 8B as two tp1 replicas under long prompts: 2048 + 256 tokens at 12 req/s.
const char kLongPrompts[] =
    "serve-plan --model llama3.1-8b --cluster h100-sxm-80gb --gpus 2 --tp 1 --rate 12 "
    "--requests 300 --prompt-len 2048 --output-len 256";

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", s);
  return buf;
}

/// A p90 TPOT target between every 1:1 split (below it) and every colocated candidate (above
/// it), from an unconstrained search: the splits' decode replicas only decode.
std::string tpot_only_the_split_meets() {
  const CliRun r =
      Parallax(std::string(kLongPrompts) + " --format json --top 1000", Streams::kStdoutOnly);
  EXPECT_EQ(r.exit_code, 0) << r;
  const Json j = ParseOrFail(r.out, "serve-plan");
  double split_worst = 0, colocated_best = 1e9;
  for (const Json& c : j["ranked"]) {
    const double tpot = c["tpot_p90_s"];
    if (c.contains("pd"))
      split_worst = std::max(split_worst, tpot);
    else
      colocated_best = std::min(colocated_best, tpot);
  }
  EXPECT_GT(split_worst, 0) << r.out;
  EXPECT_LT(split_worst * 1.1, colocated_best) << r.out;  // the premise
  return seconds(0.5 * (split_worst + colocated_best));
}

TEST(ServePlanCli, APrefillDecodeSplitIsServePdWithTheSameNumbers) {
  const std::string tpot = tpot_only_the_split_meets();
  const CliRun r =
      Parallax(std::string(kLongPrompts) + " --tpot-p90 " + tpot + " --format json --emit vllm",
               Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  const Json j = ParseOrFail(r.out, "serve-plan");
  EXPECT_GT(j["pd_candidates"].get<int>(), 0);
  const Json& best = j["ranked"][0];
  EXPECT_EQ(best["meets"], true);
  EXPECT_EQ(best["label"], "tp1 pp1 dp2 pd1:1");
  ASSERT_TRUE(best.contains("pd")) << best.dump(2);
  EXPECT_EQ(best["pd"]["prefill_replicas"], 1);
  EXPECT_EQ(best["pd"]["decode_replicas"], 1);
  const std::string launch = j["launch"]["text"];
  const std::string nixl =
      R"(--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}')";
  const size_t first = launch.find(nixl);
  ASSERT_NE(first, std::string::npos) << launch;
  EXPECT_NE(launch.find(nixl, first + 1), std::string::npos) << launch;  // both pools

  // `serve --pd 1:1` with the winner's engine limits simulates the same thing.
  const CliRun serve = Parallax(
      "serve --model llama3.1-8b --cluster h100-sxm-80gb --gpus 2 --tp 1 --rate 12 "
      "--requests 300 --prompt-len 2048 --output-len 256 --pd 1:1 --format json "
      "--max-num-seqs " +
          std::to_string(best["engine"]["max_num_seqs"].get<int64_t>()) +
          " --max-num-batched-tokens " +
          std::to_string(best["engine"]["max_num_batched_tokens"].get<int64_t>()),
      Streams::kStdoutOnly);
  ASSERT_EQ(serve.exit_code, 0) << serve;
  const Json s = ParseOrFail(serve.out, "serve --pd");
  auto same = [](double a, double b) { return std::abs(a - b) <= 1e-12 * std::abs(b); };
  EXPECT_PRED2(same, best["ttft_p90_s"].get<double>(), s["ttft_s"]["p90"].get<double>());
  EXPECT_PRED2(same, best["tpot_p90_s"].get<double>(), s["tpot_s"]["p90"].get<double>());
  EXPECT_PRED2(same, best["output_tokens_per_s"].get<double>(),
               s["throughput_tokens_per_s"].get<double>());
  EXPECT_PRED2(same, best["pd"]["kv_transfer_s_mean"].get<double>(),
               s["pd"]["kv_transfer_s_mean"].get<double>());
  EXPECT_EQ(best["kv_cache_tokens_per_replica"], s["kv_cache"]["tokens"]);
}

TEST(ServePlanCli, APrefillDecodeWinnerEmitsTheSglangDisaggregatedServers) {
  const std::string tpot = tpot_only_the_split_meets();
  const CliRun r = Parallax(std::string(kLongPrompts) + " --tpot-p90 " + tpot + " --emit sglang");
  ASSERT_EQ(r.exit_code, 0) << r;
  for (const char* s : {"tp1 pp1 dp2 pd1:1", "prefill/decode splits", "winner: tp1 pp1 dp2 pd1:1",
                        "KV transfer prefill -> decode (mean)", "--disaggregation-mode prefill",
                        "--disaggregation-mode decode", "--disaggregation-transfer-backend nixl",
                        "python -m sglang_router.launch_router --pd-disaggregation",
                        "--prefill http://127.0.0.1:30000", "--decode http://127.0.0.1:30001"})
    EXPECT_TRUE(Has(r, s)) << s << "\n" << r;
}

TEST(ServePlanCli, NoPdSearchesTheColocatedDeploymentsOnly) {
  const std::string tpot = tpot_only_the_split_meets();
  CliRun r = Parallax(std::string(kLongPrompts) + " --tpot-p90 " + tpot + " --format json",
                      Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  const Json with = ParseOrFail(r.out, "serve-plan");
  r = Parallax(std::string(kLongPrompts) + " --tpot-p90 " + tpot + " --no-pd --format json",
               Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  const Json without = ParseOrFail(r.out, "serve-plan --no-pd");
  EXPECT_EQ(without["pd_candidates"], 0);
  EXPECT_GT(with["pd_candidates"].get<int>(), 0);
  EXPECT_EQ(without["candidates"].get<int>(),
            with["candidates"].get<int>() - with["pd_candidates"].get<int>());
  for (const Json& c : without["ranked"]) EXPECT_FALSE(c.contains("pd")) << c.dump();
  EXPECT_EQ(without["ranked"][0]["meets"], false);  // only a split meets this target
  r = Parallax(std::string(kLongPrompts) + " --no-pd");
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(Has(r, "prefill/decode splits not searched")) << r;
}

TEST(ServePlanCli, GpusThatDoNotSplitIntoReplicasAreBadInput) {
  const CliRun r = Parallax("serve-plan --model llama3.1-70b --gpus 12 --tp 8 --requests 50");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "--gpus: 12 GPUs do not split into replicas of tp*pp = 8")) << r;
}

TEST(ServePlanCli, AModelThatFitsNowhereSaysWhy) {
  const CliRun r = Parallax("serve-plan --model llama3.1-405b --gpus 2 --requests 50");
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(Has(r, "no deployment of llama3.1-405b on 2 x h100-sxm-80gb fits")) << r;
  EXPECT_TRUE(Has(r, "leave no KV cache")) << r;
}

TEST(ServePlanCli, MaxLoadWithoutATargetIsBadInput) {
  const CliRun r = Parallax("serve-plan --model llama3.1-8b --gpus 1 --requests 50 --max-load");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "--max-load")) << r;
}

}  // namespace
}  // namespace parallax::testing::cli
