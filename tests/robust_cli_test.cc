// Inputs the CLI used to crash on or accept silently, end to end: each ends in a located error
// or a warning, and an interrupted write leaves nothing behind for long.
#include <fstream>
#include <string>

#include "tests/cli_support.h"

namespace parallax::testing::cli {
namespace {

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(RobustCli, AStaleTemporaryOfAKilledWriterIsRemovedOnTheNextWrite) {
  ScratchDir dir;
  // A pid above Linux's largest (2^22): no such process, as after a kill -9 mid-write.
  const std::string stale = dir.file("trace.json.tmp.4999999");
  Write(stale, std::string(1 << 20, 'x'));
  const std::string other = dir.file("other.json.tmp.4999999");  // another file's: kept
  Write(other, "{}");
  CliRun r = Parallax("simulate --model llama3.1-8b --gpus 8 --gbs 8 --seq 1024 --trace " +
                      Quote(dir.file("trace.json")));
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(other));
  EXPECT_TRUE(fs::exists(dir.file("trace.json")));
  EXPECT_TRUE(Has(r, "note: removed " + stale)) << r;
}

TEST(RobustCli, FlagErrorsSayErrorAndNameTheFlag) {
  CliRun r = Parallax("serve --model llama3.1-8b --gpus 1 --tp 1 --rate nan");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "error: --rate: got 'nan', want a number in [0, 1e+09]")) << r;
  CliRun t = Parallax("plan --model llama3.1-8b --gpus 8 --threads -1");
  EXPECT_EQ(t.exit_code, 2) << t;
  EXPECT_TRUE(Has(t, "error: --threads")) << t;
}

TEST(RobustCli, AnAbsurdBatchIsRefusedBeforeAnyWork) {
  CliRun r = Parallax("simulate --model llama3.1-8b --gpus 8 --gbs 2147483647 --seq 1024");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "error: --gbs: gbs=2147483647 is out of range")) << r;
}

TEST(RobustCli, ADuplicatedRecordIdIsSkippedNotCountedTwice) {
  ScratchDir dir;
  std::ifstream in(std::string(PARALLAX_SOURCE_DIR) + "/validation/public-training.jsonl");
  std::string first;
  std::getline(in, first);
  const std::string path = dir.file("dup.jsonl");
  Write(path, first + "\n" + first + "\n");
  CliRun r = Parallax("validate " + Quote(path));
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(Has(r, "warning: " + path + ":2: record id")) << r;
  EXPECT_TRUE(Has(r, "first at " + path + ":1")) << r;
  EXPECT_TRUE(Has(r, "n=1 ")) << r;
}

TEST(RobustCli, ATraceKeyNotReadIsAWarning) {
  ScratchDir dir;
  const std::string path = dir.file("t.jsonl");
  Write(path, "{\"arrival_s\": 0, \"prompt_len\": 64, \"output_len\": 8, \"prio\": 1}\n");
  CliRun r = Parallax("serve --model llama3.1-8b --gpus 1 --tp 1 --requests-file " + Quote(path));
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(Has(r, "warning: " + path + ":1: 'prio' is not read")) << r;
}

TEST(RobustCli, ADirectoryGivenAsAModelSaysSo) {
  ScratchDir dir;
  CliRun r = Parallax("simulate --model " + Quote(dir.file("")) + " --gpus 8 --gbs 8");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "is a directory")) << r;
}

TEST(RobustCli, ANameFromTheUserCannotDriveTheTerminalOrFloodIt) {
  CliRun r = Parallax("simulate --gpus 8 --gbs 8 --cluster " + Quote("h\x1b[31m"));
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "unknown hardware profile 'h\\x1b[31m'")) << r;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r;
  CliRun big = Parallax("simulate --gpus 8 --gbs 8 --model " + std::string(100000, 'x'));
  EXPECT_EQ(big.exit_code, 2) << big;
  EXPECT_LT(big.out.size(), 5000u);
  EXPECT_TRUE(Has(big, "in all)")) << big;
}

}  // namespace
}  // namespace parallax::testing::cli
