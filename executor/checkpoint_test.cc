#include "executor/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

namespace parallax::exec {
namespace {

namespace fs = std::filesystem;

/// A logical tensor whose element (r, c) is r * 1000 + c + salt, so that every value says where
/// it came from.
struct Tensor {
  std::string kind, name;
  int64_t rows, cols;
  float salt = 0;
  float at(int64_t r, int64_t c) const { return static_cast<float>(r * 1000 + c) + salt; }
  std::vector<float> rect(int64_t r0, int64_t c0, int64_t nr, int64_t nc) const {
    std::vector<float> v;
    for (int64_t r = r0; r < r0 + nr; ++r)
      for (int64_t c = c0; c < c0 + nc; ++c) v.push_back(at(r, c));
    return v;
  }
};

/// Owns the data of the pieces it hands out.
struct Rank {
  std::vector<std::vector<float>> data;
  std::vector<Piece> pieces;
  void add(const Tensor& t, int64_t r0, int64_t c0, int64_t nr, int64_t nc) {
    data.push_back(t.rect(r0, c0, nr, nc));
    pieces.push_back({{t.kind, t.name, t.rows, t.cols, r0, c0, nr, nc}, {}});
  }
  std::span<const Piece> finish() {
    for (size_t i = 0; i < pieces.size(); ++i) pieces[i].data = data[i];
    return pieces;
  }
};

std::string text(const Diagnostics& ds) {
  std::string s;
  for (const auto& d : ds) s += d.str() + "\n";
  return s;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = (fs::path(::testing::TempDir()) /
            ("px-ckpt-" + std::string(info->name()) + "-" + std::to_string(::getpid())))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// Writes one shard per rank and the manifest; returns the shards.
  std::vector<ShardInfo> save(int64_t step, std::vector<Rank>& ranks,
                              const nlohmann::json& meta = nlohmann::json::object()) {
    std::vector<ShardInfo> shards;
    for (size_t r = 0; r < ranks.size(); ++r) {
      auto info = write_shard(dir_, step, static_cast<int>(r), ranks[r].finish());
      EXPECT_TRUE(info.ok()) << info.error_text();
      if (info.ok()) shards.push_back(*info);
    }
    const Diagnostics ds = write_manifest(dir_, step, shards, meta);
    EXPECT_TRUE(ds.empty()) << text(ds);
    return shards;
  }

  /// Two ranks, tensor parallel: column blocks of a 5x8 tensor; rank 1 also holds `final_norm`.
  std::vector<ShardInfo> save_tp(int64_t step) {
    std::vector<Rank> ranks(2);
    ranks[0].add(wo_, 0, 0, 5, 4);
    ranks[1].add(wo_, 0, 4, 5, 4);
    ranks[1].add(norm_, 0, 0, 1, 8);
    return save(step, ranks);
  }

  void expect_rect(const Checkpoint& ck, const Tensor& t, int64_t r0, int64_t c0, int64_t nr,
                   int64_t nc) {
    std::vector<float> out(static_cast<size_t>(nr * nc), -1.0f);
    const Diagnostics ds = ck.read(t.kind, t.name, t.rows, t.cols, r0, c0, nr, nc, out);
    ASSERT_TRUE(ds.empty()) << text(ds);
    EXPECT_EQ(out, t.rect(r0, c0, nr, nc))
        << t.name << " [" << r0 << "+" << nr << ", " << c0 << "+" << nc << "]";
  }

  std::string dir_;
  Tensor wo_{"param", "layers.1.wo", 5, 8};
  Tensor norm_{"param", "final_norm", 1, 8, 0.5f};
};

TEST(CheckpointCrc, CheckValueContinuationAndBitFlips) {
  const std::string s = "123456789";
  const auto bytes = std::as_bytes(std::span(s));
  EXPECT_EQ(crc64_xz(bytes), 0x995dc9bbdf1939faull);  // the CRC-64/XZ catalogue check value
  EXPECT_EQ(crc64_xz(bytes.subspan(4), crc64_xz(bytes.first(4))), crc64_xz(bytes));
  EXPECT_EQ(crc64_xz({}), 0u);
  std::string t = s;
  for (size_t bit = 0; bit < 8 * t.size(); ++bit) {
    t[bit / 8] = static_cast<char>(t[bit / 8] ^ (1 << (bit % 8)));
    EXPECT_NE(crc64_xz(std::as_bytes(std::span(t))), crc64_xz(bytes)) << bit;
    t = s;
  }
}

TEST_F(CheckpointTest, RoundTripOverThreeRanks) {
  const Tensor embed{"param", "embed", 6, 4}, embed_m{"adam_m", "embed", 6, 4, 0.25f};
  const Tensor wq{"param", "layers.0.wq", 4, 6, 0.75f}, wq_v{"adam_v", "layers.0.wq", 4, 6, 2.0f};
  std::vector<Rank> ranks(3);
  ranks[0].add(embed, 0, 0, 2, 4);  // row blocks of embed over three ranks
  ranks[1].add(embed, 2, 0, 3, 4);
  ranks[2].add(embed, 5, 0, 1, 4);
  ranks[0].add(embed_m, 0, 0, 6, 1);  // column blocks of its moment
  ranks[1].add(embed_m, 0, 1, 6, 3);
  ranks[2].add(wq, 0, 0, 4, 6);
  ranks[2].add(wq_v, 0, 0, 4, 6);
  const nlohmann::json meta = {{"tokens_seen", 4096}, {"layout", "dp=3"}};
  const auto shards = save(7, ranks, meta);
  ASSERT_EQ(shards.size(), 3u);
  EXPECT_EQ(shards[1].file, "shard-00001.bin");
  EXPECT_EQ(static_cast<int64_t>(fs::file_size(step_directory(dir_, 7) + "/shard-00001.bin")),
            shards[1].bytes);

  auto ck = Checkpoint::open_latest(dir_);
  ASSERT_TRUE(ck.ok()) << ck.error_text();
  EXPECT_EQ(ck->step(), 7);
  EXPECT_EQ(ck->world(), 3);
  EXPECT_EQ(ck->meta(), meta);
  for (const Tensor* t : {&embed, &embed_m, &wq, &wq_v})
    expect_rect(*ck, *t, 0, 0, t->rows, t->cols);

  const auto tensors = ck->tensors();
  ASSERT_EQ(tensors.size(), 4u);  // sorted by (kind, tensor)
  EXPECT_EQ(tensors[0].kind + "/" + tensors[0].tensor, "adam_m/embed");
  EXPECT_EQ(tensors[1].kind + "/" + tensors[1].tensor, "adam_v/layers.0.wq");
  EXPECT_EQ(tensors[3].kind + "/" + tensors[3].tensor, "param/layers.0.wq");
  EXPECT_EQ(tensors[3].full_rows, 4);
  EXPECT_EQ(tensors[3].cols, 6);
}

TEST_F(CheckpointTest, ColumnBlocksOfTwoRanksReshardAnyWay) {
  save_tp(3);
  auto ck = Checkpoint::open_latest(dir_);
  ASSERT_TRUE(ck.ok()) << ck.error_text();
  expect_rect(*ck, wo_, 0, 0, 5, 8);  // one rank holding everything
  expect_rect(*ck, wo_, 1, 0, 2, 8);  // a row block crossing both column blocks
  expect_rect(*ck, wo_, 2, 3, 3, 3);  // a rectangle straddling the boundary at column 4
  expect_rect(*ck, wo_, 0, 2, 5, 4);  // a different tensor-parallel split (tp=4, ranks 1-2)
  expect_rect(*ck, wo_, 4, 7, 1, 1);
  expect_rect(*ck, norm_, 0, 0, 1, 8);
}

/// The rectangles of a row-major matrix with `cols` columns that make up flat range [b, e).
std::vector<PieceHeader> flat_rects(const Tensor& t, int64_t b, int64_t e) {
  std::vector<PieceHeader> out;
  while (b < e) {
    const int64_t r = b / t.cols, c = b % t.cols;
    if (c != 0 || e - b < t.cols) {  // a partial row
      const int64_t n = std::min(t.cols - c, e - b);
      out.push_back({t.kind, t.name, t.rows, t.cols, r, c, 1, n});
      b += n;
    } else {  // as many whole rows as fit
      const int64_t n = (e - b) / t.cols;
      out.push_back({t.kind, t.name, t.rows, t.cols, r, 0, n, t.cols});
      b += n * t.cols;
    }
  }
  return out;
}

TEST_F(CheckpointTest, FlatShardsOfAShardedOptimizerReadUnderAnotherSplit) {
  // ZeRO-style: three ranks own flat ranges [0, 12), [12, 23), [23, 35) of a 5x7 moment.
  const Tensor m{"adam_m", "layers.2.w1", 5, 7, 0.125f};
  std::vector<Rank> ranks(3);
  const int64_t bounds[] = {0, 12, 23, 35};
  for (int r = 0; r < 3; ++r)
    for (const PieceHeader& h : flat_rects(m, bounds[r], bounds[r + 1]))
      ranks[r].add(m, h.row0, h.col0, h.rows, h.cols);
  EXPECT_EQ(ranks[1].pieces.size(), 3u);  // [12,14) partial, [14,21) one row, [21,23) partial
  save(1, ranks);
  auto ck = Checkpoint::open_latest(dir_);
  ASSERT_TRUE(ck.ok()) << ck.error_text();
  expect_rect(*ck, m, 0, 0, 5, 7);
  // Read back under a two-rank split: flat [0, 18) and [18, 35), rectangle by rectangle.
  for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 18}, {18, 35}})
    for (const PieceHeader& h : flat_rects(m, b, e))
      expect_rect(*ck, m, h.row0, h.col0, h.rows, h.cols);
}

