// `parallax validate` as a user runs it: predictions, rejected records, completed layouts,
// the breakdown by class and rank correlation within sweeps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/json_io.h"
#include "tests/cli_support.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

using testing::test_data;
using namespace testing::cli;

// ---- validate ---------------------------------------------------------------------------------

TEST(CliValidate, PrintsATableAndTheMape) {
  const CliRun r = Parallax("validate " + Quote(test_data("validate_small.jsonl")));
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(Has(r, "fill rule:")) << r;
  for (const char* id :
       {"fixture-llama8b-fsdp-8", "fixture-gpt1p7b-a100-8", "fixture-llama70b-tp8pp2-64"})
    EXPECT_TRUE(Has(r, id)) << id << "\n" << r;
  for (const char* metric : {"step_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu"})
    EXPECT_TRUE(Has(r, metric)) << metric << "\n" << r;
  EXPECT_TRUE(Has(r, "n=3")) << r;
  EXPECT_TRUE(Has(r, "MAPE")) << r;
}

TEST(CliValidate, JsonHasRecordsAndAConsistentMape) {
  const CliRun r = Parallax("validate --format json " + Quote(test_data("validate_small.jsonl")),
                            Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  Json j = ParseOrFail(r.out, "stdout");
  ASSERT_FALSE(j.is_null());
  for (const char* k : {"records", "mape", "max_abs_error", "n"}) ASSERT_TRUE(j.contains(k)) << k;
  ASSERT_EQ(j["n"], 3);
  ASSERT_EQ(j["records"].size(), 3u);
  // Records keep file order; each compares on the most direct measurement it has.
  const char* ids[] = {"fixture-llama8b-fsdp-8", "fixture-gpt1p7b-a100-8",
                       "fixture-llama70b-tp8pp2-64"};
  const char* metrics[] = {"step_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu"};
  const double measured[] = {1.3, 9000, 400};
  double sum = 0, max = 0;
  for (int i = 0; i < 3; ++i) {
    const Json& rec = j["records"][i];
    EXPECT_EQ(rec["id"], ids[i]);
    EXPECT_EQ(rec["metric"], metrics[i]);
    EXPECT_DOUBLE_EQ(rec["measured"].get<double>(), measured[i]);
    const double predicted = rec["predicted"].get<double>();
    EXPECT_GT(predicted, 0) << rec.dump();
    // error = (predicted - measured) / measured
    const double error = rec["error"].get<double>();
    EXPECT_NEAR(error, (predicted - measured[i]) / measured[i], 1e-12) << rec.dump();
    sum += std::abs(error);
    max = std::max(max, std::abs(error));
  }
  // MAPE = mean |error|; max_abs_error = max |error|.
  EXPECT_NEAR(j["mape"].get<double>(), sum / 3, 1e-12);
  EXPECT_NEAR(j["max_abs_error"].get<double>(), max, 1e-12);
}

TEST(CliValidate, BadRecordsAreSkippedWithWhereAndWhyAndTheRestPredicted) {
  const CliRun r = Parallax("validate " + Quote(test_data("validate_malformed.jsonl")));
  EXPECT_EQ(r.exit_code, 0) << r;
  // Line 2 is cut off; line 4 has no model.layers; lines 1 and 3 are predicted.
  EXPECT_TRUE(Has(r, "warning: ")) << r;
  EXPECT_TRUE(Has(r, "validate_malformed.jsonl:2:")) << r;
  EXPECT_TRUE(Has(r, "malformed JSON")) << r;
  EXPECT_TRUE(Has(r, "validate_malformed.jsonl:4:/model/layers: missing (record skipped)")) << r;
  EXPECT_FALSE(Has(r, "validate_malformed.jsonl:1:")) << r;
  EXPECT_FALSE(Has(r, "validate_malformed.jsonl:3:")) << r;
  EXPECT_TRUE(Has(r, "n=2 ")) << r;
  EXPECT_TRUE(Has(r, "rejected 2")) << r;
}

TEST(CliValidate, RejectedRecordsAreCountedInTheJson) {
  const CliRun r =
      Parallax("validate --format json " + Quote(test_data("validate_malformed.jsonl")),
               Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  const Json j = ParseOrFail(r.out, "validate --format json");
  EXPECT_EQ(j["n"], 2);
  ASSERT_EQ(j["rejected"].size(), 2u) << j.dump();
  EXPECT_NE(j["rejected"][1]["where"].get<std::string>().find("validate_malformed.jsonl:4:"),
            std::string::npos);
}

TEST(CliValidate, MalformedLineIsFileLineColumn) {
  // One record per line, so a syntax error is file:LINE:COLUMN, not file:LINE:1:COLUMN. Line 2
  // has 72 characters and ends inside an object: the parser stops at column 73.
  const CliRun r = Parallax("validate " + Quote(test_data("validate_malformed.jsonl")));
  EXPECT_TRUE(Has(r, "validate_malformed.jsonl:2:73: malformed JSON")) << r;
}

TEST(CliValidate, AFileOfOnlyBadRecordsIsAnError) {
  ScratchDir dir;
  const std::string path = dir.file("bad.jsonl");
  std::ofstream(path) << "{\"id\": 1}\n";
  const CliRun r = Parallax("validate " + Quote(path));
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "no record could be predicted")) << r;
}

