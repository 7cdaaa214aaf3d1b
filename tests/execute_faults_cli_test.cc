// `parallax execute` when things go wrong: flags out of range are refused with their names; a
// non-finite loss or gradient norm stops every rank at the same step and keeps the last good
// checkpoint; old checkpoints and the temporaries of interrupted writes do not pile up; a rank
// that stops answering (stuck, or paused by SIGSTOP in the middle of a collective) is named and
// the job ends within about --timeout.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli_support.h"
#include "executor/checkpoint.h"

namespace parallax::testing::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string tiny_model(const ScratchDir& dir) {
  const std::string path = dir.file("tiny.json");
  std::ofstream(path) << R"({"name": "tiny", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2,
    "head_dim": 16, "ffn_hidden": 172, "ffn_act": "swiglu", "vocab": 256})";
  return path;
}

std::string execute(const ScratchDir& dir, const std::string& more) {
  return "execute --model " + Quote(tiny_model(dir)) + " --gbs 4 --seq 32 " + more;
}

// Whether 2-rank MPI jobs run here (mpirun on the PATH, the binary built with MPI).
bool MpiJobsRun(const ScratchDir& dir) {
  if (!HaveMpirun()) return false;
  const CliRun probe = MpiParallax(2, execute(dir, "--gpus 2 --steps 1"));
  return probe.exit_code == 0 || !Has(probe, "this build has no MPI");
}

TEST(ExecuteFaults, EveryNumericFlagOutOfRangeIsRefusedByName) {
  ScratchDir dir;
  const CliRun all = Parallax(
      execute(dir,
              "--lr nan --warmup -5 --steps 0 --timeout inf --temperature -1 --fit-gib nan "
              "--save-every -1 --keep-last -2 --max-new-tokens 0"));
  EXPECT_EQ(all.exit_code, 2) << all;
  for (const char* e :
       {"error: --lr: must be a finite number in (0, 1], got nan",
        "error: --warmup: must be in [0, 99999999], got -5",
        "error: --steps: must be in [1, 99999999], got 0 (hint: checkpoint directories carry the "
        "step in 8 digits)",
        "error: --timeout: must be a finite number in (0, 86400], got inf",
        "error: --temperature: must be a finite number in [0, 1e+06], got -1",
        "error: --fit-gib: must be a finite number in (0, 1e+09], got nan",
        "error: --save-every: must be in [0, 99999999], got -1",
        "error: --keep-last: must be in [0, 99999999], got -2",
        "error: --max-new-tokens: must be in [1, 1048576], got 0"})
    EXPECT_TRUE(Has(all, e)) << e << "\n" << all;
  const CliRun big = Parallax(execute(dir, "--lr 1e30"));
  EXPECT_EQ(big.exit_code, 2) << big;
  EXPECT_TRUE(Has(big,
                  "error: --lr: must be at most 1 for AdamW, got 1e+30 (hint: AdamW moves "
                  "each weight by about lr a step"))
      << big;
  const CliRun zero = Parallax(execute(dir, "--fit-gib 0"));
  EXPECT_EQ(zero.exit_code, 2) << zero;
  EXPECT_TRUE(Has(zero, "error: --fit-gib: must be a finite number in (0, 1e+09], got 0")) << zero;
  const CliRun seed = Parallax(execute(dir, "--seed -1"));
  EXPECT_EQ(seed.exit_code, 2) << seed;
  EXPECT_TRUE(Has(seed, "--seed: must be in [0, 2^64 - 1], got -1")) << seed;
  const CliRun negative = Parallax(execute(dir, "--lr -1"));
  EXPECT_EQ(negative.exit_code, 2) << negative;
  EXPECT_TRUE(Has(negative, "--lr: must be a finite number in (0, 1], got -1")) << negative;
  // Allowed, and said: a warm-up longer than the run (it is to be resumed).
  const CliRun warm = Parallax(execute(dir, "--steps 1 --warmup 100"));
  EXPECT_EQ(warm.exit_code, 0) << warm;
  EXPECT_TRUE(Has(warm, "note: --warmup 100 is longer than --steps 1")) << warm;
}