TEST_F(CheckpointTest, StepWithoutManifestIsIgnored) {
  save_tp(10);
  std::vector<Rank> ranks(2);
  ranks[0].add(wo_, 0, 0, 5, 4);
  ASSERT_TRUE(write_shard(dir_, 20, 0, ranks[0].finish()).ok());  // crashed before the manifest
  EXPECT_EQ(complete_steps(dir_), std::vector<int64_t>{10});
  auto ck = Checkpoint::open_latest(dir_);
  ASSERT_TRUE(ck.ok()) << ck.error_text();
  EXPECT_EQ(ck->step(), 10);
  auto incomplete = Checkpoint::open_step(dir_, 20);
  ASSERT_FALSE(incomplete.ok());
  EXPECT_NE(incomplete.error_text().find("manifest.json"), std::string::npos);
  EXPECT_NE(incomplete.error_text().find("incomplete"), std::string::npos);
}

TEST_F(CheckpointTest, TruncatedShardIsAnErrorNamingTheFileAndTheOlderStep) {
  save_tp(3);
  save_tp(5);
  const std::string shard = step_directory(dir_, 5) + "/shard-00001.bin";
  fs::resize_file(shard, fs::file_size(shard) - 5);
  auto ck = Checkpoint::open_latest(dir_);
  ASSERT_FALSE(ck.ok());
  const std::string err = ck.error_text();
  EXPECT_NE(err.find(shard), std::string::npos) << err;
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
  EXPECT_NE(err.find("step 3 is the newest older complete checkpoint"), std::string::npos) << err;
  EXPECT_EQ(err.find("shard-00000.bin"), std::string::npos) << err;  // the intact one is fine
}

