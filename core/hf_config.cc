#include "core/hf_config.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/json_read.h"

namespace parallax {
namespace {

using nlohmann::json;

/// A family this importer models: its model_type and the defaults of its transformers config
/// class for keys a config.json may leave out.
struct Family {
  const char* model_type;
  int head_dim;  ///< 0: hidden_size / num_attention_heads
  bool qk_norm;  ///< per-head RMSNorm of queries and keys (Qwen3), or of MLA's latents
  /// norm_topk_prob's default: the top-k weights renormalised (false: softmax over all experts
  /// first, the k weights kept as they are).
  bool norm_topk;
  /// How the family turns sliding-window attention on: "" never, "use_sliding_window" when that
  /// key is true, "sliding_window" whenever that key is not null.
  const char* sliding_switch;
};

// Qwen3Config and Qwen3MoeConfig default head_dim to 128 (transformers, configuration_qwen3.py,
// configuration_qwen3_moe.py); Qwen2 and Qwen3 turn sliding windows on with use_sliding_window,
// Mistral and Mixtral whenever sliding_window is set.
// Mixtral renormalises its top-2 softmax weights (MixtralSparseMoeBlock); Qwen2/3-MoE and
// DeepSeek-V2 default norm_topk_prob to false, DeepSeek-V3 to true. DeepSeek's MLA norms its
// query and KV latents (q_a_layernorm, kv_a_layernorm).
constexpr Family kFamilies[] = {{"llama", 0, false, true, ""},
                                {"mistral", 0, false, true, "sliding_window"},
                                {"mixtral", 0, false, true, "sliding_window"},
                                {"qwen2", 0, false, true, "use_sliding_window"},
                                {"qwen3", 128, true, true, "use_sliding_window"},
                                {"qwen2_moe", 0, false, false, "use_sliding_window"},
                                {"qwen3_moe", 128, true, false, "use_sliding_window"},
                                {"deepseek_v2", 0, true, false, ""},
                                {"deepseek_v3", 0, true, true, ""}};

/// Families known not to be modelled, and why: an architecture the simulator does not have.
struct Unmodelled {
  const char* model_type;
  const char* why;
};
constexpr Unmodelled kUnmodelled[] = {
    {"gpt_oss", "alternating sliding-window and full attention with attention sinks"},
    {"qwen3_next", "hybrid Gated DeltaNet linear attention and gated full attention"},
    {"gemma3_text", "interleaved local sliding-window and global attention (5:1)"},
    {"gemma3", "interleaved local sliding-window and global attention (5:1), vision tower"},
    {"gemma2", "alternating sliding-window attention and logit soft-capping"},
    {"llama4", "chunked attention without RoPE every 4th layer, MoE on alternate layers"},
    {"deepseek_v32", "DeepSeek Sparse Attention (a lightning indexer selects top-k tokens)"},
    {"glm4_moe", "partial rotary embeddings and multi-token-prediction layers"},
    {"mamba", "state-space (Mamba) layers"},
    {"mamba2", "state-space (Mamba-2) layers"},
    {"jamba", "state-space (Mamba) layers interleaved with attention"},
    {"falcon_h1", "parallel state-space (Mamba-2) and attention heads"},
    {"nemotron_h", "state-space (Mamba-2) layers interleaved with attention"},
};

std::string family_names() {
  std::string s;
  for (const Family& f : kFamilies) s += (s.empty() ? "" : ", ") + std::string(f.model_type);
  return s;
}

/// "string \"4096\"": the JSON type and (shortened) text of a value, for "got X" messages.
std::string describe(const json& v) {
  std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return std::string(v.type_name()) + " " + text;
}

/// Reads typed fields of one config object; each bad or missing field adds one diagnostic at
/// `where` + "/" + key, and reading goes on so that every problem is reported.
class ConfigReader {
 public:
  ConfigReader(const json& cfg, const std::string& where) : cfg_(cfg), where_(where) {}

  /// Present and not null.
  bool has(const char* key) const {
    auto it = cfg_.find(key);
    return it != cfg_.end() && !it->is_null();
  }

