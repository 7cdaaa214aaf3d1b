// `parallax serve --pd P:D`: a disaggregated deployment runs and reports its split and KV
// transfer; a split that does not match the replicas is refused naming the flag.
#include <gtest/gtest.h>

#include "tests/cli_support.h"

namespace parallax::testing::cli {
namespace {

TEST(ServePdCli, OnePrefillAndOneDecodeReplicaRunAndReport) {
  const std::string args =
      "serve --model llama3.1-8b --cluster h100-sxm-80gb --gpus 2 --tp 1 --requests 100 "
      "--rate 8 --prompt-len 1024 --output-len 64 --pd 1:1";
  CliRun r = Parallax(args + " --format json", Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  const Json j = ParseOrFail(r.out, "serve --pd");
  EXPECT_EQ(j["requests"], 100);
  EXPECT_EQ(j["deployment"]["dp"], 2);
  ASSERT_TRUE(j.contains("pd")) << r.out;
  EXPECT_EQ(j["pd"]["prefill_replicas"], 1);
  EXPECT_EQ(j["pd"]["decode_replicas"], 1);
  // 1024 tokens of Llama-3.1 8B KV (32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes = 128 KiB
  // a token, 128 MiB in all) over one NIC: milliseconds, not microseconds or seconds.
  const double xfer = j["pd"]["kv_transfer_s_mean"];
  EXPECT_GT(xfer, 1e-3);
  EXPECT_LT(xfer, 1.0);
  // TTFT comes from the prefill engine alone; TPOT holds the transfer once over 63 tokens.
  EXPECT_GT(j["ttft_s"]["mean"], 0.0);
  EXPECT_GT(j["tpot_s"]["mean"], xfer / 63);
  EXPECT_NEAR(j["throughput_tokens_per_s"].get<double>(), 8.0 * 64, 0.3 * 8 * 64);

  r = Parallax(args);
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(Has(r, "disaggregated: 1 prefill + 1 decode replicas, KV transfer of a 1024-token"))
      << r;
}

TEST(ServePdCli, ASplitThatIsNotTheReplicasIsRefusedNamingTheFlag) {
  CliRun r = Parallax("serve --model llama3.1-8b --gpus 2 --tp 1 --dp 2 --pd 2:1");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "--pd: P + D must split the dp=2 replicas")) << r;
  r = Parallax("serve --model llama3.1-8b --gpus 2 --tp 1 --pd one");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "--pd: must be P:D")) << r;
  r = Parallax("serve --model llama3.1-8b --gpus 2 --tp 1 --prefill-max-num-batched-tokens 4096");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "--prefill-max-num-batched-tokens")) << r;
}

}  // namespace
}  // namespace parallax::testing::cli
