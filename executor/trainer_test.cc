#include "executor/trainer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "executor/checkpoint.h"

namespace parallax::exec {
namespace {

namespace fs = std::filesystem;

ModelShape tiny() {
  ModelShape s;
  s.layers = 2;
  s.hidden = 32;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 8;
  s.ffn_hidden = 64;
  s.vocab = 64;
  return s;
}

TrainOptions options(const std::string& dir) {
  TrainOptions o;
  o.steps = 5;
  o.seq = 16;
  o.global_batch = 2;
  o.checkpoint_dir = dir;
  o.save_every = 1;
  return o;
}

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = (fs::path(::testing::TempDir()) /
            ("px-train-" + std::string(info->name()) + "-" + std::to_string(::getpid())))
               .string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

// A learning rate the library accepts but that overflows the weights: step 1's update takes
// them to about 1e30, and step 2's forward overflows. The run stops at step 2 before its
// update, its first step recorded and step 1's checkpoint complete.
TEST_F(TrainerTest, StopsAtTheFirstNonFiniteLossKeepingTheLastCheckpoint) {
  const auto group = make_local_group();
  TrainOptions o = options(dir_);
  o.adam.lr = 1e30;
  o.adam.clip_norm = 0;
  auto r = train(tiny(), TokenSource::synthetic(64, 7), o, *group);
  ASSERT_TRUE(r.ok()) << r.error_text();
  ASSERT_TRUE(r->stopped.has_value());
  EXPECT_EQ(r->stopped->step, 2);
  EXPECT_FALSE(std::isfinite(r->stopped->value));
  EXPECT_TRUE(r->stopped->quantity == "loss" || r->stopped->quantity == "gradient norm");
  ASSERT_EQ(r->steps.size(), 1u);
  EXPECT_TRUE(std::isfinite(r->steps[0].loss));
  EXPECT_EQ(r->saved, (std::vector<int64_t>{1}));
  EXPECT_EQ(complete_steps(dir_), (std::vector<int64_t>{1}));
}

// The same run at a sane rate trains all its steps, and --keep-last keeps the newest two.
TEST_F(TrainerTest, KeepsTheNewestCheckpoints) {
  const auto group = make_local_group();
  TrainOptions o = options(dir_);
  o.keep_last = 2;
  auto r = train(tiny(), TokenSource::synthetic(64, 7), o, *group);
  ASSERT_TRUE(r.ok()) << r.error_text();
  EXPECT_FALSE(r->stopped.has_value());
  EXPECT_EQ(r->steps.size(), 5u);
  EXPECT_EQ(r->removed, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(complete_steps(dir_), (std::vector<int64_t>{4, 5}));
}

TEST_F(TrainerTest, NonFiniteOrNegativeSettingsAreRefused) {
  const auto group = make_local_group();
  TrainOptions o = options(dir_);
  o.adam.lr = std::nan("");
  o.adam.warmup_steps = -5;
  auto r = train(tiny(), TokenSource::synthetic(64, 7), o, *group);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error_text().find("--lr: must be a finite number above 0"), std::string::npos)
      << r.error_text();
  EXPECT_NE(r.error_text().find("--warmup: must be 0 or more"), std::string::npos)
      << r.error_text();
}

}  // namespace
}  // namespace parallax::exec