// A NaN in rank 1's gradient at step 5 (injected): both ranks stop at step 5 before its update
// with exit code 4, naming the step and the value; the checkpoints of steps 2 and 4 stay
// complete, and the run resumes from step 4.
TEST(ExecuteFaultsMpi, NonFiniteGradientStopsEveryRankAndKeepsTheLastCheckpoint) {
  ScratchDir dir;
  if (!MpiJobsRun(dir)) GTEST_SKIP() << "no mpirun, or built without MPI";
  const std::string ckpt = "--gpus 2 --checkpoint-dir " + Quote(dir.file("ckpt"));
  const CliRun r = MpiParallax(2, execute(dir, ckpt + " --steps 8 --save-every 2"), Streams::kBoth,
                               "PARALLAX_FAULT=nan:step:5:1 ");
  EXPECT_EQ(r.exit_code, 4) << r;
  EXPECT_TRUE(Has(r,
                  "error: step 5: the gradient norm is nan, not finite: training stopped "
                  "before this step's update"))
      << r;
  EXPECT_TRUE(Has(r, "error: rank 1: step 5: the gradient norm is nan")) << r;
  EXPECT_TRUE(Has(r, "the newest complete checkpoint, step 4 in")) << r;
  EXPECT_FALSE(Has(r, "step    5  loss")) << r;  // the step never completed
  EXPECT_EQ(exec::complete_steps(dir.file("ckpt")), (std::vector<int64_t>{2, 4}));
  const CliRun resumed =
      MpiParallax(2, execute(dir, ckpt + " --steps 6 --resume --format json"), Streams::kBoth);
  ASSERT_EQ(resumed.exit_code, 0) << resumed;
  EXPECT_TRUE(Has(resumed, "\"resumed_from\": 4")) << resumed;
}

// --keep-last 2 keeps the newest two checkpoints; a temporary left by a write killed mid-save
// is removed by the next run, with a note, and nothing else in the directory is touched.
TEST(ExecuteFaults, OldCheckpointsAndStaleTemporariesAreRemoved) {
  ScratchDir dir;
  const std::string d = dir.file("ckpt");
  fs::create_directories(d + "/step-00000009");
  std::ofstream(d + "/step-00000009/shard-00000.bin.tmp") << "half a shard";
  std::ofstream(d + "/notes.txt") << "mine";
  const std::string run = "--checkpoint-dir " + Quote(d) + " --save-every 1 --keep-last 2";
  const CliRun r = Parallax(execute(dir, run + " --steps 6"));
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(Has(r, "note: removed " + d +
                         "/step-00000009/shard-00000.bin.tmp, left by an interrupted checkpoint "
                         "write"))
      << r;
  EXPECT_TRUE(Has(r, "removed the older checkpoints of steps 1, 2, 3, 4 (--keep-last 2)")) << r;
  EXPECT_EQ(exec::complete_steps(d), (std::vector<int64_t>{5, 6}));
  EXPECT_FALSE(fs::exists(d + "/step-00000009/shard-00000.bin.tmp"));
  EXPECT_TRUE(fs::exists(d + "/notes.txt"));
  // --keep-last 0 keeps every one.
  const CliRun all = Parallax(execute(
      dir, "--checkpoint-dir " + Quote(d) + " --save-every 1 --keep-last 0 --steps 9 --resume"));
  ASSERT_EQ(all.exit_code, 0) << all;
  EXPECT_EQ(exec::complete_steps(d), (std::vector<int64_t>{5, 6, 7, 8, 9}));
}

// A rank that stops answering before a collective: its peers name it after --timeout.
TEST(ExecuteFaultsMpi, AStuckRankIsNamedInsteadOfHanging) {
  ScratchDir dir;
  if (!MpiJobsRun(dir)) GTEST_SKIP() << "no mpirun, or built without MPI";
  const std::string args = execute(dir, "--steps 4 --gpus 2 --pp 2 --timeout 2");
  CliRun r = MpiParallax(2, args, Streams::kBoth, "PARALLAX_FAULT=hang:step:2:1 ");
  EXPECT_EQ(r.exit_code, 3) << r;
  EXPECT_TRUE(Has(r, "error: rank 0: waited 2 s for barrier")) << r;
  EXPECT_TRUE(Has(r, "rank(s) 1 do not answer (stopped, or busy outside MPI)")) << r;
  EXPECT_TRUE(Has(r, "rank(s) 1 have not arrived")) << r;
  r = MpiParallax(2, args, Streams::kBoth, "PARALLAX_FAULT=hang:step:2:0 ");
  EXPECT_EQ(r.exit_code, 3) << r;
  EXPECT_TRUE(Has(r, "error: rank 1: waited 2 s for barrier")) << r;
  EXPECT_TRUE(Has(r, "rank(s) 0 do not answer")) << r;
}

