// `parallax serve` end to end: the JSON contract, one request's closed form, a trace, and bad
// input.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/cli_support.h"

namespace parallax::testing::cli {
namespace {

/// Runs `serve <args> --trace F` and returns F's trace events (empty after a failed check).
Json serve_trace(const std::string& args) {
  ScratchDir dir;
  const CliRun r = Parallax("serve " + args + " --trace " + Quote(dir.file("steps.json")));
  EXPECT_EQ(r.exit_code, 0) << r;
  std::ifstream in(dir.file("steps.json"));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const Json t = ParseOrFail(text, "trace");
  return t.contains("traceEvents") ? t["traceEvents"] : Json::array();
}

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
  const Json events =
      serve_trace("--model llama3.1-8b --gpus 1 --tp 1 --requests 5 --output-len 8");
  ASSERT_GE(events.size(), 8u);
  EXPECT_EQ(events[0]["ph"], "X");
}

// A shared system prompt is computed once per replica, so TTFT falls; without prefix caching
// nothing is reused, as with no shared prefix at all.
TEST(ServeCli, ASharedPrefixIsServedFromThePrefixCache) {
  const std::string base =
      "serve --model llama3.1-8b --gpus 1 --tp 1 --requests 300 --rate 10 --prompt-len 2048 "
      "--output-len 32 --format json";
  const CliRun plain = Parallax(base, Streams::kStdoutOnly);
  const CliRun shared =
      Parallax(base + " --prefix-len 1536 --prefix-groups 2", Streams::kStdoutOnly);
  const CliRun off = Parallax(base + " --no-prefix-caching", Streams::kStdoutOnly);
  ASSERT_EQ(plain.exit_code, 0) << plain;
  ASSERT_EQ(shared.exit_code, 0) << shared;
  ASSERT_EQ(off.exit_code, 0) << off;
  const Json p = ParseOrFail(plain.out, "plain"), s = ParseOrFail(shared.out, "shared"),
             o = ParseOrFail(off.out, "off");
  EXPECT_EQ(p["prefix_cache"]["hit_rate"], 0.0);
  EXPECT_EQ(o["prefix_cache"]["enabled"], false);
  // Of 300 prompts, all but the first of each group find 1536 of their 2048 tokens.
  EXPECT_EQ(s["prefix_cache"]["hit_tokens"], (300 - 2) * 1536);
  EXPECT_LT(s["ttft_s"]["p90"].get<double>(), 0.6 * p["ttft_s"]["p90"].get<double>());
  EXPECT_EQ(o["ttft_s"]["p90"], p["ttft_s"]["p90"]);

  const CliRun bad =
      Parallax("serve --model llama3.1-8b --gpus 1 --tp 1 --prompt-len 100 --prefix-len 200");
  EXPECT_EQ(bad.exit_code, 2) << bad;
  EXPECT_TRUE(Has(bad,
                  "--prefix-len: a shared prefix is part of the prompt: 200 tokens exceed "
                  "--prompt-len 100"))
      << bad;
}

// pp 2 keeps two steps in flight: in the trace they alternate lanes and overlap in time.
TEST(ServeCli, PipelineStagesOverlapTwoSteps) {
  const Json events = serve_trace(
      "--model llama3.1-8b --gpus 2 --tp 1 --pp 2 --requests 64 --rate 0 --prompt-len 64 "
      "--output-len 16 --max-num-batched-tokens 2048 --max-num-seqs 32");
  ASSERT_GE(events.size(), 4u);
  int overlaps = 0;
  for (size_t i = 1; i < events.size(); ++i) {
    const double prev_end = events[i - 1]["ts"].get<double>() + events[i - 1]["dur"].get<double>();
    if (events[i]["ts"].get<double>() < prev_end) {
      ++overlaps;
      EXPECT_NE(events[i]["tid"], events[i - 1]["tid"]) << i;
    }
  }
  EXPECT_GT(overlaps, 0);
}

// Experts over every replica (ep = tp * dp): the replicas step together; they cannot be split
// into prefill and decode pools.
TEST(ServeCli, WideExpertParallelismStepsTheReplicasTogether) {
  const CliRun r = Parallax(
      "serve --model qwen3-30b-a3b --gpus 8 --tp 2 --ep 8 --requests 100 --rate 20 --format json",
      Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  const Json j = ParseOrFail(r.out, "serve");
  EXPECT_EQ(j["deployment"]["ep"], 8);
  EXPECT_EQ(j["deployment"]["dp"], 4);
  EXPECT_GT(j["throughput_tokens_per_s"].get<double>(), 0);
  // Two-batch overlap: the all-to-alls behind the other micro-batch's compute.
  const CliRun tbo = Parallax(
      "serve --model qwen3-30b-a3b --gpus 8 --tp 2 --ep 8 --requests 100 --rate 20 --format json "
      "--two-batch-overlap",
      Streams::kStdoutOnly);
  ASSERT_EQ(tbo.exit_code, 0) << tbo;
  EXPECT_GT(ParseOrFail(tbo.out, "serve")["throughput_tokens_per_s"].get<double>(), 0);
  // Disaggregated, each pool spreads the experts over its own GPUs: 2:2 gives ep 4 in each,
  // 1:3 would need ep 6 in the decode pool, which does not divide the 128 experts.
  const CliRun pd = Parallax(
      "serve --model qwen3-30b-a3b --gpus 8 --tp 2 --ep 8 --pd 2:2 --requests 100 --rate 20 "
      "--format json",
      Streams::kStdoutOnly);
  ASSERT_EQ(pd.exit_code, 0) << pd;
  EXPECT_EQ(ParseOrFail(pd.out, "serve")["pd"]["decode_replicas"], 2);
  const CliRun odd = Parallax("serve --model qwen3-30b-a3b --gpus 8 --tp 2 --ep 8 --pd 1:3");
  EXPECT_EQ(odd.exit_code, 2) << odd;
  EXPECT_TRUE(Has(odd, "--pd: the decode pool (experts over its 6 GPUs)")) << odd;
  const CliRun bad = Parallax("serve --model qwen3-30b-a3b --gpus 8 --tp 2 --pp 2 --ep 4");
  EXPECT_EQ(bad.exit_code, 2) << bad;
  EXPECT_TRUE(Has(bad, "--ep: ep=4 above tp spreads the experts over every replica")) << bad;
}

// tp*pp past int overflowed (UBSan) before the deployment was checked, --gpus 2^40 set up
// 2^40 replicas, and --tp 0 with --gpus divided by zero (SIGFPE): each is refused at its flag.
TEST(ServeCli, DeploymentsBeyondTheLargestClusterAreBadInput) {
  const CliRun r = Parallax("serve --model llama3.1-8b --tp 1073741824 --pp 4 --requests 2");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "error: --tp: got '1073741824', want an integer in [1, 65536]")) << r;
  const CliRun g = Parallax("serve --model llama3.1-8b --gpus 1099511627776 --requests 2");
  EXPECT_EQ(g.exit_code, 2) << g;
  EXPECT_TRUE(Has(g, "error: --gpus: got '1099511627776'")) << g;
  const CliRun zero = Parallax("serve --model llama3.1-8b --gpus 8 --tp 0 --requests 2");
  EXPECT_EQ(zero.exit_code, 2) << zero;
  EXPECT_TRUE(Has(zero, "error: --tp: got '0'")) << zero;
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
