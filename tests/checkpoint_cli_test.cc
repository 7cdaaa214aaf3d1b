// `parallax execute` checkpoints end to end: a resumed run continues the uninterrupted one bit for
// bit; a checkpoint written under one layout resumes under another; a rank killed (SIGKILL) in
// training or in the middle of a save loses nothing beyond the last complete checkpoint; a
// corrupted shard is refused by every rank, never loaded.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "cli_support.h"
#include "executor/checkpoint.h"

namespace parallax::testing::cli {
namespace {

namespace fs = std::filesystem;

std::string model(const ScratchDir& dir) {
  const std::string path = dir.file("tiny.json");
  std::ofstream(path) << R"({"name": "tiny", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2,
    "head_dim": 16, "ffn_hidden": 172, "ffn_act": "swiglu", "vocab": 256})";
  return path;
}

struct Outcome {
  std::vector<double> losses;
  int64_t first_step = 0, resumed_from = 0;
};

Outcome parse(const CliRun& r) {
  Outcome out;
  const Json j = ParseOrFail(r.out, "execute --format json");
  if (!j.is_object()) return out;
  for (const auto& l : j["losses"]) out.losses.push_back(l.get<double>());
  out.first_step = j.value("first_step", int64_t{0});
  out.resumed_from = j.value("resumed_from", int64_t{0});
  return out;
}

class CheckpointCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveMpirun()) GTEST_SKIP() << "no mpirun";
    const CliRun probe = MpiParallax(2, args("--steps 1"), Streams::kBoth);
    if (probe.exit_code != 0 && Has(probe, "this build has no MPI"))
      GTEST_SKIP() << "built without MPI";
  }
  std::string args(const std::string& more) const {
    return "execute --model " + Quote(model_) + " --gbs 4 --seq 32 --lr 3e-3 --format json " + more;
  }
  std::string ckpt(const std::string& more) const {
    return args("--checkpoint-dir " + Quote(dir_.file("ckpt")) + " " + more);
  }
  /// Resumes on one rank up to step 6 and expects the uninterrupted curve `w` from step 4 to
  /// fp32 round-off (a checkpoint of step 3 resharded onto one rank).
  void expect_one_rank_resumes(const Outcome& w, const std::string& what) const {
    const CliRun one = MpiParallax(1, ckpt("--gpus 1 --steps 6 --resume"), Streams::kStdoutOnly);
    ASSERT_EQ(one.exit_code, 0) << one;
    const Outcome y = parse(one);
    ASSERT_EQ(y.losses.size(), 3u) << one;
    for (size_t i = 0; i < 3; ++i)
      EXPECT_NEAR(y.losses[i], w.losses[3 + i], 1e-5 * w.losses[3 + i])
          << what << ", step " << 4 + i;
  }
  ScratchDir dir_;
  std::string model_ = model(dir_);
};

TEST_F(CheckpointCli, ResumeContinuesBitForBitAndReshards) {
  const CliRun whole =
      MpiParallax(2, ckpt("--gpus 2 --tp 2 --steps 8 --save-every 4"), Streams::kStdoutOnly);
  ASSERT_EQ(whole.exit_code, 0) << whole;
  const Outcome w = parse(whole);
  ASSERT_EQ(w.losses.size(), 8u);
  EXPECT_EQ(exec::complete_steps(dir_.file("ckpt")), (std::vector<int64_t>{4, 8}));
  fs::remove_all(dir_.file("ckpt") + "/step-00000008");
  // The same layout from step 4: exactly the uninterrupted losses.
  const CliRun same =
      MpiParallax(2, ckpt("--gpus 2 --tp 2 --steps 8 --resume"), Streams::kStdoutOnly);
  ASSERT_EQ(same.exit_code, 0) << MpiParallax(2, ckpt("--gpus 2 --tp 2 --steps 8 --resume"));
  const Outcome s = parse(same);
  EXPECT_EQ(s.resumed_from, 4);
  EXPECT_EQ(s.first_step, 5);
  ASSERT_EQ(s.losses.size(), 4u) << same;
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(s.losses[i], w.losses[4 + i]) << "step " << 5 + i;
  // Saved at tp2, resumed at pp2 and on one rank with the distributed optimizer's layout:
  // resharded, the same curve to fp32 round-off.
  for (const auto& [ranks, layout] : {std::pair<int, std::string>{2, "--gpus 2 --pp 2"},
                                      {2, "--gpus 2 --zero 1"},
                                      {2, "--gpus 2 --zero 3"},
                                      {1, "--gpus 1"}}) {
    const CliRun r = MpiParallax(ranks, ckpt(layout + " --steps 8 --resume"), Streams::kStdoutOnly);
    ASSERT_EQ(r.exit_code, 0) << MpiParallax(ranks, ckpt(layout + " --steps 8 --resume"));
    const Outcome x = parse(r);
    ASSERT_EQ(x.losses.size(), 4u) << layout;
    for (size_t i = 0; i < 4; ++i)
      EXPECT_NEAR(x.losses[i], w.losses[4 + i], 1e-5 * w.losses[4 + i])
          << layout << " step " << 5 + i;
  }
}

