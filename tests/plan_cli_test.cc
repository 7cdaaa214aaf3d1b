// `parallax plan`, `parallax launch` and `parallax whatif` as a user runs them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/cli_support.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

using namespace testing::cli;
using testing::read_file;

const char kSmallPlan[] = "--model llama3.1-8b --gpus 16 --gbs 32 --seq 4096 --no-progress";

TEST(PlanCli, TableThenExplainNamesRulesAndTheRunnerUp) {
  const CliRun r = Parallax(std::string("plan ") + kSmallPlan + " --top 3 --explain");
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(Has(r, "tok/s/GPU")) << r;
  EXPECT_TRUE(Has(r, "searched ")) << r;
  EXPECT_TRUE(Has(r, "memory: peak exceeds HBM")) << r;
  EXPECT_TRUE(Has(r, "winner vs runner-up")) << r;
}

// The plan file round-trips: simulate --plan predicts what plan printed, and launch emits it.
TEST(PlanCli, PlanFileFeedsSimulateAndLaunch) {
  ScratchDir dir;
  const std::string plan = dir.file("plan.json");
  const CliRun r =
      Parallax(std::string("plan ") + kSmallPlan + " --format json --out " + Quote(plan),
               Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  const Json j = ParseOrFail(r.out, "plan stdout");
  ASSERT_TRUE(j.contains("plans")) << r;
  const double predicted = j["plans"][0]["step_time_s"].get<double>();
  const Json file = ParseOrFail(read_file(plan).value_or(""), plan);
  EXPECT_EQ(file["format"], "parallax-plan/1");
  EXPECT_DOUBLE_EQ(file["predicted"]["step_time_s"].get<double>(), predicted);

  const CliRun sim =
      Parallax("simulate --plan " + Quote(plan) + " --format json", Streams::kStdoutOnly);
  ASSERT_EQ(sim.exit_code, 0) << sim;
  EXPECT_DOUBLE_EQ(ParseOrFail(sim.out, "simulate")["step_time_s"].get<double>(), predicted);

  const CliRun slurm = Parallax("launch --plan " + Quote(plan) + " --target slurm");
  ASSERT_EQ(slurm.exit_code, 0) << slurm;
  EXPECT_TRUE(Has(slurm, "#SBATCH --nodes=2")) << slurm;
}

TEST(PlanCli, EmitRefusesWhatTheFrameworkCannotRunAndFrameworkFilterAvoidsIt) {
  // No framework runs a zero-bubble pipeline: by default nothing is left, and the error says
  // which frameworks refused and how to ask for the theoretical best.
  const CliRun none = Parallax(std::string("plan ") + kSmallPlan + " --pp 2 --schedule zb-h1");
  EXPECT_EQ(none.exit_code, 1) << none;
  EXPECT_TRUE(Has(none, "megatron cannot run it")) << none;
  EXPECT_TRUE(Has(none, "--framework none")) << none;
  // Asked for anyway, the best plan cannot go to Megatron-LM.
  const CliRun refused = Parallax(std::string("plan ") + kSmallPlan +
                                  " --pp 2 --schedule zb-h1 --framework none --emit megatron");
  EXPECT_EQ(refused.exit_code, 2) << refused;
  EXPECT_TRUE(Has(refused, "cannot be emitted for megatron")) << refused;
  EXPECT_TRUE(Has(refused, "runs on")) << refused;
  const CliRun ok =
      Parallax(std::string("plan ") + kSmallPlan + " --framework megatron --emit megatron");
  ASSERT_EQ(ok.exit_code, 0) << ok;
  EXPECT_TRUE(Has(ok, "--tensor-model-parallel-size")) << ok;
}

TEST(PlanCli, BadInputIsExitTwoWithEveryProblemAndNothingFitsIsExitOne) {
  ScratchDir dir;
  const CliRun bad = Parallax(std::string("plan ") + kSmallPlan +
                              " --objective fastest --memory-headroom 150 --framework megatorn "
                              "--out " +
                              Quote(dir.file("p.json")));
  EXPECT_EQ(bad.exit_code, 2) << bad;
  EXPECT_TRUE(Has(bad, "--objective")) << bad;
  EXPECT_TRUE(Has(bad, "--memory-headroom")) << bad;
  EXPECT_TRUE(Has(bad, "--framework")) << bad;
  EXPECT_TRUE(dir.entries().empty());  // nothing written on bad input
  const CliRun none = Parallax("plan --model llama3.1-405b --gpus 8 --gbs 8 --no-progress");
  EXPECT_EQ(none.exit_code, 1) << none;
  EXPECT_TRUE(Has(none, "fits")) << none;
}

TEST(WhatIfCli, WritesTableAndSvg) {
  ScratchDir dir;
  const std::string svg = dir.file("scaling.svg");
  const CliRun r = Parallax(
      "whatif --model llama3.1-8b --gbs 64 --seq 4096 --vary gpus=8,16,32 --svg " + Quote(svg));
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(Has(r, "scaling")) << r;
  EXPECT_TRUE(Has(r, "plot written to")) << r;
  const std::string text = read_file(svg).value_or("");
  EXPECT_EQ(text.rfind("<svg", 0), 0u);
  const CliRun bad = Parallax("whatif --vary gpu=8,16 --svg " + Quote(dir.file("x.svg")));
  EXPECT_EQ(bad.exit_code, 2) << bad;
  EXPECT_TRUE(Has(bad, "unknown axis 'gpu'")) << bad;
}

// Each plan carries its error bar; the plans whose band meets the winner's are named.
TEST(PlanCli, SaysWhichPlansAreWithinTheWinnersErrorBar) {
  const CliRun r =
      Parallax(std::string("plan ") + kSmallPlan + " --top 3 --format json", Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  const Json j = ParseOrFail(r.out, "plan --format json");
  ASSERT_TRUE(j["plans"][0].contains("error_bar")) << r.out;
  const Json& w = j["plans"][0];
  const double lo = w["error_bar"]["throughput_lo"], hi = w["error_bar"]["throughput_hi"];
  const double wt = w["tokens_per_s_per_gpu"];
  std::vector<int> expected;
  for (size_t i = 1; i < j["plans"].size(); ++i) {
    const Json& p = j["plans"][i];
    const double t = p["tokens_per_s_per_gpu"];
    const double plo = p["error_bar"]["throughput_lo"], phi = p["error_bar"]["throughput_hi"];
    if (t * (1 + phi) >= wt * (1 + lo) && wt * (1 + hi) >= t * (1 + plo))
      expected.push_back(static_cast<int>(i) + 1);
  }
  EXPECT_EQ(j["within_error_bar_of_winner"].get<std::vector<int>>(), expected);
  const CliRun table = Parallax(std::string("plan ") + kSmallPlan + " --top 3");
  EXPECT_TRUE(Has(table, "error bar (80%) of #1:")) << table;
}

}  // namespace
}  // namespace parallax

namespace parallax {
namespace {

using namespace testing::cli;

// The quality bar: on every record the planner's best simulates at least as fast as the
// published layout (which is one of its candidates).
TEST(ValidateCli, ReplanNeverLosesToThePublishedLayout) {
  const CliRun r = Parallax(
      "validate --replan --format json " + Quote(testing::test_data("validate_small.jsonl")),
      Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  const Json j = ParseOrFail(r.out, "validate --replan");
  ASSERT_EQ(j["replan"].size(), 3u) << r;
  for (const Json& row : j["replan"]) {
    EXPECT_LE(row["best_step_s"].get<double>(), row["published_step_s"].get<double>()) << row;
    EXPECT_GE(row["gain"].get<double>(), 0.0) << row;
  }
}

}  // namespace
}  // namespace parallax
