// Tests of the `parallax` binary as a user runs it: exit codes (0 fits, 1 out of memory, 2 bad
// input), the messages on stderr, what goes to stdout, and the files it writes or must not write.
// PARALLAX_BINARY is the built CLI; the fixtures are in tests/data.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/json_io.h"
#include "core/model_zoo.h"
#include "tests/cli_support.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

namespace fs = std::filesystem;

using testing::read_file;
using testing::test_data;
using namespace testing::cli;

// A small layout that fits and simulates in well under a second: Llama-3.1 8B, tp8 on 8 H100s.
const char kSmall[] =
    "--model llama3.1-8b --cluster h100-sxm-80gb --gpus 8 --tp 8 --gbs 4 --seq 4096";

// ---- help -------------------------------------------------------------------------------------

TEST(CliHelp, TopLevelHelpListsTheSubcommands) {
  const CliRun r = Parallax("--help");
  EXPECT_EQ(r.exit_code, 0) << r;
  for (const char* s : {"simulate", "validate", "models", "profiles"}) EXPECT_TRUE(Has(r, s)) << s;
}

TEST(CliHelp, SimulateHelpListsTheLayoutFlags) {
  const CliRun r = Parallax("simulate --help");
  EXPECT_EQ(r.exit_code, 0) << r;
  for (const char* flag :
       {"--model",     "--cluster",  "--gpus",      "--tp",   "--pp",   "--dp",
        "--cp",        "--ep",       "--etp",       "--vpp",  "--mbs",  "--gbs",
        "--seq",       "--sp",       "--recompute", "--zero", "--fsdp", "--schedule",
        "--precision", "--scenario", "--format",    "--trace"})
    EXPECT_TRUE(Has(r, flag)) << flag << " missing from:\n" << r.out;
  EXPECT_TRUE(Has(r, "Exit code")) << r;
}

TEST(CliHelp, ValidateHelpPrintsTheFillRule) {
  const CliRun r = Parallax("validate --help");
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(Has(r, "micro_batch=1")) << r;
}

TEST(CliHelp, MissingSubcommandIsBadInput) {
  const CliRun r = Parallax("");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "subcommand")) << r;
}

TEST(CliHelp, UnknownFlagIsBadInput) {
  const CliRun r = Parallax("simulate --tpp 8");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "--tpp")) << r;
}

// ---- simulate: bad input ----------------------------------------------------------------------

TEST(CliSimulate, UnknownModelSuggestsTheNearestName) {
  const CliRun r = Parallax("simulate --model lama3.1-70b");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "--model: unknown model 'lama3.1-70b'")) << r;
  EXPECT_TRUE(Has(r, "did you mean 'llama3.1-70b'")) << r;
}

TEST(CliSimulate, UnknownClusterSuggestsTheNearestName) {
  const CliRun r = Parallax("simulate --cluster h100");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "--cluster: unknown hardware profile 'h100'")) << r;
  EXPECT_TRUE(Has(r, "did you mean 'h100-sxm-80gb'")) << r;
}

TEST(CliSimulate, TpMustDivideHeads) {
  // 192 GPUs so that tp=3 divides the GPU count and only the head count is wrong.
  const CliRun r = Parallax("simulate --model llama3.1-70b --gpus 192 --tp 3");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "--tp: tp=3 must divide heads=64")) << r;
  EXPECT_TRUE(Has(r, "tp in {1,2,4,8,16,32,64}")) << r;
}

TEST(CliSimulate, TpAloneThatDividesNeitherHeadsNorGpusReportsTheHeads) {
  // The default 64 GPUs are not a multiple of 3 either; both problems must be reported, and the
  // root cause (the head count) must not hide behind the GPU count.
  const CliRun r = Parallax("simulate --model llama3.1-70b --tp 3");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "must divide heads")) << r;
}

TEST(CliSimulate, GpusNotAMultipleOfTheModelParallelDegrees) {
  const CliRun r = Parallax("simulate --gpus 60 --tp 8");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "--gpus: gpus=60 is not a multiple of tp*pp*cp=8")) << r;
}

