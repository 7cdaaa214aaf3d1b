#include "core/model_zoo.h"

#include <algorithm>
#include <cctype>

#include "core/names.h"

namespace parallax {
namespace {

struct ZooEntry {
  ModelSpec spec;
  PublishedSize published;
};

/// A GPT-2/3-style decoder as Megatron-LM builds it: MHA, ffn = 4h, gelu (2 matrices).
ModelSpec gpt(const char* name, int layers, int64_t hidden, int heads, int64_t vocab, bool tied) {
  ModelSpec m;
  m.name = name;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.head_dim = static_cast<int>(hidden / heads);
  m.ffn_hidden = 4 * hidden;
  m.ffn_act = FfnAct::kGelu;
  m.vocab = vocab;
  m.tied_embeddings = tied;
  return m;
}

/// A Llama-style decoder: GQA with head_dim 128, SwiGLU, untied embeddings.
ModelSpec llama(const char* name, int layers, int64_t hidden, int heads, int kv_heads,
                int64_t ffn_hidden, int64_t vocab) {
  ModelSpec m;
  m.name = name;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.head_dim = 128;
  m.ffn_hidden = ffn_hidden;
  m.ffn_act = FfnAct::kSwiglu;
  m.vocab = vocab;
  m.tied_embeddings = false;
  return m;
}

ModelSpec with_moe(ModelSpec m, MoeSpec moe) {
  m.moe = moe;
  return m;
}

/// The numerics of the model's config.json (rope_theta, rms_norm_eps, rope_scaling).
ModelSpec with_numerics(ModelSpec m, double rope_theta, double norm_eps,
                        RopeScaling scaling = RopeScaling::kNone, double factor = 0) {
  m.rope_theta = rope_theta;
  m.norm_eps = norm_eps;
  m.rope_scaling = scaling;
  m.rope_scaling_factor = factor;
  return m;
}

/// Llama 3.1: rope_theta 500000, rms_norm_eps 1e-5, llama3 rotary scaling by 8.
ModelSpec llama31(const char* name, int layers, int64_t hidden, int heads, int64_t ffn_hidden) {
  return with_numerics(llama(name, layers, hidden, heads, 8, ffn_hidden, 128256), 500000, 1e-5,
                       RopeScaling::kLlama3, 8);
}

/// Qwen3 MoE: QK norm, rope_theta 1e6, rms_norm_eps 1e-6, the top-8 weights renormalised.
ModelSpec qwen3_moe(const char* name, int layers, int64_t hidden, int heads, int64_t ffn_hidden,
                    int64_t expert_ffn_hidden) {
  ModelSpec m = with_numerics(llama(name, layers, hidden, heads, 4, ffn_hidden, 151936), 1e6, 1e-6);
  m.qk_norm = true;
  m.moe = MoeSpec{.experts = 128, .top_k = 8, .expert_ffn_hidden = expert_ffn_hidden};
  return m;
}

PublishedSize dense(double params, const char* source) { return {params, source, params}; }

// Sources of the published sizes (and of the dimensions, unless noted beside an entry).
constexpr const char* kGpt3 = "Brown et al. 2020, arXiv 2005.14165, Table 2.1 (GPT-3 175B)";
constexpr const char* kSc21 =
    "Narayanan et al. SC'21, arXiv 2104.04473, Table 1 (params from Eq. (2), printed to 0.1B)";
constexpr const char* kKorth =
    "Korthikanti et al. MLSys'23, arXiv 2205.05198, model table (22B, 175B)";
constexpr const char* kMlmH100 =
    "NVIDIA Megatron-LM README, weak-scaling model table (images/model_table.png, 2024)";
constexpr const char* kLlama2_7b =
    "Hugging Face meta-llama/Llama-2-7b-hf safetensors metadata: 6.74B params";
constexpr const char* kLlama2_70b =
    "Hugging Face meta-llama/Llama-2-70b-hf safetensors metadata: 68.98B params";
constexpr const char* kLlama31_8b =
    "Hugging Face meta-llama/Llama-3.1-8B safetensors metadata: 8.03B params";
constexpr const char* kLlama31_70b =
    "Hugging Face meta-llama/Llama-3.1-70B safetensors metadata: 70.6B params";
constexpr const char* kLlama31_405b =
    "Hugging Face meta-llama/Llama-3.1-405B safetensors metadata: 405.9B params";
constexpr const char* kMixtral8x7b =
    "Mistral AI, 'Mixtral of experts' (2023-12-11): 46.7B total, 12.9B per token";
constexpr const char* kMixtral8x22b =
    "Mistral AI, 'Cheaper, Better, Faster, Stronger' (2024-04-17): 141B total, 39B active";
constexpr const char* kQwen3_30b = "Qwen/Qwen3-30B-A3B model card: 30.5B total, 3.3B activated";
constexpr const char* kQwen3_235b = "Qwen/Qwen3-235B-A22B model card: 235B total, 22B activated";
constexpr const char* kDeepseekV3 =
    "DeepSeek-V3 Technical Report, arXiv 2412.19437, Sec. 1: 671B total, 37B activated "
    "(main model; the 14B MTP module excluded)";

std::vector<ZooEntry> build_zoo() {
  std::vector<ZooEntry> z;
  // GPT-3 175B: 96 x 12288, 96 heads of 128, ctx 2048, GPT-2 BPE vocab 50257, tied.
  z.push_back({gpt("gpt3-175b", 96, 12288, 96, 50257, true), dense(175e9, kGpt3)});

  // Megatron-LM SC'21 weak-scaling family (dims from validation/public-training.jsonl,
  // Table 1 of the paper): vocab 51200, shared input/output embedding.
  z.push_back({gpt("megatron-gpt-1.7b", 24, 2304, 24, 51200, true), dense(1.7e9, kSc21)});
  z.push_back({gpt("megatron-gpt-3.6b", 30, 3072, 32, 51200, true), dense(3.6e9, kSc21)});
  z.push_back({gpt("megatron-gpt-7.5b", 36, 4096, 32, 51200, true), dense(7.5e9, kSc21)});
  z.push_back({gpt("megatron-gpt-18b", 40, 6144, 48, 51200, true), dense(18.4e9, kSc21)});
  z.push_back({gpt("megatron-gpt-39b", 48, 8192, 64, 51200, true), dense(39.1e9, kSc21)});
  z.push_back({gpt("megatron-gpt-76b", 60, 10240, 80, 51200, true), dense(76.1e9, kSc21)});
  z.push_back({gpt("megatron-gpt-145b", 80, 12288, 96, 51200, true), dense(145.6e9, kSc21)});
  z.push_back({gpt("megatron-gpt-310b", 96, 16384, 128, 51200, true), dense(310.1e9, kSc21)});
  z.push_back({gpt("megatron-gpt-530b", 105, 20480, 128, 51200, true), dense(529.6e9, kSc21)});
  z.push_back({gpt("megatron-gpt-1t", 128, 25600, 160, 51200, true), dense(1008.0e9, kSc21)});

  // Korthikanti et al. (activation recomputation): GPT-3 175B as Megatron-LM pads its vocab
  // (51200, tied), and a 22B model with 64 heads of 96. Their 530B and 1T are the SC'21 shapes.
  z.push_back({gpt("megatron-gpt-175b", 96, 12288, 96, 51200, true), dense(175e9, kKorth)});
  z.push_back({gpt("gpt-22b", 48, 6144, 64, 51200, true), dense(22e9, kKorth)});

  // Megatron-Core H100 weak-scaling family: vocab 131072, untied (the README's counts are only
  // reproduced with separate input and output embeddings), head_dim 128.
  z.push_back({gpt("gpt-h100-1.7b", 24, 2048, 16, 131072, false), dense(1.7e9, kMlmH100)});
  z.push_back({gpt("gpt-h100-7.1b", 30, 4096, 32, 131072, false), dense(7.1e9, kMlmH100)});
  z.push_back({gpt("gpt-h100-16b", 32, 6144, 48, 131072, false), dense(16e9, kMlmH100)});
  z.push_back({gpt("gpt-h100-32b", 48, 7168, 56, 131072, false), dense(32e9, kMlmH100)});
  z.push_back({gpt("gpt-h100-70b", 84, 8192, 64, 131072, false), dense(70e9, kMlmH100)});
  z.push_back({gpt("gpt-h100-119b", 92, 10240, 80, 131072, false), dense(119e9, kMlmH100)});
  z.push_back({gpt("gpt-h100-177b", 96, 12288, 96, 131072, false), dense(177e9, kMlmH100)});
  z.push_back({gpt("gpt-h100-314b", 96, 16384, 128, 131072, false), dense(314e9, kMlmH100)});
  z.push_back({gpt("gpt-h100-462b", 112, 18432, 144, 131072, false), dense(462e9, kMlmH100)});

  // Llama 2 and 3.1 (Hugging Face config.json of the meta-llama repositories).
  // Llama 2: rope_theta 10000, rms_norm_eps 1e-5.
  z.push_back({with_numerics(llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000), 10000, 1e-5),
               dense(6.74e9, kLlama2_7b)});
  z.push_back({with_numerics(llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000), 10000, 1e-5),
               dense(68.98e9, kLlama2_70b)});
  z.push_back({llama31("llama3.1-8b", 32, 4096, 32, 14336), dense(8.03e9, kLlama31_8b)});
  z.push_back({llama31("llama3.1-70b", 80, 8192, 64, 28672), dense(70.6e9, kLlama31_70b)});
  z.push_back({llama31("llama3.1-405b", 126, 16384, 128, 53248), dense(405.9e9, kLlama31_405b)});