TEST(CliValidate, MissingFile) {
  ScratchDir dir;
  const CliRun r = Parallax("validate " + Quote(dir.file("none.jsonl")));
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "none.jsonl: cannot open file")) << r;
}

TEST(CliValidate, PublicRecordsAllPredict) {
  const std::string path = testing::kPublicTrainingRuns;
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  int records = 0;
  for (std::string line; std::getline(in, line);)
    if (line.find_first_not_of(" \t\r") != std::string::npos) ++records;
  const CliRun r = Parallax("validate --format json " + Quote(path), Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  Json j = ParseOrFail(r.out, "stdout");
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["n"], records);
  for (const auto& rec : j["records"]) EXPECT_GT(rec["predicted"].get<double>(), 0) << rec.dump();
}

// A record whose source gives only dp: tp and pp completed by the planner, said per record.
TEST(CliValidate, UnknownDegreesAreCompletedBySearchAndSaid) {
  const CliRun r = Parallax("validate --format json " + Quote(test_data("validate_partial.jsonl")),
                            Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  const Json j = ParseOrFail(r.out, "validate --format json");
  EXPECT_EQ(j["n"], 4);
  EXPECT_EQ(j["completed"], 1);
  EXPECT_TRUE(j["rejected"].empty()) << j.dump();
  const Json& partial = j["records"][0];
  EXPECT_EQ(partial["id"], "fixture-llama70b-partial-64");
  ASSERT_TRUE(partial.contains("completed_layout")) << partial.dump();
  // The published dp=8 is kept: tp x pp = 64 / 8.
  const std::string layout = partial["completed_layout"];
  EXPECT_NE(layout.find("dp8 "), std::string::npos) << layout;
  EXPECT_FALSE(j["records"][1].contains("completed_layout"));
}

TEST(CliValidate, ByPrintsMapeMaxAndBiasPerClass) {
  const CliRun r =
      Parallax("validate --by part,stack " + Quote(test_data("validate_partial.jsonl")));
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(Has(r, "by part:")) << r;
  EXPECT_TRUE(Has(r, "by stack:")) << r;
  EXPECT_FALSE(Has(r, "by source:")) << r;
  EXPECT_TRUE(Has(r, "megatron-lm")) << r;
  EXPECT_TRUE(Has(r, "unstated")) << r;
  EXPECT_TRUE(Has(r, "completed by search: ")) << r;
  const CliRun all =
      Parallax("validate --by all --format json " + Quote(test_data("validate_partial.jsonl")),
               Streams::kStdoutOnly);
  ASSERT_EQ(all.exit_code, 0) << all;
  const Json j = ParseOrFail(all.out, "validate --by all");
  for (const char* dim : {"source", "part", "kind", "precision", "scale", "stack"})
    ASSERT_TRUE(j["by"].contains(dim)) << dim;
  // The stack classes: 1 unstated, 3 megatron-lm; each class's MAPE is its rows' mean |error|.
  double sum = 0;
  int n = 0;
  for (const auto& rec : j["records"])
    if (rec["stack"] == "megatron-lm") {
      sum += std::abs(rec["error"].get<double>());
      ++n;
    }
  ASSERT_EQ(n, 3);
  const Json& stack = j["by"]["stack"];
  ASSERT_EQ(stack.size(), 2u);
  EXPECT_EQ(stack[1]["class"], "megatron-lm");
  EXPECT_NEAR(stack[1]["mape"].get<double>(), sum / 3, 1e-12);
}

TEST(CliValidate, AnUnknownClassIsAFlagError) {
  const CliRun r =
      Parallax("validate --by part,colour " + Quote(test_data("validate_partial.jsonl")));
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "--by: unknown class 'colour'")) << r;
}