TEST_F(CheckpointTest, EveryFlippedBitIsDetected) {
  save_tp(4);
  const std::string shard = step_directory(dir_, 4) + "/shard-00000.bin";
  const std::string original = slurp(shard);
  // The magic, the rank, a name in the piece table, a shape, the payload, the trailer.
  for (size_t pos : {size_t{0}, size_t{12}, size_t{28}, size_t{50}, original.size() / 2 + 3,
                     original.size() - 1}) {
    std::string bad = original;
    bad[pos] = static_cast<char>(bad[pos] ^ 0x10);
    spit(shard, bad);
    auto ck = Checkpoint::open_latest(dir_);
    ASSERT_FALSE(ck.ok()) << "flip at byte " << pos;
    EXPECT_NE(ck.error_text().find(shard), std::string::npos) << ck.error_text();
    EXPECT_NE(ck.error_text().find("checksum mismatch"), std::string::npos) << ck.error_text();
    EXPECT_NE(ck.error_text().find("no older complete checkpoint"), std::string::npos);
  }
  spit(shard, original);
  EXPECT_TRUE(Checkpoint::open_latest(dir_).ok());
}

TEST_F(CheckpointTest, ChecksummedButMalformedShardIsRejected) {
  // A writer bug rather than a disk fault: the checksum matches, the table does not.
  auto shards = save_tp(2);
  const std::string shard = step_directory(dir_, 2) + "/" + shards[0].file;
  const std::string original = slurp(shard);
  auto patch = [&](size_t at, uint64_t v) {
    std::string b = original;
    std::memcpy(b.data() + at, &v, sizeof v);
    const uint64_t crc = crc64_xz(std::as_bytes(std::span(b).first(b.size() - 8)));
    std::memcpy(b.data() + b.size() - 8, &crc, sizeof crc);
    spit(shard, b);
    shards[0].checksum = crc;
    return text(write_manifest(dir_, 2, shards, {}));
  };
  // Rank 0's one piece: "param", "layers.1.wo" from byte 24, then its six i64 from byte 48.
  const size_t fields = 24 + 4 + 5 + 4 + 11;
  EXPECT_NE(patch(16, 1000).find("piece count 1000 is corrupt"), std::string::npos);
  EXPECT_NE(patch(fields + 16, 3).find("is outside the tensor"), std::string::npos);  // row0
  EXPECT_NE(patch(fields + 48, 1 << 20).find("payload outside the file"), std::string::npos);
  EXPECT_NE(patch(fields + 56, 12).find("of the wrong length"), std::string::npos);
}

