// `parallax serve` end to end: the JSON contract, one request's closed form, a trace, and bad
// input.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/cli_support.h"

namespace parallax::testing::cli {
namespace {

TEST(ServeCli, JsonHasTheThroughputAndLatencyStatistics) {
  const CliRun r = Parallax(
      "serve --model llama3.1-8b --cluster h100-sxm-80gb --gpus 2 --tp 1 --requests 200 "
      "--rate 20 --prompt-len 512 --output-len 64 --format json",
      Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  const Json j = ParseOrFail(r.out, "serve");
  EXPECT_EQ(j["requests"], 200);
  EXPECT_EQ(j["deployment"]["dp"], 2);
  for (const char* k : {"throughput_tokens_per_s", "requests_per_s"}) EXPECT_GT(j[k], 0.0) << k;
  for (const char* k : {"ttft_s", "tpot_s", "e2e_s"}) {
    ASSERT_TRUE(j.contains(k)) << k;
    EXPECT_GT(j[k]["mean"], 0.0) << k;
    EXPECT_LE(j[k]["p50"], j[k]["p90"]) << k;
    EXPECT_LE(j[k]["p90"], j[k]["p99"]) << k;
  }
  // Offered 20 req/s of 64 tokens: everything is served, so output tokens/s is about 20 * 64.
  EXPECT_NEAR(j["throughput_tokens_per_s"].get<double>(), 20.0 * 64, 0.25 * 20 * 64);
  EXPECT_GT(j["kv_cache"]["blocks"], 0);
}

// One request alone: e2e = TTFT + (output - 1) TPOT, and TTFT is one prefill step.
TEST(ServeCli, OneRequestIsItsPrefillThenItsDecodeSteps) {
  const CliRun r = Parallax(
      "serve --model llama3.1-8b --gpus 1 --tp 1 --requests 1 --prompt-len 2048 "
      "--output-len 100 --format json",
      Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  const Json j = ParseOrFail(r.out, "serve");
  const double ttft = j["ttft_s"]["mean"], tpot = j["tpot_s"]["mean"], e2e = j["e2e_s"]["mean"];
  EXPECT_NEAR(e2e, ttft + 99 * tpot, 1e-9 * e2e);
  EXPECT_GT(ttft, 3 * tpot);  // 2048 prompt tokens are compute, one decode token is a weight read
  EXPECT_EQ(j["iterations"], 100);
}

TEST(ServeCli, WritesATraceOfTheEngineSteps) {
  ScratchDir dir;
  const CliRun r = Parallax(
      "serve --model llama3.1-8b --gpus 1 --tp 1 --requests 5 --output-len 8 "
      "--trace " +
      Quote(dir.file("steps.json")));
  ASSERT_EQ(r.exit_code, 0) << r;
  std::ifstream in(dir.file("steps.json"));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const Json t = ParseOrFail(text, "trace");
  ASSERT_TRUE(t.contains("traceEvents"));
  EXPECT_GE(t["traceEvents"].size(), 8u);
  EXPECT_EQ(t["traceEvents"][0]["ph"], "X");
}

TEST(ServeCli, BadDeploymentsAndTracesSayWhereAndWhy) {
  CliRun r = Parallax("serve --model llama3.1-70b --gpus 8 --tp 3");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "--tp: tp=3 must divide heads=64")) << r;
  r = Parallax("serve --model llama3.1-405b --gpus 1 --tp 1");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "does not fit")) << r;
  ScratchDir dir;
  std::ofstream(dir.file("trace.jsonl"))
      << "{\"arrival_s\": 0, \"prompt_len\": 10, \"output_len\": 5}\n"
      << "{\"arrival_s\": 1, \"prompt_len\": -3, \"output_len\": 5}\n";
  r = Parallax("serve --model llama3.1-8b --gpus 1 --tp 1 --requests-file " +
               Quote(dir.file("trace.jsonl")));
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "trace.jsonl:2")) << r;
}

}  // namespace
}  // namespace parallax::testing::cli
