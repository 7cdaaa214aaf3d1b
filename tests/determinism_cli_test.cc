// The same command prints the same bytes: every run, and whatever the thread count where the
// command searches in parallel (plan, whatif and serve-plan take --threads and split their work
// over TBB). simulate and serve run on one thread (no TBB in the simulator), so for them the
// check is run against run, their trace files included. No output carries a wall-clock time
// (plan's progress bar goes to a terminal only), so nothing is excluded from the comparison.
#include <fstream>
#include <sstream>

#include "tests/cli_support.h"

namespace parallax::testing::cli {
namespace {

// Where two outputs first differ, and a little of each from there.
std::string FirstDifference(const std::string& a, const std::string& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return "first difference at byte " + std::to_string(i) + " of " + std::to_string(a.size()) +
         " / " + std::to_string(b.size()) + ":\n  " + a.substr(i, 120) + "\n  " + b.substr(i, 120);
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs each command line (stdout only) and expects the first's exit code 0 and all outputs equal.
void ExpectSameOutput(const std::vector<std::string>& commands) {
  const CliRun first = Parallax(commands.front(), Streams::kStdoutOnly);
  ASSERT_EQ(first.exit_code, 0) << commands.front() << "\n" << first;
  ASSERT_GT(first.out.size(), 100u) << first;
  for (size_t i = 1; i < commands.size(); ++i) {
    const CliRun r = Parallax(commands[i], Streams::kStdoutOnly);
    EXPECT_EQ(r.exit_code, first.exit_code) << commands[i];
    EXPECT_TRUE(r.out == first.out) << commands.front() << "\nvs\n"
                                    << commands[i] << "\n"
                                    << FirstDifference(first.out, r.out);
  }
}

// The command under --threads 1, 2 and 4, and 4 again.
std::vector<std::string> UnderThreads(const std::string& command) {
  std::vector<std::string> out;
  for (const char* t : {"1", "2", "4", "4"}) out.push_back(command + " --threads " + t);
  return out;
}

TEST(Determinism, PlanIsTheSameWhateverTheThreads) {
  const std::string plan = "plan --model llama3.1-8b --gpus 16 --gbs 32 --seq 4096 --top 20";
  ExpectSameOutput(UnderThreads(plan + " --format json"));
  ExpectSameOutput(UnderThreads(plan + " --explain --no-progress"));
  ExpectSameOutput(
      UnderThreads("plan --model mixtral-8x7b --gpus 32 --gbs 64 --seq 4096 "
                   "--format json --top 20"));
}

// stdout and stderr together: more threads than cores once made TBB warn on stderr.
TEST(Determinism, PlanFileIsTheSameWhateverTheThreads) {
  ScratchDir dir;
  std::string first;
  for (const char* t : {"1", "4"}) {
    const std::string out = dir.file("plan.json");  // one name: the output mentions it
    const CliRun r = Parallax("plan --model llama3.1-8b --gpus 16 --gbs 32 --seq 4096 --threads " +
                              std::string(t) + " --emit megatron --out " + Quote(out));
    ASSERT_EQ(r.exit_code, 0) << r;
    const std::string text = Slurp(out) + r.out;
    if (first.empty()) first = text;
    EXPECT_TRUE(text == first) << FirstDifference(first, text);
  }
}

TEST(Determinism, WhatifIsTheSameWhateverTheThreads) {
  ScratchDir dir;
  std::vector<std::string> commands;
  for (const char* t : {"1", "2", "4"})
    commands.push_back(
        "whatif --model llama3.1-8b --gbs 64 --seq 4096 --vary gpus=8,16,32 "
        "--format json --svg " +
        Quote(dir.file("w.svg")) + " --threads " + t);
  ExpectSameOutput(commands);
}

TEST(Determinism, ServePlanIsTheSameWhateverTheThreads) {
  ExpectSameOutput(
      UnderThreads("serve-plan --model llama3.1-8b --cluster h100-sxm-80gb --gpus 8 --rate 10 "
                   "--requests 200 --prompt-len 512 --output-len 64 --ttft-p90 1 --tpot-p90 0.1 "
                   "--format json --emit vllm"));
}

TEST(Determinism, SimulateIsTheSameRunAfterRun) {
  const std::string scenario =
      Quote(std::string(PARALLAX_SOURCE_DIR) + "/examples/llama3.1-70b-h100.json");
  ExpectSameOutput({"simulate --scenario " + scenario + " --format json",
                    "simulate --scenario " + scenario + " --format json",
                    "simulate --scenario " + scenario + " --format json"});
  ExpectSameOutput({"simulate --scenario " + scenario, "simulate --scenario " + scenario});
  // The Chrome trace, byte for byte.
  ScratchDir dir;
  std::string first;
  for (int i = 0; i < 2; ++i) {
    const std::string trace = dir.file("t.json");
    const CliRun r = Parallax(
        "simulate --model llama3.1-8b --gpus 16 --tp 2 --pp 2 --gbs 32 "
        "--seq 4096 --trace " +
        Quote(trace));
    ASSERT_EQ(r.exit_code, 0) << r;
    const std::string text = Slurp(trace);
    ASSERT_GT(text.size(), 1000u);
    if (i == 0) first = text;
    EXPECT_TRUE(text == first) << FirstDifference(first, text);
  }
}

TEST(Determinism, ServeIsTheSameRunAfterRun) {
  const std::string serve =
      "serve --model llama3.1-8b --cluster h100-sxm-80gb --gpus 2 --tp 1 --requests 300 "
      "--rate 20 --prefix-len 256 --prefix-groups 4 --slo-ttft 0.5 --slo-tpot 0.05 --format json";
  ExpectSameOutput({serve, serve, serve});
  ExpectSameOutput(
      {"serve --model qwen3-30b-a3b --gpus 8 --tp 2 --ep 8 --pd 2:2 --requests 100 "
       "--rate 20 --format json",
       "serve --model qwen3-30b-a3b --gpus 8 --tp 2 --ep 8 --pd 2:2 --requests 100 "
       "--rate 20 --format json"});
  ScratchDir dir;
  std::string first;
  for (int i = 0; i < 2; ++i) {
    const std::string trace = dir.file("s.json");
    const CliRun r = Parallax(
        "serve --model llama3.1-8b --gpus 1 --tp 1 --requests 50 --rate 10 "
        "--trace " +
        Quote(trace));
    ASSERT_EQ(r.exit_code, 0) << r;
    const std::string text = Slurp(trace);
    if (i == 0) first = text;
    EXPECT_TRUE(text == first) << FirstDifference(first, text);
  }
}

}  // namespace
}  // namespace parallax::testing::cli