TEST(CliSimulate, GpusDisagreeWithAGivenDp) {
  const CliRun r = Parallax("simulate --gpus 60 --tp 8 --dp 8");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "gpus=60 must equal tp*pp*dp*cp=8*1*8*1=64")) << r;
}

TEST(CliSimulate, NegativeGlobalBatch) {
  const CliRun r = Parallax("simulate --gbs -1");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "--gbs: gbs must be positive, got -1")) << r;
}

TEST(CliSimulate, ZeroOrOutOfRangeValuesAreRejected) {
  // 0 and -2 are values the user typed, not "flag left out": each must be an error.
  for (const char* args : {"--tp 0", "--gbs 0", "--gpus 0", "--seq 0", "--zero -2"}) {
    const CliRun r = Parallax(std::string("simulate ") + args);
    EXPECT_EQ(r.exit_code, 2) << args << ": exit " << r.exit_code << ", "
                              << r.out.substr(0, r.out.find('\n'));
  }
  const CliRun four = Parallax("simulate --zero 4");
  EXPECT_EQ(four.exit_code, 2) << four;
  EXPECT_TRUE(Has(four, "zero=4 must be 0, 1, 2 or 3")) << four;
}

// The switches take 1/0, and alone mean 1, as scripts write them either way.
TEST(CliSimulate, SwitchesAloneMeanOnAndTakeZeroOrOne) {
  const CliRun on = Parallax(
      "simulate --model llama3.1-8b --gpus 8 --tp 1 --fsdp --gbs 16 --seq 4096 --format json",
      Streams::kStdoutOnly);
  ASSERT_EQ(on.exit_code, 0) << on;
  EXPECT_TRUE(Has(on, "\"fsdp\": true")) << on;
  const CliRun off = Parallax(
      "simulate --model llama3.1-8b --gpus 8 --tp 1 --fsdp 0 --zero 1 --gbs 16 --seq 4096 "
      "--format json",
      Streams::kStdoutOnly);
  ASSERT_EQ(off.exit_code, 0) << off;
  EXPECT_TRUE(Has(off, "\"fsdp\": false")) << off;
  EXPECT_EQ(Parallax("simulate --sp 5").exit_code, 2);
}

// --eager runs elementwise ops one PyTorch kernel at a time: the same FLOPs in more time.
TEST(CliSimulate, EagerSlowsTheStepAndIsReported) {
  const std::string base =
      "simulate --model llama3.1-8b --gpus 8 --tp 1 --fsdp --gbs 16 --seq 4096 --format json";
  const CliRun fused = Parallax(base, Streams::kStdoutOnly);
  const CliRun eager = Parallax(base + " --eager", Streams::kStdoutOnly);
  ASSERT_EQ(fused.exit_code, 0) << fused;
  ASSERT_EQ(eager.exit_code, 0) << eager;
  const Json f = ParseOrFail(fused.out, "fused"), e = ParseOrFail(eager.out, "eager");
  ASSERT_FALSE(f.is_null());
  ASSERT_FALSE(e.is_null());
  EXPECT_GT(e["step_time_s"].get<double>(), 1.05 * f["step_time_s"].get<double>());
  EXPECT_TRUE(Has(eager, "\"eager\": true")) << eager;
  EXPECT_TRUE(Has(fused, "\"eager\": false")) << fused;
  EXPECT_EQ(Parallax(base + " --eager 2").exit_code, 2);
}