// --async-save writes the shards on a thread while the next step runs; the checkpoints complete
// and resume bit for bit.
TEST_F(CheckpointCli, AsynchronousSaveCompletesAndResumesBitForBit) {
  const std::string run = ckpt("--gpus 2 --tp 2 --steps 6 --save-every 2 --async-save");
  const CliRun whole = MpiParallax(2, run, Streams::kStdoutOnly);
  ASSERT_EQ(whole.exit_code, 0) << MpiParallax(2, run);
  const Outcome w = parse(whole);
  ASSERT_EQ(w.losses.size(), 6u);
  EXPECT_EQ(exec::complete_steps(dir_.file("ckpt")), (std::vector<int64_t>{2, 4, 6}));
  fs::remove_all(dir_.file("ckpt") + "/step-00000006");
  fs::remove_all(dir_.file("ckpt") + "/step-00000004");
  const std::string resume = ckpt("--gpus 2 --tp 2 --steps 6 --resume");
  const CliRun r = MpiParallax(2, resume, Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << MpiParallax(2, resume);
  const Outcome x = parse(r);
  EXPECT_EQ(x.resumed_from, 2);
  ASSERT_EQ(x.losses.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(x.losses[i], w.losses[2 + i]) << "step " << 3 + i;
}

// A ZeRO-1 checkpoint of tp2 x pp2 (optimizer moments cut anywhere by the flat shards) resumes
// on dp4.
TEST_F(CheckpointCli, ShardedOptimizerStateReshardsAcrossLayouts) {
  const CliRun whole = MpiParallax(1, args("--steps 6"), Streams::kStdoutOnly);
  ASSERT_EQ(whole.exit_code, 0) << whole;
  const Outcome w = parse(whole);
  const std::string save = ckpt("--gpus 4 --tp 2 --pp 2 --steps 3 --save-every 3");
  ASSERT_EQ(MpiParallax(4, save, Streams::kStdoutOnly).exit_code, 0) << MpiParallax(4, save);
  const std::string resume = ckpt("--gpus 4 --zero 1 --steps 6 --resume");
  const CliRun r = MpiParallax(4, resume, Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << MpiParallax(4, resume);
  const Outcome x = parse(r);
  ASSERT_EQ(x.losses.size(), 3u) << r;
  for (size_t i = 0; i < 3; ++i)
    EXPECT_NEAR(x.losses[i], w.losses[3 + i], 1e-5 * w.losses[3 + i]) << "step " << 4 + i;
  // Saved under ZeRO-3 (each rank writes its slice of the parameters, never gathered whole),
  // resumed on one rank.
  fs::remove_all(dir_.file("ckpt"));
  const std::string save3 = ckpt("--gpus 2 --zero 3 --steps 3 --save-every 3");
  ASSERT_EQ(MpiParallax(2, save3, Streams::kStdoutOnly).exit_code, 0) << MpiParallax(2, save3);
  expect_one_rank_resumes(w, "zero 3");
}

// The distributed optimizer with expert parallelism shards the experts' moments over the ranks
// holding the same experts: saved at dp4 ep2 (each rank a quarter of the dense state and half of
// its experts'), resumed bit for bit in the same layout and resharded on one rank and into
// ZeRO-3; ZeRO-3 at ep2 (the parameters sharded the same way) saved and resharded back.
TEST_F(CheckpointCli, ExpertShardedOptimizerStateResumesAndReshards) {
  model_ = dir_.file("moe.json");
  std::ofstream(model_) << R"({"name": "moe", "layers": 2, "hidden": 64, "heads": 4,
    "kv_heads": 2, "head_dim": 16, "ffn_hidden": 172, "ffn_act": "swiglu", "vocab": 256,
    "moe": {"experts": 4, "top_k": 2, "expert_ffn_hidden": 64, "shared_experts": 1,
            "dense_layers": 1}})";
  const std::string layout = "--gpus 4 --ep 2 --zero 1";
  const CliRun whole =
      MpiParallax(4, ckpt(layout + " --steps 6 --save-every 3"), Streams::kStdoutOnly);
  ASSERT_EQ(whole.exit_code, 0) << whole;
  const Outcome w = parse(whole);
  ASSERT_EQ(w.losses.size(), 6u);
  fs::remove_all(dir_.file("ckpt") + "/step-00000006");
  const CliRun same = MpiParallax(4, ckpt(layout + " --steps 6 --resume"), Streams::kStdoutOnly);
  ASSERT_EQ(same.exit_code, 0) << same;
  const Outcome s = parse(same);
  ASSERT_EQ(s.losses.size(), 3u) << same;
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(s.losses[i], w.losses[3 + i]) << "step " << 4 + i;
  expect_one_rank_resumes(w, "zero 1 ep2");
  // Resumed at 4 ranks under `to` from step 3: the uninterrupted curve to fp32 round-off.
  auto expect_resumes = [&](const std::string& to) {
    const std::string resume = ckpt(to + " --steps 6 --resume");
    const CliRun r = MpiParallax(4, resume, Streams::kStdoutOnly);
    ASSERT_EQ(r.exit_code, 0) << MpiParallax(4, resume);
    const Outcome x = parse(r);
    ASSERT_EQ(x.losses.size(), 3u) << r;
    for (size_t i = 0; i < 3; ++i)
      EXPECT_NEAR(x.losses[i], w.losses[3 + i], 1e-5 * w.losses[3 + i]) << to << ", step " << 4 + i;
  };
  // Into ZeRO-3 with ep2: each rank reads only its dense and expert slices of the parameters.
  expect_resumes("--gpus 4 --ep 2 --zero 3");
  // Saved under ZeRO-3 with ep2 (each rank writes those slices, never gathered whole), resumed
  // under the distributed optimizer and on one rank.
  fs::remove_all(dir_.file("ckpt"));
  const std::string zero3 = ckpt("--gpus 4 --ep 2 --zero 3 --steps 3 --save-every 3");
  ASSERT_EQ(MpiParallax(4, zero3, Streams::kStdoutOnly).exit_code, 0) << MpiParallax(4, zero3);
  expect_resumes(layout);
  expect_one_rank_resumes(w, "zero 3 ep2");
  // Saved with each expert split over the tp ranks (gate and up by columns, down by rows).
  fs::remove_all(dir_.file("ckpt"));
  const std::string etp = ckpt("--gpus 4 --ep 2 --tp 2 --etp 2 --steps 3 --save-every 3");
  ASSERT_EQ(MpiParallax(4, etp, Streams::kStdoutOnly).exit_code, 0) << MpiParallax(4, etp);
  expect_one_rank_resumes(w, "etp 2");
}

// A rank SIGKILLed at a random step, or in the middle of a random save, loses nothing beyond the
// last complete checkpoint, and the resumed curve is the uninterrupted one.
TEST_F(CheckpointCli, KilledRankLosesNothingBeyondTheLastCompleteCheckpoint) {
  const CliRun whole = MpiParallax(2, args("--gpus 2 --pp 2 --steps 10"), Streams::kStdoutOnly);
  ASSERT_EQ(whole.exit_code, 0) << whole;
  const Outcome w = parse(whole);
  ASSERT_EQ(w.losses.size(), 10u);
  std::random_device seed;
  std::mt19937 rng(seed());
  for (const char* where : {"step", "save"}) {
    fs::remove_all(dir_.file("ckpt"));
    // Saves every 2 steps; a kill at step s (or in the save of step s) leaves the saves before.
    const int step = where == std::string("step") ? 3 + static_cast<int>(rng() % 7)
                                                  : 2 * (2 + static_cast<int>(rng() % 4));
    const int rank = static_cast<int>(rng() % 2);
    const std::string fault =
        std::string("kill:") + where + ":" + std::to_string(step) + ":" + std::to_string(rank);
    SCOPED_TRACE(fault);
    const CliRun killed = MpiParallax(2, ckpt("--gpus 2 --pp 2 --steps 10 --save-every 2"),
                                      Streams::kBoth, "PARALLAX_FAULT=" + fault + " ");
    EXPECT_NE(killed.exit_code, 0) << killed;
    const int64_t last = 2 * ((step - 1) / 2);  // the newest save before the fault
    const std::vector<int64_t> done = exec::complete_steps(dir_.file("ckpt"));
    ASSERT_FALSE(done.empty());
    EXPECT_EQ(done.back(), last);
    const CliRun resumed =
        MpiParallax(2, ckpt("--gpus 2 --pp 2 --steps 10 --resume"), Streams::kStdoutOnly);
    ASSERT_EQ(resumed.exit_code, 0) << MpiParallax(2, ckpt("--gpus 2 --pp 2 --steps 10 --resume"));
    const Outcome r = parse(resumed);
    EXPECT_EQ(r.resumed_from, last);
    ASSERT_EQ(r.losses.size(), static_cast<size_t>(10 - last));
    for (size_t i = 0; i < r.losses.size(); ++i)
      EXPECT_EQ(r.losses[i], w.losses[last + i]) << "step " << last + 1 + i;
  }
}

TEST_F(CheckpointCli, CorruptOrMissingCheckpointIsRefusedByEveryRank) {
  const std::string save = ckpt("--gpus 2 --steps 2 --save-every 2");
  ASSERT_EQ(MpiParallax(2, save, Streams::kStdoutOnly).exit_code, 0) << MpiParallax(2, save);
  // One byte of a payload flipped: detected by its checksum, named, never loaded.
  const std::string shard = dir_.file("ckpt") + "/step-00000002/shard-00000.bin";
  const auto middle = static_cast<std::streamoff>(fs::file_size(shard) / 2);
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(middle);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x10);
    f.seekp(middle);
    f.write(&c, 1);
    ASSERT_TRUE(f.good());
  }
  const CliRun bad = MpiParallax(2, ckpt("--gpus 2 --steps 4 --resume"));
  EXPECT_EQ(bad.exit_code, 2) << bad;
  EXPECT_TRUE(Has(bad, "shard-00000.bin")) << bad;
  EXPECT_TRUE(Has(bad, "checksum")) << bad;
  // No checkpoint at all.
  const CliRun none =
      Parallax("execute --model " + Quote(model_) + " --gbs 4 --seq 32 --resume --checkpoint-dir " +
               Quote(dir_.file("nothing")));
  EXPECT_EQ(none.exit_code, 2) << none;
  EXPECT_TRUE(Has(none, "nothing")) << none;
  const CliRun flag = Parallax("execute --model " + Quote(model_) + " --gbs 4 --seq 32 --resume");
  EXPECT_EQ(flag.exit_code, 2) << flag;
  EXPECT_TRUE(Has(flag, "--resume: needs --checkpoint-dir")) << flag;
}

}  // namespace
}  // namespace parallax::testing::cli