TEST_F(CheckpointTest, MissingShardIsAnError) {
  save_tp(2);
  const std::string shard = step_directory(dir_, 2) + "/shard-00001.bin";
  fs::remove(shard);
  auto ck = Checkpoint::open_step(dir_, 2);
  ASSERT_FALSE(ck.ok());
  EXPECT_NE(ck.error_text().find(shard + ": missing or unreadable shard of rank 1"),
            std::string::npos)
      << ck.error_text();
  EXPECT_NE(ck.error_text().find("No such file"), std::string::npos) << ck.error_text();
}

TEST_F(CheckpointTest, UncoveredElementsWrongShapesAndUnknownTensorsAreErrors) {
  std::vector<Rank> ranks(1);
  ranks[0].add(wo_, 0, 0, 5, 4);  // only the first column block
  save(1, ranks);
  auto ck = Checkpoint::open_latest(dir_);
  ASSERT_TRUE(ck.ok()) << ck.error_text();
  expect_rect(*ck, wo_, 0, 0, 5, 4);
  std::vector<float> out(40);
  std::string err = text(ck->read("param", wo_.name, 5, 8, 0, 0, 5, 8, out));
  EXPECT_NE(err.find("20 of 40 elements"), std::string::npos) << err;
  EXPECT_NE(err.find("first at (0, 4)"), std::string::npos) << err;

  err = text(ck->read("param", wo_.name, 5, 9, 0, 0, 5, 8, out));
  EXPECT_NE(err.find("full shape is 5x8 in the checkpoint, the reader expects 5x9"),
            std::string::npos)
      << err;
  err = text(ck->read("param", "layers.1.wq", 5, 8, 0, 0, 5, 8, out));
  EXPECT_NE(err.find("no such tensor"), std::string::npos) << err;
  EXPECT_NE(err.find("param/layers.1.wo"), std::string::npos) << err;  // the valid names
  err = text(ck->read("param", wo_.name, 5, 8, 3, 0, 3, 8, std::span(out).first(24)));
  EXPECT_NE(err.find("outside the tensor"), std::string::npos) << err;
  err = text(ck->read("param", wo_.name, 5, 8, 0, 0, 2, 2, out));
  EXPECT_NE(err.find("output holds 40 values, want rows * cols = 4"), std::string::npos) << err;
}

TEST_F(CheckpointTest, NoCheckpointIsAClearError) {
  auto empty = Checkpoint::open_latest(dir_);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error_text().find("no complete checkpoint"), std::string::npos);
  auto none = Checkpoint::open_latest(dir_ + "/nonexistent");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error_text().find("does not exist"), std::string::npos) << none.error_text();
}

TEST_F(CheckpointTest, CompleteStepsAreAscendingNumerically) {
  for (int64_t step : {100, 9, 1000000000}) save_tp(step);
  std::vector<Rank> ranks(1);
  ranks[0].add(wo_, 0, 0, 5, 8);
  ASSERT_TRUE(write_shard(dir_, 500, 0, ranks[0].finish()).ok());  // incomplete
  fs::create_directories(dir_ + "/step-abcdefgh");
  std::ofstream(dir_ + "/step-abcdefgh/manifest.json") << "{}";
  std::ofstream(dir_ + "/notes.txt") << "x";
  EXPECT_EQ(complete_steps(dir_), (std::vector<int64_t>{9, 100, 1000000000}));
  EXPECT_TRUE(complete_steps(dir_ + "/nonexistent").empty());
  auto ck = Checkpoint::open_latest(dir_);
  ASSERT_TRUE(ck.ok()) << ck.error_text();
  EXPECT_EQ(ck->step(), 1000000000);
}