// --moe-imbalance: the busiest expert-parallel rank's share over the mean slows an MoE layout;
// below 1 is refused, naming the flag.
TEST(CliSimulate, MoeImbalanceSlowsExpertParallelism) {
  const std::string base =
      "simulate --model mixtral-8x7b --gpus 64 --tp 2 --ep 8 --pp 1 --gbs 64 --seq 4096 "
      "--recompute full --format json";
  const CliRun even = Parallax(base, Streams::kStdoutOnly);
  const CliRun skewed = Parallax(base + " --moe-imbalance 1.3", Streams::kStdoutOnly);
  ASSERT_EQ(even.exit_code, 0) << even;
  ASSERT_EQ(skewed.exit_code, 0) << skewed;
  EXPECT_GT(ParseOrFail(skewed.out, "skewed")["step_time_s"].get<double>(),
            ParseOrFail(even.out, "even")["step_time_s"].get<double>());
  const CliRun bad = Parallax(base + " --moe-imbalance 0.9");
  EXPECT_EQ(bad.exit_code, 2) << bad;
  EXPECT_TRUE(Has(bad, "--moe-imbalance: moe_imbalance=0.9 must be at least 1")) << bad;
}

TEST(CliSimulate, UnknownEnumValueListsTheValidOnes) {
  const CliRun r = Parallax("simulate --recompute partial --schedule gpipe");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "--recompute: unknown value 'partial'")) << r;
  EXPECT_TRUE(Has(r, "none, selective, selective-op, full")) << r;
  EXPECT_TRUE(Has(r, "--schedule: unknown value 'gpipe'")) << r;
  EXPECT_TRUE(Has(r, "1f1b, interleaved, zb-h1")) << r;
}

TEST(CliSimulate, Fp8OnAPartWithoutFp8) {
  const CliRun r = Parallax("simulate --cluster a100-sxm-80gb --precision fp8");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "fp8 is not supported by a100-sxm-80gb")) << r;
}

TEST(CliSimulate, MalformedScenarioNamesFileLineAndColumn) {
  const CliRun r = Parallax("simulate --scenario " + Quote(test_data("scenario_malformed.json")));
  EXPECT_EQ(r.exit_code, 2) << r;
  // Line 4 is `  "parallel": {"tp": 8 "pp": 1},`: a comma is missing after the 8.
  EXPECT_TRUE(Has(r, "scenario_malformed.json:4:")) << r;
  EXPECT_TRUE(Has(r, "malformed JSON")) << r;
}

TEST(CliSimulate, PlanErrorsFromAScenarioNameTheScenarioFile) {
  // tp=3 comes from the file, not from a flag: the message must point at the file.
  const CliRun r = Parallax("simulate --scenario " + Quote(test_data("scenario_tp3.json")));
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "tp=3 must divide heads=64")) << r;
  EXPECT_TRUE(Has(r, "scenario_tp3.json")) << r;
  EXPECT_FALSE(Has(r, "--tp:")) << r;
}

TEST(CliSimulate, MissingScenarioFile) {
  const CliRun r = Parallax("simulate --scenario " + Quote(test_data("no_such_scenario.json")));
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "no_such_scenario.json: cannot open file")) << r;
}

// ---- simulate: results ------------------------------------------------------------------------