  /// An integer field in [lo, hi]; nullopt (after a diagnostic, if required) when absent.
  std::optional<int64_t> integer(const char* key, bool required, int64_t hi = INT_MAX) {
    if (!has(key)) {
      if (required) error(key, "missing");
      return std::nullopt;
    }
    const json& v = cfg_.at(key);
    std::optional<int64_t> out;
    if (v.is_number_integer() &&
        !(v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))) {
      out = v.get<int64_t>();
    } else if (v.is_number_float()) {
      const double d = v.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) {
        out = static_cast<int64_t>(d);
      }
    }
    if (!out) {
      error(key, "must be an integer, got " + describe(v));
      return std::nullopt;
    }
    if (*out > hi || *out < -hi) {
      error(key, "out of range, got " + std::to_string(*out));
      return std::nullopt;
    }
    return out;
  }

  /// An int-sized field; 0 when absent or bad (the diagnostic is already recorded).
  int int32(const char* key, bool required) {
    return static_cast<int>(integer(key, required).value_or(0));
  }

  std::optional<bool> boolean(const char* key) {
    if (!has(key)) return std::nullopt;
    const json& v = cfg_.at(key);
    if (!v.is_boolean()) {
      error(key, "must be true or false, got " + describe(v));
      return std::nullopt;
    }
    return v.get<bool>();
  }

  std::optional<double> number(const char* key) {
    if (!has(key)) return std::nullopt;
    const json& v = cfg_.at(key);
    if (!v.is_number()) {
      error(key, "must be a number, got " + describe(v));
      return std::nullopt;
    }
    return v.get<double>();
  }

  std::optional<std::string> string(const char* key) {
    if (!has(key)) return std::nullopt;
    const json& v = cfg_.at(key);
    if (!v.is_string()) {
      error(key, "must be a string, got " + describe(v));
      return std::nullopt;
    }
    return v.get<std::string>();
  }

  const json* raw(const char* key) const { return has(key) ? &cfg_.at(key) : nullptr; }

  std::string path(const std::string& key) const { return where_ + "/" + key; }

  void error(const std::string& key, std::string what, std::string hint = "") {
    diags_.push_back({path(key), std::move(what), std::move(hint)});
  }

  Diagnostics& diagnostics() { return diags_; }

 private:
  const json& cfg_;
  std::string where_;
  Diagnostics diags_;
};

constexpr bool kRequired = true;
constexpr bool kOptional = false;

FfnAct read_activation(ConfigReader& r) {
  const std::string act = r.string("hidden_act").value_or("silu");
  // The MLPs of every family read here are gated (gate, up, down projections), so silu means
  // SwiGLU. gelu variants map to the 2-matrix gelu MLP of ModelSpec.
  if (act == "silu" || act == "swish") return FfnAct::kSwiglu;
  if (act.rfind("gelu", 0) == 0) return FfnAct::kGelu;
  r.error("hidden_act", "unsupported activation '" + act + "'",
          "silu or swish (SwiGLU), gelu, gelu_new, gelu_pytorch_tanh");
  return FfnAct::kSwiglu;
}

