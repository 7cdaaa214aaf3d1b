#include "core/hf_config.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "core/model_zoo.h"
#include "tests/test_support.h"

namespace parallax {
namespace {

using nlohmann::json;
using testing::mentions;

/// A config.json copied from the model's Hugging Face repository into tests/data/hf/.
json fixture(const std::string& name) {
  const std::optional<std::string> content =
      testing::read_file(testing::test_data("hf/" + name + ".json"));
  EXPECT_TRUE(content.has_value()) << name;
  json j = json::parse(content.value_or(""), nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << name;
  return j;
}

ModelSpec import_ok(const json& cfg, const std::string& name) {
  auto r = model_from_hf_config(cfg, name, "config.json:");
  EXPECT_TRUE(r.ok()) << r.error_text();
  return r.ok() ? r.value() : ModelSpec{};
}

/// Same architecture as the zoo entry of that name, field by field, and the same count.
void expect_same_as_zoo(const ModelSpec& m, const std::string& zoo_name) {
  const auto z = find_zoo_model(zoo_name, "test");
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(m.layers, z->layers);
  EXPECT_EQ(m.hidden, z->hidden);
  EXPECT_EQ(m.heads, z->heads);
  EXPECT_EQ(m.kv_heads, z->kv_heads);
  EXPECT_EQ(m.head_dim, z->head_dim);
  EXPECT_EQ(m.ffn_hidden, z->ffn_hidden);
  EXPECT_EQ(m.ffn_act, z->ffn_act);
  EXPECT_EQ(m.vocab, z->vocab);
  EXPECT_EQ(m.tied_embeddings, z->tied_embeddings);
  EXPECT_EQ(m.mtp_layers, z->mtp_layers);
  ASSERT_EQ(m.moe.has_value(), z->moe.has_value());
  if (m.moe) {
    EXPECT_EQ(m.moe->experts, z->moe->experts);
    EXPECT_EQ(m.moe->top_k, z->moe->top_k);
    EXPECT_EQ(m.moe->shared_experts, z->moe->shared_experts);
    EXPECT_EQ(m.moe->expert_ffn_hidden, z->moe->expert_ffn_hidden);
    EXPECT_EQ(m.moe->dense_layers, z->moe->dense_layers);
  }
  // The numerics a launch config needs, as the config.json gives them.
  EXPECT_EQ(m.qk_norm, z->qk_norm);
  EXPECT_DOUBLE_EQ(m.rope_theta, z->rope_theta);
  EXPECT_DOUBLE_EQ(m.norm_eps, z->norm_eps);
  EXPECT_EQ(m.rope_scaling, z->rope_scaling);
  EXPECT_DOUBLE_EQ(m.rope_scaling_factor, z->rope_scaling_factor);
  if (m.moe) {
    const RouterSpec &a = m.moe->router, &b = z->moe->router;
    EXPECT_EQ(a.score, b.score);
    EXPECT_EQ(a.pre_softmax, b.pre_softmax);
    EXPECT_EQ(a.expert_bias, b.expert_bias);
    EXPECT_DOUBLE_EQ(a.topk_scaling, b.topk_scaling);
    EXPECT_EQ(a.groups, b.groups);
    EXPECT_EQ(a.group_topk, b.group_topk);
  }
  ASSERT_EQ(m.mla.has_value(), z->mla.has_value());
  if (m.mla) {
    EXPECT_EQ(m.mla->q_lora_rank, z->mla->q_lora_rank);
    EXPECT_EQ(m.mla->kv_lora_rank, z->mla->kv_lora_rank);
    EXPECT_EQ(m.mla->qk_nope_head_dim, z->mla->qk_nope_head_dim);
    EXPECT_EQ(m.mla->qk_rope_head_dim, z->mla->qk_rope_head_dim);
    EXPECT_EQ(m.mla->v_head_dim, z->mla->v_head_dim);
  }
  EXPECT_DOUBLE_EQ(count_params(m).total(), count_params(*z).total());
  EXPECT_DOUBLE_EQ(count_params(m).active(m), count_params(*z).active(*z));
}

TEST(HfConfig, Llama31_8bMatchesTheZoo) {
  const ModelSpec m = import_ok(fixture("llama3.1-8b"), "llama3.1-8b");
  EXPECT_EQ(m.name, "llama3.1-8b");
  EXPECT_EQ(m.layers, 32);
  EXPECT_EQ(m.hidden, 4096);
  EXPECT_EQ(m.heads, 32);
  EXPECT_EQ(m.kv_heads, 8);
  EXPECT_EQ(m.head_dim, 128);  // hidden/heads, no head_dim field
  EXPECT_EQ(m.ffn_hidden, 14336);
  EXPECT_EQ(m.ffn_act, FfnAct::kSwiglu);
  EXPECT_EQ(m.vocab, 128256);
  EXPECT_FALSE(m.tied_embeddings);
  EXPECT_FALSE(m.moe);
  EXPECT_FALSE(m.mla);
  expect_same_as_zoo(m, "llama3.1-8b");
  // HF safetensors metadata: 8,030,261,248 parameters (Llama has no biases; norms counted).
  EXPECT_DOUBLE_EQ(count_params(m).total(), 8030261248.0);
}

// Qwen3-4B: head_dim 128 while hidden/heads = 2560/32 = 80; tied embeddings.
TEST(HfConfig, Qwen3KeepsAHeadDimThatDiffersFromHiddenOverHeads) {
  const ModelSpec m = import_ok(fixture("qwen3-4b"), "qwen3-4b");
  EXPECT_EQ(m.hidden, 2560);
  EXPECT_EQ(m.heads, 32);
  EXPECT_EQ(m.kv_heads, 8);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_TRUE(m.tied_embeddings);
  // Per layer: attention h*d*(H + 2 KV) + H*d*h = 2560*128*48 + 4096*2560 = 26,214,400;
  // MLP 3*2560*9728 = 74,711,040; norms 2*2560. 36 layers + embedding 151936*2560 + final norm
  // = 4,022,458,880 (the q/k norms, 2*128 per layer, are not modelled); model card: 4.0B.
  EXPECT_DOUBLE_EQ(attention_params_per_layer(m), 26214400.0);
  EXPECT_DOUBLE_EQ(count_params(m).total(), 4022458880.0);
  EXPECT_NEAR(count_params(m).total(), 4.0e9, 0.02 * 4.0e9);
}

TEST(HfConfig, Qwen3MoeMatchesTheZoo) {
  const ModelSpec m = import_ok(fixture("qwen3-30b-a3b"), "qwen3-30b-a3b");
  ASSERT_TRUE(m.moe);
  EXPECT_EQ(m.moe->experts, 128);
  EXPECT_EQ(m.moe->top_k, 8);
  EXPECT_EQ(m.moe->shared_experts, 0);
  EXPECT_EQ(m.moe->expert_ffn_hidden, 768);
  EXPECT_EQ(m.moe->dense_layers, 0);
  EXPECT_EQ(m.head_dim, 128);  // hidden/heads would be 64
  EXPECT_EQ(m.kv_heads, 4);
  expect_same_as_zoo(m, "qwen3-30b-a3b");
}

TEST(HfConfig, MixtralExpertWidthIsIntermediateSize) {
  const ModelSpec m = import_ok(fixture("mixtral-8x7b"), "mixtral-8x7b");
  ASSERT_TRUE(m.moe);
  EXPECT_EQ(m.moe->experts, 8);
  EXPECT_EQ(m.moe->top_k, 2);
  EXPECT_EQ(m.moe->shared_experts, 0);
  EXPECT_EQ(m.moe->expert_ffn_hidden, 14336);
  EXPECT_EQ(m.moe->dense_layers, 0);
  expect_same_as_zoo(m, "mixtral-8x7b");
}

/// DeepSeek-V3's config as published, with its one multi-token-prediction module.
json deepseek_v3_main() { return fixture("deepseek-v3"); }

// Its MTP module is read (num_nextn_predict_layers), and a negative depth is refused there.
TEST(HfConfig, DeepseekV3MtpDepthIsRead) {
  EXPECT_EQ(import_ok(fixture("deepseek-v3"), "deepseek-v3").mtp_layers, 1);
  json cfg = fixture("deepseek-v3");
  cfg["num_nextn_predict_layers"] = 0;
  EXPECT_EQ(import_ok(cfg, "main").mtp_layers, 0);
  cfg["num_nextn_predict_layers"] = -1;
  const auto r = model_from_hf_config(cfg, "deepseek-v3", "config.json:");
  EXPECT_TRUE(mentions(r, "config.json:/num_nextn_predict_layers: mtp_layers=-1 must be in"))
      << r.error_text();
}

TEST(HfConfig, DeepseekV3MatchesTheZoo) {
  const ModelSpec m = import_ok(deepseek_v3_main(), "deepseek-v3");
  ASSERT_TRUE(m.moe);
  ASSERT_TRUE(m.mla);
  EXPECT_EQ(m.moe->experts, 256);
  EXPECT_EQ(m.moe->top_k, 8);
  EXPECT_EQ(m.moe->shared_experts, 1);
  EXPECT_EQ(m.moe->expert_ffn_hidden, 2048);
  EXPECT_EQ(m.moe->dense_layers, 3);
  EXPECT_EQ(m.ffn_hidden, 18432);
  EXPECT_EQ(m.mla->q_lora_rank, 1536);
  EXPECT_EQ(m.mla->kv_lora_rank, 512);
  EXPECT_EQ(m.head_dim, 192);  // qk_nope_head_dim + qk_rope_head_dim
  EXPECT_EQ(m.mtp_layers, 1);
  expect_same_as_zoo(m, "deepseek-v3");
}

TEST(HfConfig, NullQLoraRankMeansNoQueryCompression) {
  json cfg = deepseek_v3_main();
  cfg["q_lora_rank"] = nullptr;
  const ModelSpec m = import_ok(cfg, "deepseek-v3-noqlora");
  ASSERT_TRUE(m.mla);
  EXPECT_EQ(m.mla->q_lora_rank, 0);
  // q = h * heads * (nope + rope) directly.
  const double h = 7168, heads = 128;
  const double kv = h * (512 + 64) + 512 + 512 * heads * (128 + 128);
  EXPECT_DOUBLE_EQ(attention_params_per_layer(m), h * heads * 192 + kv + heads * 128 * h);
}

// Qwen1.5-MoE-A2.7B (qwen2_moe): one shared MLP of 5632 = 4 experts of width 1408.
// Published: 14.3B total, 2.7B activated (model card).
TEST(HfConfig, Qwen2MoeSharedExpertBecomesRoutedWidthExperts) {
  const json cfg = {{"model_type", "qwen2_moe"},
                    {"hidden_act", "silu"},
                    {"hidden_size", 2048},
                    {"intermediate_size", 5632},
                    {"moe_intermediate_size", 1408},
                    {"shared_expert_intermediate_size", 5632},
                    {"num_experts", 60},
                    {"num_experts_per_tok", 4},
                    {"decoder_sparse_step", 1},
                    {"mlp_only_layers", json::array()},
                    {"num_attention_heads", 16},
                    {"num_key_value_heads", 16},
                    {"num_hidden_layers", 24},
                    {"tie_word_embeddings", false},
                    {"vocab_size", 151936}};
  const ModelSpec m = import_ok(cfg, "qwen1.5-moe-a2.7b");
  ASSERT_TRUE(m.moe);
  EXPECT_EQ(m.moe->shared_experts, 4);
  EXPECT_EQ(m.moe->expert_ffn_hidden, 1408);
  EXPECT_NEAR(count_params(m).total(), 14.3e9, 0.02 * 14.3e9);
  EXPECT_NEAR(count_params(m).active(m), 2.7e9, 0.02 * 2.7e9);
}

TEST(HfConfig, EveryMissingFieldIsReportedWithItsJsonPath) {
  json cfg = fixture("llama3.1-8b");
  cfg.erase("num_attention_heads");
  cfg.erase("vocab_size");
  cfg["intermediate_size"] = nullptr;
  const auto r = model_from_hf_config(cfg, "x", "config.json:");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(mentions(r, "config.json:/num_attention_heads: missing")) << r.error_text();
  EXPECT_TRUE(mentions(r, "config.json:/vocab_size: missing")) << r.error_text();
  EXPECT_TRUE(mentions(r, "config.json:/intermediate_size: missing")) << r.error_text();
  EXPECT_EQ(r.errors().size(), 3u) << r.error_text();  // no echo from validate_model
}

TEST(HfConfig, BadTypesBecomeDiagnosticsNotExceptions) {
  json cfg = fixture("mixtral-8x7b");
  cfg["hidden_size"] = "4096";
  cfg["num_local_experts"] = 8.5;
  cfg["tie_word_embeddings"] = "no";
  cfg["hidden_act"] = 3;
  Result<ModelSpec> r = ModelSpec{};
  ASSERT_NO_THROW(r = model_from_hf_config(cfg, "x", "config.json:"));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(mentions(r, "config.json:/hidden_size: must be an integer, got string \"4096\""))
      << r.error_text();
  EXPECT_TRUE(mentions(r, "config.json:/num_local_experts: must be an integer, got number 8.5"))
      << r.error_text();
  EXPECT_TRUE(mentions(r, "config.json:/tie_word_embeddings: must be true or false"));
  EXPECT_TRUE(mentions(r, "config.json:/hidden_act: must be a string"));
}

TEST(HfConfig, NotAnObject) {
  const auto r = model_from_hf_config(json::array({1, 2}), "x", "config.json:");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(mentions(r, "config.json:: must be a JSON object, got array")) << r.error_text();
}

TEST(HfConfig, InconsistentShapesAreReportedAtTheJsonField) {
  json cfg = fixture("llama3.1-8b");
  cfg["num_key_value_heads"] = 5;
  cfg["num_hidden_layers"] = 0;
  const auto r = model_from_hf_config(cfg, "x", "config.json:");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(mentions(r, "config.json:/num_key_value_heads: kv_heads=5 must divide heads=32"))
      << r.error_text();
  EXPECT_TRUE(mentions(r, "config.json:/num_hidden_layers: layers must be positive"))
      << r.error_text();
}

TEST(HfConfig, UnsupportedActivationAndLayerPatterns) {
  json cfg = fixture("qwen3-30b-a3b");
  cfg["hidden_act"] = "relu";
  cfg["decoder_sparse_step"] = 2;
  cfg["mlp_only_layers"] = {0, 1};
  const auto r = model_from_hf_config(cfg, "x", "config.json:");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(mentions(r, "config.json:/hidden_act: unsupported activation 'relu'"));
  EXPECT_TRUE(mentions(r, "config.json:/decoder_sparse_step: only 1 is supported, got 2"));
  EXPECT_TRUE(mentions(r, "config.json:/mlp_only_layers: only [] is supported"));
}

TEST(HfConfig, GeluMapsToTheTwoMatrixMlp) {
  json cfg = fixture("llama3.1-8b");
  cfg["hidden_act"] = "gelu_pytorch_tanh";
  EXPECT_EQ(import_ok(cfg, "x").ffn_act, FfnAct::kGelu);
}

TEST(HfConfig, HeadDimDefaultNeedsDivisibleHidden) {
  json cfg = fixture("llama3.1-8b");
  cfg["num_attention_heads"] = 24;
  cfg["num_key_value_heads"] = 8;
  const auto r = model_from_hf_config(cfg, "x", "config.json:");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(mentions(r,
                       "config.json:/head_dim: missing, and hidden_size=4096 is not a "
                       "multiple of num_attention_heads=24"))
      << r.error_text();
}

TEST(HfConfig, AFamilyNotReadIsRefusedAtModelType) {
  const json cfg = {{"model_type", "gpt2"}, {"n_layer", 12}, {"n_embd", 768}};
  auto r = model_from_hf_config(cfg, "gpt2", "config.json:");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(mentions(r, "config.json:/model_type: 'gpt2' is not a family this importer reads"))
      << r.error_text();
  EXPECT_EQ(r.errors().size(), 1u) << r.error_text();  // nothing read from an unknown layout
  json qwen_next = fixture("qwen3-4b");
  qwen_next["model_type"] = "qwen3_next";
  r = model_from_hf_config(qwen_next, "x", "config.json:");
  EXPECT_TRUE(mentions(r,
                       "config.json:/model_type: 'qwen3_next' is not modelled: hybrid Gated "
                       "DeltaNet linear attention"))
      << r.error_text();
  json none = fixture("llama3.1-8b");
  none.erase("model_type");
  EXPECT_TRUE(mentions(model_from_hf_config(none, "x", "config.json:"),
                       "config.json:/model_type: missing"));
}

// What the simulator has no model of is refused at its field, with the reason, and a hint where
// the config can say what is modelled.
TEST(HfConfig, ArchitectureFieldsNotModelledAreRefused) {
  json mistral = fixture("llama3.1-8b");
  mistral["model_type"] = "mistral";
  mistral["sliding_window"] = 4096;
  EXPECT_TRUE(mentions(model_from_hf_config(mistral, "x", "c:"),
                       "c:/sliding_window: sliding-window attention is not modelled"));
  mistral["sliding_window"] = nullptr;
  EXPECT_EQ(import_ok(mistral, "x").layers, 32);
  json qwen = fixture("qwen3-4b");
  qwen["use_sliding_window"] = true;
  qwen["sliding_window"] = 4096;
  EXPECT_TRUE(mentions(model_from_hf_config(qwen, "x", "c:"), "c:/use_sliding_window:"));
  qwen = fixture("qwen3-4b");
  qwen["layer_types"] = {"full_attention", "sliding_attention"};
  EXPECT_TRUE(mentions(model_from_hf_config(qwen, "x", "c:"),
                       "c:/layer_types: only full_attention layers are modelled"));
  qwen["layer_types"] = {"full_attention", "full_attention"};
  EXPECT_EQ(import_ok(qwen, "x").layers, 36);
  qwen["quantization_config"] = {{"quant_method", "mxfp4"}};
  EXPECT_TRUE(mentions(model_from_hf_config(qwen, "x", "c:"),
                       "c:/quantization_config: quantized weights (quant_method 'mxfp4')"));
  json ds = deepseek_v3_main();
  ds["index_topk"] = 2048;
  EXPECT_TRUE(mentions(model_from_hf_config(ds, "x", "c:"), "c:/index_topk: sparse attention"));
}

// Current families, each as its repository publishes it: read right (the parameter count its
// model card states) or refused at the field that names what is not modelled.
TEST(HfConfig, CurrentFamiliesAreReadRightOrRefusedWithTheReason) {
  struct Read {
    const char* file;
    double params;  // as the model card states it
    double tolerance;
  };
  // Qwen2.5-7B: 7.61B; Qwen3-8B: 8.2B; Llama 3.1 8B: 8.03B; Mistral 7B without its window:
  // 7.24B (the card says 7B); DeepSeek-R1's main model: 671B.
  for (const Read& r : {Read{"qwen2.5-7b-instruct", 7.61e9, 0.01}, Read{"qwen3-8b", 8.2e9, 0.01},
                        Read{"llama3.1-8b", 8.03e9, 0.01}}) {
    EXPECT_NEAR(count_params(import_ok(fixture(r.file), r.file)).total(), r.params,
                r.tolerance * r.params)
        << r.file;
  }
  json mistral = fixture("mistral-7b-v0.1");
  mistral["sliding_window"] = nullptr;
  EXPECT_NEAR(count_params(import_ok(mistral, "mistral")).total(), 7.24e9, 0.01 * 7.24e9);
  json r1 = fixture("deepseek-r1");
  r1["num_nextn_predict_layers"] = 0;
  EXPECT_NEAR(count_params(import_ok(r1, "r1")).total(), 671e9, 0.01 * 671e9);
  struct Refused {
    const char* file;
    const char* why;
  };
  for (const Refused& r : {
           Refused{"gpt-oss-20b", "/model_type: 'gpt_oss' is not modelled: alternating sliding"},
           Refused{"qwen3-next-80b-a3b-instruct", "/model_type: 'qwen3_next' is not modelled"},
           Refused{"gemma-3-1b-it", "/model_type: 'gemma3_text' is not modelled"},
           Refused{"gemma-2-9b", "/model_type: 'gemma2' is not modelled"},
           Refused{"deepseek-v3.2", "/model_type: 'deepseek_v32' is not modelled: DeepSeek Sparse"},
           Refused{"nvidia-nemotron-3-nano-30b-a3b", "/model_type: 'nemotron_h' is not modelled"},
           Refused{"mistral-7b-v0.1", "/sliding_window: sliding-window attention is not modelled"},
       }) {
    const auto got = model_from_hf_config(fixture(r.file), r.file, "config.json:");
    EXPECT_TRUE(mentions(got, std::string("config.json:") + r.why))
        << r.file << ": " << got.error_text();
  }
}

// A family default fills a key the family's config class defaults: Qwen3's head_dim is 128.
TEST(HfConfig, FamilyDefaultsFillMissingKeys) {
  json cfg = fixture("qwen3-4b");
  cfg.erase("head_dim");
  EXPECT_EQ(import_ok(cfg, "x").head_dim, 128);
}

// Dropout probabilities come from the family's field names; the largest is used.
TEST(HfConfig, DropoutFieldsAreRead) {
  json cfg = fixture("llama3.1-8b");
  EXPECT_DOUBLE_EQ(import_ok(cfg, "llama").dropout, cfg.value("attention_dropout", 0.0));
  cfg["attention_dropout"] = 0.1;
  cfg["hidden_dropout"] = 0.05;
  EXPECT_DOUBLE_EQ(import_ok(cfg, "llama").dropout, 0.1);
  cfg["attention_dropout"] = "high";
  EXPECT_TRUE(mentions(model_from_hf_config(cfg, "llama", "c.json:"), "attention_dropout"));
}

}  // namespace
}  // namespace parallax