TEST(CliSimulate, JsonOutputHasTheDocumentedKeysAndAgreesWithItself) {
  const CliRun r =
      Parallax(std::string("simulate ") + kSmall + " --format json", Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  Json j = ParseOrFail(r.out, "stdout");
  ASSERT_FALSE(j.is_null());
  for (const char* k :
       {"step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu",
        "hardware_tflops_per_gpu", "mfu", "hfu", "peak_memory_gib", "fits", "breakdown", "stages"})
    ASSERT_TRUE(j.contains(k)) << k << " missing from:\n" << r.out;
  for (const char* k : {"compute_s", "tp_comm_s", "cp_comm_s", "ep_comm_s", "dp_comm_s",
                        "pp_comm_s", "bubble_s", "optimizer_s"})
    EXPECT_TRUE(j["breakdown"].contains(k)) << k;
  EXPECT_TRUE(j["fits"].get<bool>());

  // tokens/s = gbs * seq / step time, and per GPU over 8 GPUs.
  const double step = j["step_time_s"].get<double>();
  ASSERT_GT(step, 0);
  EXPECT_NEAR(j["tokens_per_s"].get<double>(), 4.0 * 4096 / step, 1e-6 * 4 * 4096 / step);
  EXPECT_NEAR(j["tokens_per_s_per_gpu"].get<double>(), j["tokens_per_s"].get<double>() / 8,
              1e-6 * j["tokens_per_s"].get<double>());
  // MFU and HFU divide by the bf16 dense peak of the part.
  auto profiles = builtin_profiles();
  ASSERT_TRUE(profiles.ok());
  auto h100 = find_profile(profiles.value(), "h100-sxm-80gb", "test");
  ASSERT_TRUE(h100.ok());
  EXPECT_NEAR(j["mfu"].get<double>(), j["model_tflops_per_gpu"].get<double>() / h100->bf16_tflops,
              1e-9);
  EXPECT_NEAR(j["hfu"].get<double>(),
              j["hardware_tflops_per_gpu"].get<double>() / h100->bf16_tflops, 1e-9);
  // Peak memory is the largest stage total.
  double peak = 0;
  for (const auto& s : j["stages"]) peak = std::max(peak, s["memory_gib"]["total"].get<double>());
  EXPECT_NEAR(j["peak_memory_gib"].get<double>(), peak, 1e-9);
}

TEST(CliSimulate, BadInputPrintsNothingOnStdout) {
  // Errors go to stderr only, so `--format json > out.json` never holds half a report.
  const CliRun r = Parallax("simulate --format json --model lama3.1-70b", Streams::kStdoutOnly);
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_EQ(r.out, "");
}

TEST(CliSimulate, TableOutputByDefault) {
  const CliRun r = Parallax(std::string("simulate ") + kSmall, Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(Has(r, "llama3.1-8b on 8 x h100-sxm-80gb")) << r;
  EXPECT_TRUE(Has(r, "step time")) << r;
  EXPECT_TRUE(Has(r, "(fits)")) << r;
}

TEST(CliSimulate, ScenarioFileIsReadAndFlagsOverrideIt) {
  const std::string scenario = Quote(test_data("scenario_small.json"));
  const CliRun r = Parallax("simulate --format json --scenario " + scenario, Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  Json j = ParseOrFail(r.out, "stdout");
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["model"], "llama3.1-8b");
  EXPECT_EQ(j["gpus"], 8);
  EXPECT_EQ(j["plan"]["parallel"]["tp"], 8);
  EXPECT_EQ(j["plan"]["batch"]["global_batch"], 4);
  EXPECT_EQ(j["plan"]["seq_len"], 4096);
  EXPECT_EQ(j["plan"]["recompute"], "selective");

  const CliRun o =
      Parallax("simulate --format json --gbs 8 --recompute full --scenario " + scenario,
               Streams::kStdoutOnly);
  ASSERT_EQ(o.exit_code, 0) << o;
  Json k = ParseOrFail(o.out, "stdout");
  ASSERT_FALSE(k.is_null());
  EXPECT_EQ(k["plan"]["batch"]["global_batch"], 8);
  EXPECT_EQ(k["plan"]["recompute"], "full");
  EXPECT_EQ(k["plan"]["parallel"]["tp"], 8);
}

TEST(CliSimulate, OutOfMemoryExitsOne) {
  // Llama-3.1 405B on one node: ~850 GiB of weights, gradients and Adam states per GPU.
  const CliRun r = Parallax("simulate --model llama3.1-405b --gpus 8 --tp 8");
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(Has(r, "OUT OF MEMORY")) << r;

  const CliRun j = Parallax("simulate --model llama3.1-405b --gpus 8 --tp 8 --format json",
                            Streams::kStdoutOnly);
  EXPECT_EQ(j.exit_code, 1) << j;
  Json out = ParseOrFail(j.out, "stdout");
  ASSERT_FALSE(out.is_null());
  EXPECT_FALSE(out["fits"].get<bool>());
  EXPECT_GT(out["peak_memory_gib"].get<double>(), out["hbm_gib"].get<double>());
}

// ---- simulate --trace -------------------------------------------------------------------------

TEST(CliTrace, WritesAValidChromeTrace) {
  ScratchDir dir;
  const std::string trace = dir.file("step.json");
  const CliRun r = Parallax(std::string("simulate ") + kSmall + " --trace " + Quote(trace));
  ASSERT_EQ(r.exit_code, 0) << r;
  ASSERT_TRUE(fs::exists(trace)) << r;
  Json j = ParseOrFail(read_file(trace).value_or(""), trace);
  ASSERT_FALSE(j.is_null());
  ASSERT_TRUE(j.contains("traceEvents")) << "no traceEvents";
  ASSERT_TRUE(j["traceEvents"].is_array());
  int spans = 0;
  for (const auto& e : j["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid")) << e.dump();
    if (e["ph"] != "X") continue;
    ++spans;
    ASSERT_TRUE(e.contains("ts") && e.contains("dur") && e.contains("name") && e.contains("tid"))
        << e.dump();
    EXPECT_GE(e["ts"].get<double>(), 0) << e.dump();
    EXPECT_GE(e["dur"].get<double>(), 0) << e.dump();
  }
  EXPECT_GT(spans, 0);
  // Written via a temporary file and a rename: only the trace is left.
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"step.json"});
}

