#include "executor/checkpoint_retention.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "executor/checkpoint.h"

namespace parallax::exec {
namespace {

namespace fs = std::filesystem;

class CheckpointRetentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = (fs::path(::testing::TempDir()) /
            ("px-keep-" + std::string(info->name()) + "-" + std::to_string(::getpid())))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// A complete checkpoint of `step`: two shards of one small tensor and the manifest.
  void save(int64_t step) {
    const std::vector<float> values(4, static_cast<float>(step));
    std::vector<ShardInfo> shards;
    for (int r = 0; r < 2; ++r) {
      const std::vector<Piece> pieces = {{{"param", "w", 2, 4, r, 0, 1, 4}, values}};
      auto info = write_shard(dir_, step, r, pieces);
      ASSERT_TRUE(info.ok()) << info.error_text();
      shards.push_back(*info);
    }
    ASSERT_TRUE(write_manifest(dir_, step, shards, nlohmann::json::object()).empty());
  }
  std::string dir_;
};

TEST_F(CheckpointRetentionTest, KeepsTheNewestAndTheOneJustWritten) {
  for (const int64_t s : {2, 4, 6, 8, 10}) save(s);
  // Step 4 was just written (a fresh run over an older one): kept with the newest two.
  const CheckpointCleanup c = remove_old_checkpoints(dir_, 2, 4);
  EXPECT_EQ(c.steps, (std::vector<int64_t>{2, 6}));
  EXPECT_TRUE(c.notes.empty());
  EXPECT_EQ(complete_steps(dir_), (std::vector<int64_t>{4, 8, 10}));
  EXPECT_FALSE(fs::exists(step_directory(dir_, 2)));
  // The newest, which a resume reads, is intact.
  auto ck = Checkpoint::open_latest(dir_);
  ASSERT_TRUE(ck.ok()) << ck.error_text();
  EXPECT_EQ(ck->step(), 10);
  // Nothing to do when no more than keep_last are there, and 0 keeps all.
  EXPECT_TRUE(remove_old_checkpoints(dir_, 3, 10).steps.empty());
  EXPECT_TRUE(remove_old_checkpoints(dir_, 0, 10).steps.empty());
  EXPECT_EQ(remove_old_checkpoints(dir_, 1, 10).steps, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(complete_steps(dir_), (std::vector<int64_t>{10}));
}

TEST_F(CheckpointRetentionTest, DeletesOnlyWhatTheCheckpointWrote) {
  for (const int64_t s : {1, 2, 3}) save(s);
  // Step 1 holds a file of someone else's: the checkpoint goes, the file and directory stay.
  std::ofstream(step_directory(dir_, 1) + "/notes.txt") << "mine";
  // Step 2's manifest is not ours: nothing of it is touched.
  std::ofstream(step_directory(dir_, 2) + "/manifest.json") << R"({"format": "other/1"})";
  // Incomplete step directories and other entries are never candidates.
  fs::create_directories(dir_ + "/step-00000000");
  std::ofstream(dir_ + "/README") << "keep";
  const CheckpointCleanup c = remove_old_checkpoints(dir_, 1, 3);
  EXPECT_EQ(c.steps, (std::vector<int64_t>{1}));
  ASSERT_EQ(c.notes.size(), 2u);
  EXPECT_NE(c.notes[0].find("step-00000001: deleted the checkpoint but kept the directory: it "
                            "holds files the checkpoint does not list: notes.txt"),
            std::string::npos)
      << c.notes[0];
  EXPECT_NE(c.notes[1].find("step-00000002: not deleted: its manifest is not a "
                            "parallax-checkpoint/1 manifest"),
            std::string::npos)
      << c.notes[1];
  EXPECT_TRUE(fs::exists(step_directory(dir_, 1) + "/notes.txt"));
  EXPECT_FALSE(fs::exists(step_directory(dir_, 1) + "/shard-00000.bin"));
  EXPECT_TRUE(fs::exists(step_directory(dir_, 2) + "/shard-00001.bin"));
  EXPECT_TRUE(fs::exists(dir_ + "/step-00000000"));
  EXPECT_TRUE(fs::exists(dir_ + "/README"));
}

TEST_F(CheckpointRetentionTest, ADamagedManifestIsNoManifestNeverAnException) {
  for (const int64_t s : {1, 2, 3, 4}) save(s);
  // A format of the wrong type, a shard entry of the wrong type, nesting past the bound.
  std::ofstream(step_directory(dir_, 1) + "/manifest.json") << R"({"format": 3, "shards": []})";
  std::ofstream(step_directory(dir_, 2) + "/manifest.json")
      << R"({"format": "parallax-checkpoint/1", "shards": [{"file": 7}]})";
  std::ofstream(step_directory(dir_, 3) + "/manifest.json")
      << std::string(100000, '[') + std::string(100000, ']');
  const CheckpointCleanup c = remove_old_checkpoints(dir_, 1, 4);
  EXPECT_TRUE(c.steps.empty());
  ASSERT_EQ(c.notes.size(), 3u);
  for (const auto& n : c.notes) EXPECT_NE(n.find("not deleted"), std::string::npos) << n;
  EXPECT_TRUE(fs::exists(step_directory(dir_, 1) + "/shard-00000.bin"));
}

TEST_F(CheckpointRetentionTest, StaleTemporariesOfInterruptedWritesAreRemoved) {
  save(2);
  const std::string sdir = step_directory(dir_, 4);  // a save killed midway
  fs::create_directories(sdir);
  std::ofstream(sdir + "/shard-00000.bin.tmp") << "half a shard";
  std::ofstream(sdir + "/manifest.json.tmp") << "{\"format\": \"parallax-chec";
  std::ofstream(sdir + "/other.tmp") << "not ours";
  std::ofstream(dir_ + "/shard-00000.bin.tmp") << "not in a step directory";
  const CheckpointCleanup c = remove_stale_temporaries(dir_);
  ASSERT_EQ(c.files.size(), 2u);
  EXPECT_TRUE(c.notes.empty());
  EXPECT_FALSE(fs::exists(sdir + "/shard-00000.bin.tmp"));
  EXPECT_FALSE(fs::exists(sdir + "/manifest.json.tmp"));
  EXPECT_TRUE(fs::exists(sdir + "/other.tmp"));
  EXPECT_TRUE(fs::exists(dir_ + "/shard-00000.bin.tmp"));
  EXPECT_EQ(complete_steps(dir_), (std::vector<int64_t>{2}));
  EXPECT_TRUE(remove_stale_temporaries(dir_ + "/missing").files.empty());
}

}  // namespace
}  // namespace parallax::exec