  // Mixtral (mistralai config.json): 8 experts, top-2, every layer MoE, expert width =
  // intermediate_size. 8x22B uses the 32768-token v3 vocabulary of the mistralai repository.
  // rope_theta 1e6, rms_norm_eps 1e-5.
  z.push_back(
      {with_numerics(with_moe(llama("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000),
                              MoeSpec{.experts = 8, .top_k = 2, .expert_ffn_hidden = 14336}),
                     1e6, 1e-5),
       {46.7e9, kMixtral8x7b, 12.9e9}});
  z.push_back(
      {with_numerics(with_moe(llama("mixtral-8x22b", 56, 6144, 48, 8, 16384, 32768),
                              MoeSpec{.experts = 8, .top_k = 2, .expert_ffn_hidden = 16384}),
                     1e6, 1e-5),
       {141e9, kMixtral8x22b, 39e9}});

  // Qwen3 MoE (Qwen config.json): 128 experts, top-8, no shared expert, every layer MoE
  // (decoder_sparse_step 1, mlp_only_layers []); head_dim 128 differs from hidden/heads.
  // ffn_hidden keeps intermediate_size, which no layer of these models uses.
  z.push_back({qwen3_moe("qwen3-30b-a3b", 48, 2048, 32, 6144, 768), {30.5e9, kQwen3_30b, 3.3e9}});
  z.push_back(
      {qwen3_moe("qwen3-235b-a22b", 94, 4096, 64, 12288, 1536), {235e9, kQwen3_235b, 22e9}});

  // DeepSeek-V3 (deepseek-ai config.json): MLA, first 3 layers dense (ffn 18432), then 256
  // routed experts top-8 plus 1 shared, expert width 2048. head_dim is the qk head dim
  // (nope 128 + rope 64). One multi-token-prediction module (num_nextn_predict_layers 1), which
  // the published 671B leaves out.
  {
    // Numerics: rope_theta 10000, rms_norm_eps 1e-6, YaRN by 40; the MLA latents are normed;
    // sigmoid routing with a balancing bias over 8 groups (a token in the top 4), the routed
    // weights renormalised and scaled by 2.5.
    ModelSpec m = with_numerics(llama("deepseek-v3", 61, 7168, 128, 128, 18432, 129280), 10000,
                                1e-6, RopeScaling::kYarn, 40);
    m.head_dim = 128 + 64;
    m.qk_norm = true;
    m.moe = MoeSpec{.experts = 256,
                    .top_k = 8,
                    .shared_experts = 1,
                    .expert_ffn_hidden = 2048,
                    .dense_layers = 3,
                    .router = RouterSpec{.score = RouterScore::kSigmoid,
                                         .expert_bias = true,
                                         .topk_scaling = 2.5,
                                         .groups = 8,
                                         .group_topk = 4}};
    m.mtp_layers = 1;
    m.mla = MlaSpec{.q_lora_rank = 1536,
                    .kv_lora_rank = 512,
                    .qk_nope_head_dim = 128,
                    .qk_rope_head_dim = 64,
                    .v_head_dim = 128};
    z.push_back({m, {671e9, kDeepseekV3, 37e9}});
  }
  return z;
}

const std::vector<ZooEntry>& zoo_entries() {
  static const std::vector<ZooEntry> entries = build_zoo();
  return entries;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

const ZooEntry* find_entry(const std::string& name) {
  const std::string key = lower(name);
  for (const auto& e : zoo_entries()) {
    if (e.spec.name == key) return &e;
  }
  return nullptr;
}

}  // namespace

const std::vector<ModelSpec>& model_zoo() {
  static const std::vector<ModelSpec> models = [] {
    std::vector<ModelSpec> out;
    for (const auto& e : zoo_entries()) out.push_back(e.spec);
    return out;
  }();
  return models;
}

Result<ModelSpec> find_zoo_model(const std::string& name, const std::string& where) {
  if (const ZooEntry* e = find_entry(name)) return e->spec;
  std::vector<std::string> names;
  for (const auto& m : model_zoo()) names.push_back(m.name);
  return Diagnostic{where, "unknown model '" + name + "'", unknown_name_hint(name, names)};
}

std::optional<PublishedSize> published_size(const std::string& name) {
  if (const ZooEntry* e = find_entry(name)) return e->published;
  return std::nullopt;
}

}  // namespace parallax