// A long pipeline's trace keeps the operators of the first 4 microbatches of each stage (all
// with --trace-all) and a memory counter per rank whose highest value is the reported peak.
TEST(CliTrace, BoundedByDefaultWithAMemoryTrack) {
  ScratchDir dir;
  const std::string args =
      "simulate --model llama3.1-8b --gpus 16 --tp 2 --pp 4 --gbs 64 --seq 4096 --format json";
  auto run = [&](const std::string& extra) {
    const std::string trace = dir.file("t" + std::to_string(extra.size()) + ".json");
    const CliRun r = Parallax(args + " --trace " + Quote(trace) + extra, Streams::kStdoutOnly);
    EXPECT_EQ(r.exit_code, 0) << r;
    return std::make_pair(ParseOrFail(r.out, "stdout"),
                          ParseOrFail(read_file(trace).value_or(""), trace));
  };
  const auto [report, bounded] = run("");
  int late = 0, counters = 0;
  double highest = 0;
  for (const auto& e : bounded["traceEvents"]) {
    if (e["ph"] == "X" && e["args"].contains("microbatch") && e["args"]["microbatch"] >= 4) ++late;
    if (e["ph"] != "C") continue;
    ++counters;
    highest = std::max(highest,
                       e["args"]["state"].get<double>() + e["args"]["activations"].get<double>());
  }
  EXPECT_EQ(late, 0);
  EXPECT_GT(counters, 0);
  EXPECT_NEAR(highest, report["peak_memory_gib"].get<double>(), 1e-6);
  EXPECT_TRUE(bounded["otherData"]["note"].get<std::string>().find("--trace-all") !=
              std::string::npos);
  const auto [unused, all] = run(" --trace-all");
  EXPECT_GT(all["traceEvents"].size(), bounded["traceEvents"].size());
  EXPECT_FALSE(all.contains("otherData"));
}

TEST(CliTrace, BadInputWritesNoFile) {
  ScratchDir dir;
  const std::string trace = dir.file("step.json");
  const std::string bad_inputs[] = {
      "--model lama3.1-70b",
      "--model llama3.1-70b --gpus 192 --tp 3",
      "--scenario " + Quote(test_data("scenario_malformed.json")),
  };
  for (const auto& args : bad_inputs) {
    const CliRun r = Parallax("simulate " + args + " --trace " + Quote(trace));
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r;
    EXPECT_FALSE(fs::exists(trace)) << args;
    EXPECT_TRUE(dir.entries().empty()) << args << ": left " << dir.entries().front();
  }
}