TEST_F(CheckpointTest, LeftoverTempFilesAreIgnoredAndOverwritten) {
  const std::string sdir = step_directory(dir_, 6);
  fs::create_directories(sdir);
  std::ofstream(sdir + "/shard-00000.bin.tmp") << "half a shard from a crashed write";
  std::ofstream(sdir + "/manifest.json.tmp") << "{\"format\": \"parallax-chec";
  auto before = Checkpoint::open_latest(dir_);
  ASSERT_FALSE(before.ok());
  EXPECT_NE(before.error_text().find("no complete checkpoint"), std::string::npos);

  std::vector<Rank> ranks(1);
  ranks[0].add(wo_, 0, 0, 5, 8);
  save(6, ranks);
  EXPECT_FALSE(fs::exists(sdir + "/shard-00000.bin.tmp"));  // renamed into place
  EXPECT_FALSE(fs::exists(sdir + "/manifest.json.tmp"));
  auto ck = Checkpoint::open_latest(dir_);
  ASSERT_TRUE(ck.ok()) << ck.error_text();
  expect_rect(*ck, wo_, 0, 0, 5, 8);
}

TEST_F(CheckpointTest, ManifestIsNotWrittenOverABadShard) {
  std::vector<Rank> ranks(2);
  ranks[0].add(wo_, 0, 0, 5, 4);
  ranks[1].add(wo_, 0, 4, 5, 4);
  std::vector<ShardInfo> shards;
  for (int r = 0; r < 2; ++r) shards.push_back(*write_shard(dir_, 8, r, ranks[r].finish()));
  const std::string manifest = step_directory(dir_, 8) + "/manifest.json";

  ShardInfo wrong = shards[1];
  wrong.checksum ^= 1;
  std::vector<ShardInfo> bad = {shards[0], wrong};
  std::string err = text(write_manifest(dir_, 8, bad, {}));
  EXPECT_NE(err.find("shard-00001.bin: checksum mismatch"), std::string::npos) << err;
  bad = {shards[0], shards[0]};
  err = text(write_manifest(dir_, 8, bad, {}));
  EXPECT_NE(err.find("out of range or repeated"), std::string::npos) << err;
  err = text(write_manifest(dir_, 8, shards, nlohmann::json::array()));
  EXPECT_NE(err.find("meta must be a JSON object"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(manifest));

  EXPECT_TRUE(write_manifest(dir_, 8, shards, {}).empty());
  auto ck = Checkpoint::open_latest(dir_);
  ASSERT_TRUE(ck.ok()) << ck.error_text();
  EXPECT_TRUE(ck->meta().is_object());
}

TEST_F(CheckpointTest, WriteShardRejectsBadPiecesAndReportsFileErrors) {
  const std::vector<float> six(6, 1.0f);
  const std::vector<Piece> pieces = {
      {{"param", "embed", 4, 4, 0, 0, 2, 4}, six},  // 6 values for 8
      {{"param", "embed", 4, 4, 3, 0, 2, 3}, six},  // rows 3-4 of 4
  };
  auto bad = write_shard(dir_, 1, 0, pieces);
  ASSERT_FALSE(bad.ok());
  ASSERT_EQ(bad.errors().size(), 2u);  // every problem, not only the first
  EXPECT_NE(bad.error_text().find("has 6 values, want rows * cols = 8"), std::string::npos);
  EXPECT_NE(bad.error_text().find("outside the tensor"), std::string::npos);
  EXPECT_FALSE(fs::exists(step_directory(dir_, 1)));

  // A non-finite value is never saved: a diverged state must not replace a good checkpoint.
  std::vector<float> poisoned(8, 1.0f);
  poisoned[5] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<Piece> nan_piece = {{{"adam_v", "embed", 4, 4, 0, 0, 2, 4}, poisoned}};
  auto nan = write_shard(dir_, 1, 0, nan_piece);
  ASSERT_FALSE(nan.ok());
  EXPECT_NE(nan.error_text().find("adam_v/embed [0:2, 0:4] of 4x4 holds nan at element 5"),
            std::string::npos)
      << nan.error_text();
  EXPECT_FALSE(fs::exists(step_directory(dir_, 1)));

  std::ofstream(dir_ + "/file") << "x";
  auto blocked = write_shard(dir_ + "/file", 1, 0, {});
  ASSERT_FALSE(blocked.ok());
  EXPECT_NE(blocked.error_text().find(dir_ + "/file"), std::string::npos) << blocked.error_text();
  EXPECT_NE(blocked.error_text().find("cannot create directory: Not a directory"),
            std::string::npos)
      << blocked.error_text();
}

}  // namespace
}  // namespace parallax::exec
