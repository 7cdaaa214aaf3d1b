// `parallax calibrate` end to end on this machine's CPU: a profile the simulator reads, a raw
// file that refits to the same profile, --check, MPI collectives, and bad input.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "cli_support.h"

namespace parallax::testing::cli {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// One quick calibration (GEMM and memory tables only, a few seconds) shared by the tests.
class CalibrateCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    run_ = new CliRun(
        Parallax("calibrate --quick --tables gemm,memory,attention --name cpu-test --out " +
                 Quote(dir_->file("cpu.json")) + " --raw " + Quote(dir_->file("raw.json"))));
  }
  static void TearDownTestSuite() {
    delete run_;
    delete dir_;
  }
  static ScratchDir* dir_;
  static CliRun* run_;
};
ScratchDir* CalibrateCli::dir_ = nullptr;
CliRun* CalibrateCli::run_ = nullptr;

TEST_F(CalibrateCli, WritesAMeasuredProfileWithItsTablesAndSources) {
  ASSERT_EQ(run_->exit_code, 0) << *run_;
  EXPECT_TRUE(Has(*run_, "gemm fp32:")) << *run_;
  EXPECT_TRUE(Has(*run_, "wrote ")) << *run_;
  const Json p = ParseOrFail(slurp(dir_->file("cpu.json")), "cpu.json");
  EXPECT_EQ(p["name"], "cpu-test");
  EXPECT_EQ(p["measured"], true);
  EXPECT_FALSE(p["date"].get<std::string>().empty());
  EXPECT_GT(p["measured_tables"]["gemm"].size(), 10u);
  EXPECT_GT(p["measured_tables"]["memory"].size(), 10u);
  EXPECT_GT(p["measured_tables"]["attention"].size(), 3u);
  EXPECT_GT(p["fp32_tflops"]["value"].get<double>(), 0);
  EXPECT_NE(p["fp32_tflops"]["source"].get<std::string>().find("measured by parallax calibrate"),
            std::string::npos);
  for (const auto& row : p["measured_tables"]["gemm"]) EXPECT_GT(row["tflops"].get<double>(), 0);
}

TEST_F(CalibrateCli, SimulatorUsesTheMeasuredTablesAndSaysSo) {
  ASSERT_EQ(run_->exit_code, 0) << *run_;
  // A small model of the size CPU ranks train.
  std::ofstream(dir_->file("tiny.json"))
      << R"({"name": "tiny", "layers": 4, "hidden": 512, "heads": 8, "kv_heads": 8,
             "ffn_hidden": 2048, "vocab": 32000})";
  const CliRun r = Parallax("simulate --model " + Quote(dir_->file("tiny.json")) + " --cluster " +
                                Quote(dir_->file("cpu.json")) +
                                " --gpus 1 --tp 1 --gbs 4 --seq 1024 --format json",
                            Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  const Json j = ParseOrFail(r.out, "simulate");
  // GEMMs of a 512-wide model lie inside the CPU grid: the table answers for them.
  bool said = false;
  for (const auto& n : j["notes"]) {
    const std::string note = n.get<std::string>();
    if (note.find("measured tables of cpu-test: GEMM") == std::string::npos) continue;
    said = true;
    EXPECT_EQ(note.find("GEMM 0 of"), std::string::npos) << note;
  }
  EXPECT_TRUE(said) << j["notes"].dump();
}

TEST_F(CalibrateCli, RawFileRefitsToTheSameProfile) {
  ASSERT_EQ(run_->exit_code, 0) << *run_;
  const CliRun r = Parallax("calibrate --from-raw " + Quote(dir_->file("raw.json")) +
                            " --name cpu-test --out " + Quote(dir_->file("refit.json")));
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(slurp(dir_->file("refit.json")), slurp(dir_->file("cpu.json")));
}

TEST_F(CalibrateCli, CheckRemeasuresASampleAndReportsTheDeviation) {
  ASSERT_EQ(run_->exit_code, 0) << *run_;
  // A generous tolerance: this asks that the check runs and matches points, not that a shared
  // machine is quiet.
  const CliRun r =
      Parallax("calibrate --quick --check " + Quote(dir_->file("cpu.json")) + " --tolerance 10");
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(Has(r, "median deviation")) << r;
  EXPECT_FALSE(Has(r, "not in the profile")) << r;
  // No profile is written by a check.
  EXPECT_TRUE(Has(Parallax("calibrate --check " + Quote(dir_->file("cpu.json")) + " --out x.json"),
                  "writes no profile"));
}

TEST_F(CalibrateCli, BadInputIsRefusedAndLeavesTheOldProfileWhole) {
  ASSERT_EQ(run_->exit_code, 0) << *run_;
  const std::string before = slurp(dir_->file("cpu.json"));
  const std::string out = " --out " + Quote(dir_->file("cpu.json"));
  CliRun r = Parallax("calibrate --tables gemm,flops" + out);
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "--tables: unknown table 'flops'")) << r;
  r = Parallax("calibrate --check h100-sxm-80gb");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "has no measured tables")) << r;
  {
    std::ofstream(dir_->file("bad-raw.json")) << R"({"format": "parallax-calibration/1",
      "backend": "cpu-eigen", "gemm": [{"m": 64, "n": 64, "k": 64, "precision": "fp32",
      "stats": {"reps": 3, "median_s": 0}}]})";
  }
  r = Parallax("calibrate --from-raw " + Quote(dir_->file("bad-raw.json")) + out);
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "bad-raw.json:/gemm/0/stats/median_s")) << r;
  EXPECT_EQ(slurp(dir_->file("cpu.json")), before);
  // A file that is not a calibration run.
  r = Parallax("calibrate --from-raw " + Quote(dir_->file("cpu.json")) + out);
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "not a calibration file")) << r;
  EXPECT_EQ(slurp(dir_->file("cpu.json")), before);
  // The CUDA backend on a machine without a GPU fails cleanly.
  r = Parallax("calibrate --backend cuda --quick" + out);
  if (r.exit_code != 0) {
    EXPECT_TRUE(Has(r, "cuda") || Has(r, "CUDA")) << r;
    EXPECT_EQ(slurp(dir_->file("cpu.json")), before);
  }
}

// Collectives over MPI with two ranks, as a user launches it.
TEST(CalibrateMpi, TwoRanksMeasureCollectivesAndFitTheLink) {
  if (!HaveMpirun()) GTEST_SKIP() << "no mpirun";
  ScratchDir dir;
  const CliRun r = MpiParallax(
      2, "calibrate --quick --tables gemm,memory,collectives --out " + Quote(dir.file("mpi.json")));
  const std::string& out = r.out;
  if (out.find("built without MPI") != std::string::npos) GTEST_SKIP() << "built without MPI";
  ASSERT_EQ(r.exit_code, 0) << out;
  EXPECT_NE(out.find("busbw(GB/s)"), std::string::npos) << out;
  const Json p = ParseOrFail(slurp(dir.file("mpi.json")), "mpi.json");
  const Json& c = p["measured_tables"]["collectives"];
  ASSERT_GT(c.size(), 20u) << out;
  for (const auto& row : c) {
    EXPECT_EQ(row["group_size"], 2);
    EXPECT_GT(row["busbw_gbps"].get<double>(), 0);
  }
  EXPECT_EQ(p["scale_up_domain"]["value"], 2);
  EXPECT_NE(p["scale_up_latency_us"]["source"].get<std::string>().find("send/recv fit"),
            std::string::npos);
}

}  // namespace
}  // namespace parallax::testing::cli