TEST(CliTrace, BadInputLeavesAnExistingFileUntouched) {
  ScratchDir dir;
  const std::string trace = dir.file("step.json");
  std::ofstream(trace) << "previous trace";
  const CliRun r = Parallax("simulate --model lama3.1-70b --trace " + Quote(trace));
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_EQ(read_file(trace).value_or(""), "previous trace");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"step.json"});
}

TEST(CliTrace, UnwritableDestinationIsAnErrorAndLeavesNothing) {
  ScratchDir dir;
  const std::string trace = dir.file("no_such_dir/step.json");
  const CliRun r = Parallax(std::string("simulate ") + kSmall + " --trace " + Quote(trace));
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "cannot write file")) << r;
  EXPECT_TRUE(dir.entries().empty());
}

// ---- models and profiles ----------------------------------------------------------------------

// The `parallax models` line of a zoo model.
std::string LineOf(const std::string& out, const std::string& name) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(name + " ", 0) == 0) return line;
  return "";
}

std::string Billions(double params) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fB", params / 1e9);
  return buf;
}

TEST(CliModels, ListsTheZooWithParameterCounts) {
  const CliRun r = Parallax("models");
  ASSERT_EQ(r.exit_code, 0) << r;
  for (const char* name : {"llama3.1-405b", "deepseek-v3"}) {
    const std::string line = LineOf(r.out, name);
    ASSERT_FALSE(line.empty()) << name << " not listed:\n" << r.out;
    auto m = find_zoo_model(name, "test");
    ASSERT_TRUE(m.ok());
    const ParamCount pc = count_params(m.value());
    EXPECT_NE(line.find(Billions(pc.total())), std::string::npos) << line;
    EXPECT_NE(line.find(Billions(pc.active(m.value()))), std::string::npos) << line;
  }
  EXPECT_NE(LineOf(r.out, "llama3.1-405b").find("405.9B"), std::string::npos);
  EXPECT_NE(LineOf(r.out, "deepseek-v3").find("671.0B"), std::string::npos);
}

TEST(CliModels, JsonListsEveryZooModel) {
  const CliRun r = Parallax("models --format json", Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  Json j = ParseOrFail(r.out, "stdout");
  ASSERT_FALSE(j.is_null());
  ASSERT_TRUE(j.is_array());
  EXPECT_EQ(j.size(), model_zoo().size());
  for (const auto& m : j) {
    EXPECT_TRUE(m.contains("name") && m.contains("params") && m.contains("active_params"))
        << m.dump();
  }
}

TEST(CliProfiles, ListsTheProfiles) {
  const CliRun r = Parallax("profiles");
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(Has(r, "h100-sxm-80gb")) << r;
  EXPECT_TRUE(Has(r, "a100-sxm-80gb")) << r;
}

TEST(CliProfiles, ShowsOneProfileWithTheSourceOfEveryNumber) {
  const CliRun r = Parallax("profiles h100-sxm-80gb", Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  Json j = ParseOrFail(r.out, "stdout");
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["name"], "h100-sxm-80gb");
  int numbers = 0;
  for (const auto& [key, v] : j.items()) {
    if (!v.is_object() || !v.contains("value")) continue;
    ++numbers;
    ASSERT_TRUE(v.contains("source")) << key;
    const std::string source = v["source"].get<std::string>();
    EXPECT_FALSE(source.empty()) << key;
    EXPECT_NE(source, "unspecified") << key;
  }
  EXPECT_GE(numbers, 20);
  EXPECT_TRUE(j["bf16_tflops"]["source"].get<std::string>().find("datasheet") != std::string::npos)
      << j["bf16_tflops"].dump();
}

TEST(CliProfiles, UnknownProfileIsBadInput) {
  const CliRun r = Parallax("profiles h100-sxm-80g");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "unknown hardware profile 'h100-sxm-80g'")) << r;
  EXPECT_TRUE(Has(r, "did you mean 'h100-sxm-80gb'")) << r;
}

}  // namespace
}  // namespace parallax