// The processes (of this user) whose environment holds every one of `vars` (NAME=value).
std::vector<pid_t> PidsWithEnvironment(const std::vector<std::string>& vars) {
  std::vector<pid_t> pids;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "environ", std::ios::binary);
    std::string env((std::istreambuf_iterator<char>(in)), {});
    std::vector<std::string> entries;
    std::istringstream split(env);
    for (std::string v; std::getline(split, v, '\0');) entries.push_back(v);
    bool all = true;
    for (const std::string& v : vars)
      all = all && std::find(entries.begin(), entries.end(), v) != entries.end();
    if (all) pids.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return pids;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

struct StopTrial {
  bool ended = false;
  int exit_code = -1;
  double seconds = 0;  ///< from the SIGSTOP to the end of the job
  std::string out;
};

// Runs a 2-rank data-parallel job of many steps in the background, pauses rank `stopped` with
// SIGSTOP once it trains, and waits up to `limit_s` for the job to end. Every process of the
// job is continued and killed afterwards.
StopTrial StopARank(const ScratchDir& dir, int stopped, double timeout_s, double limit_s) {
  StopTrial t;
  const std::string tag = "PARALLAX_TEST_JOB=" + std::to_string(::getpid()) + "-" +
                          std::to_string(Clock::now().time_since_epoch().count());
  const std::string out = dir.file("stop.out"), rc = dir.file("stop.rc");
  fs::remove(out);
  fs::remove(rc);
  const std::string job =
      tag +
      " OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np 2 " +
      Quote(PARALLAX_BINARY) + " " +
      execute(dir, "--gpus 2 --steps 100000 --timeout " + std::to_string(timeout_s)) + " > " +
      Quote(out) + " 2>&1";
  std::system(("(" + job + "; echo $? > " + Quote(rc) + ") >/dev/null 2>&1 &").c_str());
  std::vector<pid_t> ranks;
  for (const auto start = Clock::now(); Clock::now() - start < std::chrono::seconds(60);) {
    if (Has(CliRun{0, Slurp(out)}, "step    3 ") && ranks.empty())
      ranks = PidsWithEnvironment({tag, "OMPI_COMM_WORLD_RANK=" + std::to_string(stopped)});
    if (!ranks.empty() || fs::exists(rc)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (ranks.size() == 1) {
    ::kill(ranks[0], SIGSTOP);
    const auto stop = Clock::now();
    while (!fs::exists(rc) && Clock::now() - stop < std::chrono::duration<double>(limit_s))
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    t.seconds = std::chrono::duration<double>(Clock::now() - stop).count();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // rc written in full
    t.ended = fs::exists(rc);
  }
  // Whatever is left of the job: continued, then killed.
  for (const pid_t p : PidsWithEnvironment({tag})) {
    ::kill(p, SIGCONT);
    ::kill(p, SIGKILL);
  }
  for (const auto start = Clock::now();
       !fs::exists(rc) && Clock::now() - start < std::chrono::seconds(10);)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  t.out = Slurp(out);
  if (t.ended) t.exit_code = std::stoi("0" + Slurp(rc));
  if (ranks.size() != 1) ADD_FAILURE() << "rank " << stopped << " not found:\n" << t.out;
  return t;
}

// A rank paused by SIGSTOP wherever it is, often inside the gradient all-reduce its peer waits
// in: the peer names it and the job ends (exit code 3) within about --timeout.
TEST(ExecuteFaultsMpi, ARankPausedInACollectiveIsNamedAndTheJobEnds) {
  ScratchDir dir;
  if (!MpiJobsRun(dir)) GTEST_SKIP() << "no mpirun, or built without MPI";
  if (!fs::exists("/proc/self/environ")) GTEST_SKIP() << "no /proc to find a rank's pid";
  constexpr double kTimeout = 3, kLimit = kTimeout + 20;
  for (const int stopped : {1, 0}) {
    SCOPED_TRACE("SIGSTOP to rank " + std::to_string(stopped));
    const StopTrial t = StopARank(dir, stopped, kTimeout, kLimit);
    ASSERT_TRUE(t.ended) << "still running " << kLimit << " s after the SIGSTOP:\n" << t.out;
    EXPECT_EQ(t.exit_code, 3) << t.out;
    EXPECT_TRUE(
        Has(CliRun{0, t.out}, "error: rank " + std::to_string(1 - stopped) + ": waited 3 s"))
        << t.out;
    EXPECT_TRUE(
        Has(CliRun{0, t.out}, "rank(s) " + std::to_string(stopped) + " do not answer (stopped"))
        << t.out;
    EXPECT_LT(t.seconds, kLimit);
    std::cerr << "rank " << stopped << " stopped: the job ended " << t.seconds << " s later\n";
  }
}

}  // namespace
}  // namespace parallax::testing::cli