// Within a sweep, the predicted throughputs are ranked against the measured ones.
TEST(CliValidate, SweepsReportRankCorrelation) {
  const CliRun r = Parallax("validate --format json " + Quote(test_data("validate_partial.jsonl")),
                            Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  const Json j = ParseOrFail(r.out, "validate --format json");
  ASSERT_EQ(j["sweeps"].size(), 1u) << j.dump();
  EXPECT_EQ(j["sweeps"][0]["sweep"], "fixture-llama70b-64");
  EXPECT_EQ(j["sweeps"][0]["n"], 3);
  // Same model and batch: TFLOP/s per GPU ranks as throughput does. Distinct values, so
  // rho = 1 - 6 sum d^2 / (n (n^2 - 1)) over the rank differences d.
  std::vector<double> measured, predicted;
  for (int i = 1; i <= 3; ++i) {
    measured.push_back(j["records"][i]["measured"]);
    predicted.push_back(j["records"][i]["predicted"]);
  }
  auto rank = [](const std::vector<double>& v, size_t i) {
    return std::count_if(v.begin(), v.end(), [&](double x) { return x < v[i]; });
  };
  double d2 = 0;
  for (size_t i = 0; i < 3; ++i) {
    const double d = static_cast<double>(rank(measured, i) - rank(predicted, i));
    d2 += d * d;
  }
  const double rho = j["sweeps"][0]["spearman"];
  EXPECT_NEAR(rho, 1 - 6 * d2 / (3 * 8), 1e-12);
  EXPECT_DOUBLE_EQ(j["mean_spearman"].get<double>(), rho);
}

/// The corpus: the public set and every validation/training/*/records.jsonl, quoted, sorted.
std::string corpus_files() {
  std::vector<std::string> files;
  for (const auto& d :
       std::filesystem::directory_iterator(PARALLAX_SOURCE_DIR "/validation/training"))
    if (std::filesystem::exists(d.path() / "records.jsonl"))
      files.push_back((d.path() / "records.jsonl").string());
  std::sort(files.begin(), files.end());
  std::string out = Quote(testing::kPublicTrainingRuns);
  for (const auto& f : files) out += " " + Quote(f);
  return out;
}

// The error bars every prediction prints come from validation/residuals.json, compiled in; it
// must be what the current model predicts on the current corpus
// (scripts/update_residuals.sh rewrites it).
TEST(CliValidate, ResidualTableIsCurrent) {
  ScratchDir dir;
  const std::string out = dir.file("residuals.json");
  const CliRun r = Parallax("validate --residuals-out " + Quote(out) + " " + corpus_files(),
                            Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  const Json now = ParseOrFail(testing::read_file(out).value_or(""), out);
  const std::string repo_path = PARALLAX_SOURCE_DIR "/validation/residuals.json";
  const Json repo = ParseOrFail(testing::read_file(repo_path).value_or(""), repo_path);
  ASSERT_EQ(now["classes"].size(), repo["classes"].size())
      << "run scripts/update_residuals.sh and rebuild";
  for (size_t i = 0; i < now["classes"].size(); ++i)
    for (const char* k : {"lo", "hi"})
      EXPECT_NEAR(now["classes"][i][k].get<double>(), repo["classes"][i][k].get<double>(), 1e-9)
          << now["classes"][i].dump() << "\nrun scripts/update_residuals.sh and rebuild";
  EXPECT_EQ(now["overall"]["n"], repo["overall"]["n"]);
}

// Several files are one corpus: an id given in two files counts once.
TEST(CliValidate, SeveralFilesAndTheErrorBarCoverage) {
  const std::string partial = Quote(test_data("validate_partial.jsonl"));
  const CliRun r = Parallax("validate --format json " + Quote(test_data("validate_small.jsonl")) +
                                " " + partial + " " + partial,
                            Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  const Json j = ParseOrFail(r.out, "validate --format json");
  EXPECT_EQ(j["n"], 7);
  EXPECT_EQ(j["rejected"].size(), 4u);  // the second copy of each partial record
  EXPECT_NE(j["rejected"][0]["reason"].get<std::string>().find("given twice"), std::string::npos);
  // Two sources: each checked against the other's band (too few rows for a class: overall).
  EXPECT_EQ(j["error_bars"]["checked"], 7);
  EXPECT_LE(j["error_bars"]["inside"].get<int>(), 7);
}

TEST(CliSimulate, PrintsTheErrorBarOfThePrediction) {
  const CliRun t = Parallax("simulate");
  ASSERT_EQ(t.exit_code, 0) << t;
  EXPECT_TRUE(Has(t, "error bar (80%)")) << t;
  const CliRun r = Parallax("simulate --format json", Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  const Json j = ParseOrFail(r.out, "simulate --format json");
  ASSERT_TRUE(j.contains("error_bar")) << r.out;
  const double step = j["step_time_s"];
  const Json& bar = j["error_bar"];
  // Throughput (1 + lo) .. (1 + hi) of the prediction is step time / (1 + hi) .. / (1 + lo).
  EXPECT_NEAR(bar["step_time_s"][0].get<double>(), step / (1 + bar["throughput_hi"].get<double>()),
              1e-9);
  EXPECT_NEAR(bar["step_time_s"][1].get<double>(), step / (1 + bar["throughput_lo"].get<double>()),
              1e-9);
  EXPECT_GT(bar["runs"].get<int>(), 0);
}

// A stack profile sets the kernels; a flag given beside it wins.
TEST(CliSimulate, StackProfilesSetTheKernels) {
  const std::string base = "simulate --model llama3.1-8b --gpus 8 --tp 1 --gbs 8 --format json ";
  const CliRun tt = Parallax(base + "--stack torchtitan", Streams::kStdoutOnly);
  ASSERT_EQ(tt.exit_code, 0) << tt;
  const Json t = ParseOrFail(tt.out, "torchtitan");
  EXPECT_EQ(t["plan"]["attention"], "flash2") << t["plan"].dump();
  EXPECT_EQ(t["plan"]["eager"], true);
  const CliRun pinned = Parallax(base + "--stack torchtitan --eager 0", Streams::kStdoutOnly);
  ASSERT_EQ(pinned.exit_code, 0) << pinned;
  EXPECT_EQ(ParseOrFail(pinned.out, "pinned")["plan"]["eager"], false);
  const CliRun meg = Parallax(base + "--stack megatron-lm", Streams::kStdoutOnly);
  ASSERT_EQ(meg.exit_code, 0) << meg;
  const Json m = ParseOrFail(meg.out, "megatron-lm");
  EXPECT_EQ(m["plan"]["attention"], "flash");
  // Eager ops and FlashAttention-2 cost time.
  EXPECT_GT(t["step_time_s"].get<double>(), m["step_time_s"].get<double>());
  const CliRun bad = Parallax("simulate --stack jax");
  EXPECT_EQ(bad.exit_code, 2) << bad;
  EXPECT_TRUE(Has(bad, "--stack: no stack profile 'jax'")) << bad;
  const CliRun list = Parallax("stacks");
  ASSERT_EQ(list.exit_code, 0) << list;
  EXPECT_TRUE(Has(list, "nanotron")) << list;
  EXPECT_TRUE(Has(Parallax("stacks torchtitan"), "\"source\"")) << list;
}

}  // namespace
}  // namespace parallax
