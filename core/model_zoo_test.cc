#include "core/model_zoo.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "tests/test_support.h"

namespace parallax {
namespace {

// The SC'21 weak-scaling family, whose published sizes come from the paper's Eq. (2).
const std::set<std::string> kSc21 = {"megatron-gpt-1.7b", "megatron-gpt-3.6b", "megatron-gpt-7.5b",
                                     "megatron-gpt-18b",  "megatron-gpt-39b",  "megatron-gpt-76b",
                                     "megatron-gpt-145b", "megatron-gpt-310b", "megatron-gpt-530b",
                                     "megatron-gpt-1t"};

// A published size is printed with at least two significant digits ("1.7B", "70B", "8.03B"), so
// it stands for anything within half a unit of its second digit; the check allows the larger of
// that and 2% (count_params leaves out biases, <0.1% for GPT-style models).
double tolerance(double published) {
  const double half_unit = 0.5 * std::pow(10.0, std::floor(std::log10(published)) - 1.0);
  return std::max(0.02 * published, half_unit);
}

TEST(ModelZoo, EveryModelValidates) {
  ASSERT_FALSE(model_zoo().empty());
  for (const auto& m : model_zoo()) {
    const Diagnostics d = validate_model(m, m.name);
    EXPECT_TRUE(d.empty()) << m.name << ": " << (d.empty() ? "" : d.front().str());
  }
}

TEST(ModelZoo, NamesAreUniqueLowerCase) {
  std::set<std::string> seen;
  for (const auto& m : model_zoo()) {
    EXPECT_TRUE(seen.insert(m.name).second) << "duplicate " << m.name;
    for (char c : m.name) {
      EXPECT_FALSE(std::isupper(static_cast<unsigned char>(c)) || c == ' ' || c == '_') << m.name;
    }
  }
}

// total: count_params (embedding V*h, output V*h unless tied, attention, MLPs, experts, router,
// norms); active: routed experts scaled by top_k/experts. Both against the published figures.
TEST(ModelZoo, TotalAndActiveParamsMatchPublishedSizes) {
  for (const auto& m : model_zoo()) {
    const auto published = published_size(m.name);
    ASSERT_TRUE(published.has_value()) << m.name;
    EXPECT_NE(std::string(published->source), "") << m.name;
    if (kSc21.count(m.name)) continue;  // checked against Eq. (2) below
    const ParamCount c = count_params(m);
    EXPECT_NEAR(c.total(), published->params, tolerance(published->params))
        << m.name << " (" << published->source << ")";
    EXPECT_NEAR(c.active(m), published->active_params, tolerance(published->active_params))
        << m.name << " (" << published->source << ")";
  }
}

// Narayanan et al. SC'21 Eq. (2): P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)), s = 2048, which
// Table 1 prints to 0.1B. It counts biases (13h per layer with the two LayerNorms) and learned
// position embeddings (s*h) that ModelSpec leaves out; count_params has 2h of norm weights per
// layer plus the final norm, so Eq. (2) = count_params + (11 l + s - 1) h exactly.
TEST(ModelZoo, MegatronSc21SizesFollowThePaperFormula) {
  const double s = 2048;
  for (const auto& name : kSc21) {
    const auto m = find_zoo_model(name, "test");
    ASSERT_TRUE(m.ok()) << name;
    const double l = m->layers, h = static_cast<double>(m->hidden), v = m->vocab;
    const double eq2 = 12 * l * h * h * (1 + 13 / (12 * h) + (v + s) / (12 * l * h));
    EXPECT_NEAR(count_params(*m).total() + (11 * l + s - 1) * h, eq2, 1e-9 * eq2) << name;
    EXPECT_NEAR(eq2, published_size(name)->params, 0.05e9) << name;
  }
}

TEST(ModelZoo, DeepseekV3LandsNear671BTotal37BActive) {
  const auto m = find_zoo_model("deepseek-v3", "--model");
  ASSERT_TRUE(m.ok());
  const ParamCount c = count_params(*m);
  EXPECT_NEAR(c.total(), 671e9, 0.01 * 671e9);
  EXPECT_NEAR(c.active(*m), 37e9, 0.02 * 37e9);
  // 58 MoE layers x (256 routed + 1 shared) x 3 x 7168 x 2048.
  EXPECT_DOUBLE_EQ(c.experts, 58.0 * 256 * 3 * 7168 * 2048);
  EXPECT_DOUBLE_EQ(c.shared_experts, 58.0 * 1 * 3 * 7168 * 2048);
  EXPECT_DOUBLE_EQ(c.dense_mlp, 3.0 * 3 * 7168 * 18432);
}

TEST(ModelZoo, FindIsCaseInsensitive) {
  const auto m = find_zoo_model("Llama3.1-70B", "--model");
  ASSERT_TRUE(m.ok()) << m.error_text();
  EXPECT_EQ(m->name, "llama3.1-70b");
  EXPECT_EQ(m->kv_heads, 8);
  EXPECT_TRUE(published_size("MIXTRAL-8x7B").has_value());
  EXPECT_FALSE(published_size("no-such-model").has_value());
}

TEST(ModelZoo, UnknownNameSuggestsTheNearest) {
  const auto m = find_zoo_model("lama3.1-70b", "--model");
  ASSERT_FALSE(m.ok());
  ASSERT_EQ(m.errors().size(), 1u);
  EXPECT_EQ(m.errors()[0].where, "--model");
  EXPECT_NE(m.errors()[0].what.find("unknown model 'lama3.1-70b'"), std::string::npos);
  EXPECT_NE(m.errors()[0].hint.find("did you mean 'llama3.1-70b'?"), std::string::npos)
      << m.errors()[0].hint;
  EXPECT_NE(m.errors()[0].hint.find("deepseek-v3"), std::string::npos);  // lists valid names
}

// Every dense model shape in the public validation set has a zoo entry with the same dimensions
// (the set holds no MoE or MLA model today; those zoo entries are checked by the HF import tests).
TEST(ModelZoo, CoversEveryShapeInThePublicValidationSet) {
  std::ifstream in(testing::kPublicTrainingRuns);
  if (!in) GTEST_SKIP() << "validation set not present";
  std::string line;
  int records = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto rec = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(rec.is_discarded());
    const auto& j = rec.at("model");
    if (!j.at("moe").is_null() || !j.at("mla").is_null()) continue;
    ++records;
    bool found = false;
    for (const auto& m : model_zoo()) {
      found |= m.layers == j.at("layers").get<int>() && m.hidden == j.at("hidden").get<int64_t>() &&
               m.heads == j.at("heads").get<int>() && m.kv_heads == j.at("kv_heads").get<int>() &&
               m.head_dim == j.at("head_dim").get<int>() &&
               m.ffn_hidden == j.at("ffn_hidden").get<int64_t>() &&
               (m.ffn_act == FfnAct::kGelu) == (j.at("ffn_act") == "gelu") &&
               m.vocab == j.at("vocab").get<int64_t>() &&
               m.tied_embeddings == j.at("tied_embeddings").get<bool>() && !m.moe && !m.mla;
    }
    EXPECT_TRUE(found) << rec.at("id") << ": " << j.at("name");
  }
  EXPECT_GT(records, 0);
}

}  // namespace
}  // namespace parallax