/// Reads the MoE block, if any, and records which JSON key holds each MoeSpec field.
void read_moe(ConfigReader& r, ModelSpec& m, std::map<std::string, std::string>& json_key) {
  MoeSpec e;
  if (r.has("n_routed_experts")) {  // DeepSeek-V2/V3
    e.experts = r.int32("n_routed_experts", kRequired);
    e.shared_experts = r.int32("n_shared_experts", kOptional);  // null or absent: none
    e.expert_ffn_hidden = r.integer("moe_intermediate_size", kRequired).value_or(0);
    e.dense_layers = r.int32("first_k_dense_replace", kOptional);
    // moe_layer_freq k makes every k-th layer after the dense prefix MoE; ModelSpec has all of
    // them MoE, so only 1 is exact.
    if (auto freq = r.integer("moe_layer_freq", kOptional); freq && *freq != 1) {
      r.error("moe_layer_freq", "only 1 is supported, got " + std::to_string(*freq),
              "ModelSpec makes every layer after first_k_dense_replace an MoE layer");
    }
    json_key["/moe/experts"] = "n_routed_experts";
    json_key["/moe/shared_experts"] = "n_shared_experts";
    json_key["/moe/expert_ffn_hidden"] = "moe_intermediate_size";
    json_key["/moe/dense_layers"] = "first_k_dense_replace";
  } else if (r.has("num_local_experts")) {  // Mixtral: each expert is a full-width MLP
    e.experts = r.int32("num_local_experts", kRequired);
    e.expert_ffn_hidden = m.ffn_hidden;
    json_key["/moe/experts"] = "num_local_experts";
    json_key["/moe/expert_ffn_hidden"] = "intermediate_size";
  } else if (r.has("num_experts")) {  // Qwen2-MoE / Qwen3-MoE
    e.experts = r.int32("num_experts", kRequired);
    e.expert_ffn_hidden = r.integer("moe_intermediate_size", kRequired).value_or(0);
    // Qwen2-MoE has one shared MLP of shared_expert_intermediate_size; ModelSpec counts shared
    // experts of the routed width, so it becomes round(shared / routed) of them, at least 1.
    auto shared = r.integer("shared_expert_intermediate_size", kOptional, INT64_MAX);
    if (shared && *shared > 0 && e.expert_ffn_hidden > 0) {
      const double ratio = static_cast<double>(*shared) / static_cast<double>(e.expert_ffn_hidden);
      e.shared_experts = std::max(1, static_cast<int>(std::lround(ratio)));
    }
    // decoder_sparse_step k and mlp_only_layers make some layers dense anywhere in the stack;
    // ModelSpec's dense layers are a leading prefix, so only the all-MoE default is exact.
    if (auto step = r.integer("decoder_sparse_step", kOptional); step && *step != 1) {
      r.error("decoder_sparse_step", "only 1 is supported, got " + std::to_string(*step),
              "ModelSpec MoE layers are all layers after a dense prefix");
    }
    if (const json* only = r.raw("mlp_only_layers"); only && !(only->is_array() && only->empty())) {
      r.error("mlp_only_layers", "only [] is supported, got " + describe(*only),
              "ModelSpec MoE layers are all layers after a dense prefix");
    }
    json_key["/moe/experts"] = "num_experts";
    json_key["/moe/expert_ffn_hidden"] = "moe_intermediate_size";
  } else {
    return;
  }
  e.top_k = r.int32("num_experts_per_tok", kRequired);
  json_key["/moe/top_k"] = "num_experts_per_tok";
  m.moe = e;
}

/// Multi-head latent attention (DeepSeek-V2/V3), present when kv_lora_rank is set.
void read_mla(ConfigReader& r, ModelSpec& m, std::map<std::string, std::string>& json_key) {
  if (!r.has("kv_lora_rank")) return;
  MlaSpec a;
  a.q_lora_rank = r.int32("q_lora_rank", kOptional);  // null: q projected directly
  a.kv_lora_rank = r.int32("kv_lora_rank", kRequired);
  a.qk_nope_head_dim = r.int32("qk_nope_head_dim", kRequired);
  a.qk_rope_head_dim = r.int32("qk_rope_head_dim", kRequired);
  a.v_head_dim = r.int32("v_head_dim", kRequired);
  m.mla = a;
  // For MLA, ModelSpec::head_dim is the qk head dim; a head_dim field (newer transformers
  // write qk_rope_head_dim there) does not describe it.
  m.head_dim = a.qk_nope_head_dim + a.qk_rope_head_dim;
  json_key["/mla/kv_lora_rank"] = "kv_lora_rank";
  json_key["/mla/qk_nope_head_dim"] = "qk_nope_head_dim";
  json_key["/mla/v_head_dim"] = "v_head_dim";
}

/// The family of the config's model_type; nullopt, after a diagnostic that names the reason,
/// for a missing, unknown or unmodelled one.
std::optional<Family> read_family(ConfigReader& r) {
  const std::optional<std::string> type = r.string("model_type");
  if (!type) {
    if (!r.has("model_type"))
      r.error("model_type", "missing: a config.json names its architecture there",
              "families read: " + family_names());
    return std::nullopt;
  }
  for (const Family& f : kFamilies)
    if (*type == f.model_type) return f;
  for (const Unmodelled& u : kUnmodelled)
    if (*type == u.model_type) {
      r.error("model_type",
              "'" + *type + "' is not modelled: " + u.why +
                  "; parallax would simulate it as a full-attention transformer",
              "families read: " + family_names());
      return std::nullopt;
    }
  r.error("model_type", "'" + *type + "' is not a family this importer reads",
          "families read: " + family_names());
  return std::nullopt;
}

