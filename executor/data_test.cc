#include "executor/data.h"

#include <gtest/gtest.h>

#include <set>

namespace parallax::exec {
namespace {

TEST(ExecData, ByteTokensRoundTrip) {
  const std::string text = "Call me Ishmael.\n\xe2\x80\x94";
  const auto ids = byte_tokens(text);
  ASSERT_EQ(ids.size(), text.size());
  for (int32_t id : ids) EXPECT_TRUE(id >= 0 && id < kByteVocab);
  EXPECT_EQ(ids[0], 'C');
  EXPECT_EQ(byte_text(ids), text);
}

TEST(ExecData, SyntheticSequencesAreArithmeticAndReproducible) {
  const TokenSource s = TokenSource::synthetic(97, 7);
  std::vector<int32_t> a(12), b(12), c(12);
  s.sequence(5, a);
  s.sequence(5, b);
  s.sequence(6, c);
  EXPECT_EQ(a, b);  // the same index gives the same tokens, on any rank
  EXPECT_NE(a, c);
  // x_t = (x_0 + k t) mod vocab with one step k in [1, 8].
  const int step = ((a[1] - a[0]) % 97 + 97) % 97;
  EXPECT_GE(step, 1);
  EXPECT_LE(step, 8);
  for (int t = 1; t < 12; ++t) EXPECT_EQ(a[t], (a[t - 1] + step) % 97);
  EXPECT_TRUE(s.synthetic());
}

TEST(ExecData, TextWindowsCoverTheStreamAndRejectBadInput) {
  std::vector<int32_t> stream(100);
  for (int i = 0; i < 100; ++i) stream[i] = i % 50;
  auto s = TokenSource::from_tokens(stream, 256, 9, "t.txt");
  ASSERT_TRUE(s.ok());
  std::set<int32_t> starts;
  std::vector<int32_t> w(10);
  for (int i = 0; i < 91; ++i) {
    s->sequence(i, w);
    // A window is a contiguous run of the stream.
    for (int t = 1; t < 10; ++t) EXPECT_EQ(w[t], (w[t - 1] + 1) % 50);
    starts.insert(w[0]);
  }
  EXPECT_EQ(starts.size(), 50u);  // 91 starts visited once each, values mod 50
  auto short_text = TokenSource::from_tokens({1, 2, 3}, 256, 9, "short.txt");
  ASSERT_FALSE(short_text.ok());
  EXPECT_NE(short_text.errors().front().what.find("fewer than one sequence"), std::string::npos);
  auto big_id = TokenSource::from_tokens(stream, 40, 9, "t.txt");
  ASSERT_FALSE(big_id.ok());
  EXPECT_NE(big_id.errors().front().what.find("outside the model's vocabulary of 40"),
            std::string::npos);
}

}  // namespace
}  // namespace parallax::exec
