#include "executor/generate.h"

#include <gtest/gtest.h>

#include <vector>

namespace parallax::exec {
namespace {

ModelShape shape() {
  ModelShape s;
  s.layers = 2;
  s.hidden = 32;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 8;
  s.ffn_hidden = 48;
  s.vocab = 64;
  return s;
}

ModelShape moe_shape() {
  ModelShape s = shape();
  s.moe.experts = 4;
  s.moe.top_k = 2;
  s.moe.expert_ffn_hidden = 24;
  s.moe.shared_experts = 1;
  s.moe.dense_layers = 1;
  return s;
}

// Decoding against the KV cache gives, token by token, what a prefill of the whole sequence so
// far gives (no cache reuse): the cache holds exactly the keys and values of the positions.
void ExpectCachedDecodeMatchesPrefill(const ModelShape& model) {
  auto group = make_local_group();
  GenerateOptions o;
  o.max_new_tokens = 12;
  o.seed = 7;
  const std::vector<std::vector<int32_t>> prompts = {{3, 14, 15, 9, 26, 5}, {2, 7, 18, 28, 1, 8}};
  auto r = generate(model, prompts, o, *group);
  ASSERT_TRUE(r) << r.error_text();
  ASSERT_EQ(r->tokens.size(), 2u);
  for (size_t b = 0; b < prompts.size(); ++b) {
    ASSERT_EQ(r->tokens[b].size(), 12u);
    std::vector<int32_t> seq = prompts[b];
    GenerateOptions one = o;
    one.max_new_tokens = 1;
    for (int i = 0; i < 12; ++i) {
      auto step = generate(model, {seq}, one, *group);
      ASSERT_TRUE(step) << step.error_text();
      EXPECT_EQ(step->tokens[0][0], r->tokens[b][static_cast<size_t>(i)])
          << "sequence " << b << ", token " << i;
      seq.push_back(r->tokens[b][static_cast<size_t>(i)]);
    }
  }
  EXPECT_GT(r->ttft_s, 0);
  EXPECT_GT(r->tokens_per_s, 0);
}

TEST(Generate, CachedDecodeMatchesPrefillFromScratch) { ExpectCachedDecodeMatchesPrefill(shape()); }

// MoE layers (routed experts beside a shared expert) decode the same way.
TEST(Generate, MoeCachedDecodeMatchesPrefillFromScratch) {
  ExpectCachedDecodeMatchesPrefill(moe_shape());
}

TEST(Generate, BadRequestsAreRefused) {
  auto group = make_local_group();
  GenerateOptions o;
  auto r = generate(shape(), {{1, 2}, {3}}, o, *group);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error_text().find("equal lengths"), std::string::npos) << r.error_text();
  r = generate(shape(), {{1, 99}}, o, *group);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error_text().find("outside the vocabulary of 64"), std::string::npos);
  o.max_new_tokens = 0;
  r = generate(shape(), {{1}}, o, *group);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error_text().find("--max-new-tokens"), std::string::npos);
  o.max_new_tokens = 1;
  o.tp = 2;
  r = generate(shape(), {{1}}, o, *group);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error_text().find("tp * pp = 2 ranks"), std::string::npos);
  o.checkpoint_dir = "/nonexistent/parallax";
  o.tp = 1;
  r = generate(shape(), {{1}}, o, *group);
  ASSERT_FALSE(r);
}

}  // namespace
}  // namespace parallax::exec