/// Architecture fields the simulator has no model of, each refused with the reason: sliding
/// windows, per-layer attention types other than full, multi-token-prediction layers, sparse
/// attention indexers and quantized weights other than fp8.
void refuse_unmodelled_fields(ConfigReader& r, const Family& f) {
  const std::string sw = f.sliding_switch;
  const bool sliding = sw == "sliding_window"
                           ? r.has("sliding_window")
                           : !sw.empty() && r.boolean(sw.c_str()).value_or(false);
  if (sliding)
    r.error(sw,
            "sliding-window attention is not modelled: every layer would be simulated with "
            "full causal attention",
            sw == "sliding_window" ? "set sliding_window to null to plan it as full attention"
                                   : "set use_sliding_window to false to plan it as full "
                                     "attention");
  if (const json* types = r.raw("layer_types")) {
    const bool all_full =
        types->is_array() && std::all_of(types->begin(), types->end(),
                                         [](const json& t) { return t == "full_attention"; });
    if (!all_full)
      r.error("layer_types", "only full_attention layers are modelled, got " + describe(*types));
  }
  for (const char* key : {"index_topk", "index_n_heads"})
    if (r.has(key))
      r.error(key, "sparse attention with a token indexer is not modelled",
              "the model would be simulated with dense attention");
  if (const json* q = r.raw("quantization_config")) {
    const std::string method = text_at(*q, "quant_method");
    // fp8 checkpoints (DeepSeek-V3's block-scaled weights) hold the architecture read here; the
    // precision the model runs in is --precision's.
    if (method != "fp8")
      r.error("quantization_config",
              "quantized weights (quant_method '" + method + "') are not modelled",
              "plan the bf16 model (remove quantization_config), or fp8 with --precision fp8");
  }
}

/// rope_theta, rms_norm_eps, rope_scaling (llama3 or yarn; another kind has no launch flag
/// and is refused) and the family's QK norm.
void read_numerics(ConfigReader& r, ModelSpec& m, const Family& f) {
  m.qk_norm = f.qk_norm;
  m.rope_theta = r.number("rope_theta").value_or(0);
  m.norm_eps = r.number("rms_norm_eps").value_or(0);
  const json* rs = r.raw("rope_scaling");
  if (!rs) return;
  // Either spelling, and only when it is a string: a number there is reported, not thrown.
  const std::string rope_type = text_at(*rs, "rope_type");
  const std::string type = !rope_type.empty() ? rope_type : text_at(*rs, "type");
  const double factor = rs->is_object() && rs->contains("factor") && (*rs)["factor"].is_number()
                            ? (*rs)["factor"].get<double>()
                            : 0;
  if (type == "llama3" || type == "yarn") {
    m.rope_scaling = type == "llama3" ? RopeScaling::kLlama3 : RopeScaling::kYarn;
    m.rope_scaling_factor = factor;
    return;
  }
  r.error("rope_scaling", "rotary scaling '" + type + "' is not modelled, got " + describe(*rs),
          "llama3 or yarn");
}

/// The router of a MoE model: DeepSeek's scoring_func, topk_method (noaux_tc: a balancing
/// bias), n_group, topk_group and routed_scaling_factor; everyone's norm_topk_prob.
void read_router(ConfigReader& r, const Family& f, RouterSpec& out) {
  out.pre_softmax = !r.boolean("norm_topk_prob").value_or(f.norm_topk);
  const std::string score = r.string("scoring_func").value_or("softmax");
  if (score == "sigmoid")
    out.score = RouterScore::kSigmoid;
  else if (score != "softmax")
    r.error("scoring_func", "router score '" + score + "' is not modelled", "softmax or sigmoid");
  // A sigmoid router scores each expert on its own: pre_softmax does not apply.
  if (out.score == RouterScore::kSigmoid) out.pre_softmax = false;
  out.expert_bias = r.string("topk_method").value_or("") == "noaux_tc";
  out.topk_scaling = r.number("routed_scaling_factor").value_or(1.0);
  out.groups = r.int32("n_group", kOptional);
  out.group_topk = r.int32("topk_group", kOptional);
  if (out.groups <= 1) out.groups = out.group_topk = 0;  // one group: no group limit
}

void read_head_dim(ConfigReader& r, ModelSpec& m, const Family& f) {
  if (r.has("head_dim")) {
    m.head_dim = r.int32("head_dim", kRequired);
    return;
  }
  if (f.head_dim > 0) {
    m.head_dim = f.head_dim;
    return;
  }
  if (m.hidden <= 0 || m.heads <= 0) return;  // already reported; validate_model flags the 0
  if (m.hidden % m.heads != 0) {
    r.error("head_dim",
            "missing, and hidden_size=" + std::to_string(m.hidden) +
                " is not a multiple of num_attention_heads=" + std::to_string(m.heads),
            "set head_dim");
    return;
  }
  m.head_dim = static_cast<int>(m.hidden / m.heads);
}

