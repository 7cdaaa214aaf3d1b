// `parallax serve-plan` end to end: the JSON contract, the table with its explanation, the
// launch command of the best deployment, and bad input.
#include <gtest/gtest.h>

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