Result<ModelSpec> read_model(const json& cfg, const std::string& name, const std::string& where) {
  ConfigReader r(cfg, where);
  // ModelSpec path (as validate_model names it) -> the JSON key it came from.
  std::map<std::string, std::string> json_key = {{"/layers", "num_hidden_layers"},
                                                 {"/hidden", "hidden_size"},
                                                 {"/heads", "num_attention_heads"},
                                                 {"/kv_heads", "num_key_value_heads"},
                                                 {"/head_dim", "head_dim"},
                                                 {"/vocab", "vocab_size"},
                                                 {"/ffn_hidden", "intermediate_size"},
                                                 {"/dropout", "attention_dropout"}};

  const std::optional<Family> family = read_family(r);
  if (!family) return std::move(r.diagnostics());
  refuse_unmodelled_fields(r, *family);
  ModelSpec m;
  m.name = name;
  m.layers = r.int32("num_hidden_layers", kRequired);
  m.hidden = r.integer("hidden_size", kRequired).value_or(0);
  m.heads = r.int32("num_attention_heads", kRequired);
  m.kv_heads = r.has("num_key_value_heads") ? r.int32("num_key_value_heads", kRequired) : m.heads;
  m.vocab = r.integer("vocab_size", kRequired).value_or(0);
  m.tied_embeddings = r.boolean("tie_word_embeddings").value_or(false);
  // Dropout: Llama/Qwen name it attention_dropout / hidden_dropout, GPT-2 attn_pdrop /
  // resid_pdrop; the largest one is used for every dropout site.
  for (const char* key : {"attention_dropout", "hidden_dropout", "attn_pdrop", "resid_pdrop"})
    m.dropout = std::max(m.dropout, r.number(key).value_or(0.0));
  m.ffn_act = read_activation(r);
  // Qwen-style MoE models keep intermediate_size but use it in no layer; everyone else needs it.
  const bool qwen_moe = r.has("num_experts") && !r.has("n_routed_experts");
  m.ffn_hidden = r.integer("intermediate_size", !qwen_moe).value_or(0);
  read_head_dim(r, m, *family);
  read_moe(r, m, json_key);
  if (m.moe) read_router(r, *family, m.moe->router);
  read_mla(r, m, json_key);
  read_numerics(r, m, *family);
  // DeepSeek-V3's multi-token-prediction modules (trained with the model; Hugging Face
  // transformers runs the main model only).
  m.mtp_layers = r.int32("num_nextn_predict_layers", kOptional);
  json_key["/mtp_layers"] = "num_nextn_predict_layers";

  // validate_model's findings, moved onto the JSON field they concern; a field already reported
  // (missing, wrong type) is not reported twice.
  Diagnostics diags = std::move(r.diagnostics());
  std::set<std::string> reported;
  for (const auto& d : diags) reported.insert(d.where);
  // Defaults derived from a bad field would only echo it.
  if (!r.has("head_dim") && !m.mla && (m.hidden <= 0 || m.heads <= 0)) {
    reported.insert(r.path("head_dim"));
  }
  if (!r.has("num_key_value_heads") && m.heads <= 0) reported.insert(r.path("num_key_value_heads"));
  for (Diagnostic d : validate_model(m, where)) {
    if (d.where.rfind(where, 0) == 0) {
      auto it = json_key.find(d.where.substr(where.size()));
      if (it != json_key.end()) d.where = r.path(it->second);
    }
    if (reported.count(d.where)) continue;
    diags.push_back(std::move(d));
  }
  if (!diags.empty()) return diags;
  return m;
}

}  // namespace

Result<ModelSpec> model_from_hf_config(const json& cfg, const std::string& name,
                                       const std::string& where) {
  if (!cfg.is_object()) {
    return Diagnostic{where, "must be a JSON object, got " + describe(cfg), ""};
  }
  // Every access above checks types first; this only keeps a library bug from escaping as an
  // exception.
  try {
    return read_model(cfg, name, where);
  } catch (const json::exception& e) {
    return Diagnostic{where, std::string("could not read config: ") + e.what(), ""};
  }
}

}  // namespace parallax
