#pragma once
/// ModelSpec: the architecture of a decoder-only transformer, dense or MoE, MHA/GQA or MLA.

#include <cstdint>
#include <optional>
#include <string>

#include "core/result.h"

namespace parallax {

enum class FfnAct { kGelu, kSwiglu };  ///< gelu: 2 matrices (up, down); swiglu: 3 (gate, up, down)

/// How a router turns its logits into the weights of the top-k experts.
enum class RouterScore { kSoftmax, kSigmoid };

/// Routing as the model defines it. No cost the simulator counts depends on it; a launch config
/// needs it to build the same model (Megatron-LM's --moe-router-* arguments).
struct RouterSpec {
  RouterScore score = RouterScore::kSoftmax;
  /// Softmax over every expert before the top-k, the k weights not renormalised (Qwen2-MoE,
  /// DeepSeek-V2: norm_topk_prob false). Otherwise the top-k scores are normalised.
  bool pre_softmax = false;
  bool expert_bias = false;   ///< aux-loss-free balancing bias on the scores (DeepSeek-V3)
  double topk_scaling = 1.0;  ///< the routed weights' factor (routed_scaling_factor)
  int groups = 0;             ///< expert groups of group-limited routing; 0: none
  int group_topk = 0;         ///< groups a token may route to
};

/// Mixture-of-experts feed-forward. Layers [0, dense_layers) are dense; the rest are MoE.
struct MoeSpec {
  int experts = 0;
  int top_k = 0;
  int shared_experts = 0;         ///< each of width expert_ffn_hidden (DeepSeek/Qwen style)
  int64_t expert_ffn_hidden = 0;  ///< per expert MLP width
  int dense_layers = 0;           ///< leading dense layers (DeepSeek-V3: 3)
  RouterSpec router;
};

/// Rotary-embedding context extension.
enum class RopeScaling { kNone, kLlama3, kYarn };

/// Multi-head latent attention (DeepSeek-V2/V3).
struct MlaSpec {
  int q_lora_rank = 0;  ///< 0 means no query compression (q projected directly)
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
};

struct ModelSpec {
  std::string name;
  int layers = 0;
  int64_t hidden = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;        ///< may differ from hidden/heads (Qwen3); for MLA the qk head dim
  int64_t ffn_hidden = 0;  ///< dense MLP width
  FfnAct ffn_act = FfnAct::kSwiglu;
  int64_t vocab = 0;
  bool tied_embeddings = false;
  double dropout = 0;  ///< hidden and attention dropout probability (GPT-era training: 0.1)
  // Numerics: no cost the simulator counts depends on them (a norm of a head's queries and keys
  // is <0.1% of a layer); a launch config needs them to build the same model. 0: not given, the
  // framework's default applies.
  bool qk_norm = false;   ///< RMSNorm of each head's queries and keys (Qwen3; MLA's latents)
  double rope_theta = 0;  ///< rotary base
  double norm_eps = 0;    ///< epsilon of the layer norms
  RopeScaling rope_scaling = RopeScaling::kNone;
  double rope_scaling_factor = 0;  ///< context extension factor of rope_scaling
  std::optional<MoeSpec> moe;
  std::optional<MlaSpec> mla;
  /// Multi-token-prediction depth (DeepSeek-V3: 1; Hugging Face num_nextn_predict_layers). Each
  /// module (arXiv 2412.19437 Sec. 2.2) normalises the last hidden state and the embedding of the
  /// next token (two RMSNorms), projects their concatenation [h; h] to h, runs one transformer
  /// block of the last layer's kind, and the shared output head and loss again; it shares the
  /// embedding and output head with the main model and runs on the last pipeline stage.
  int mtp_layers = 0;

  bool is_moe_layer(int layer) const { return moe && layer >= moe->dense_layers; }
  int num_moe_layers() const { return moe ? layers - moe->dense_layers : 0; }
};

/// Parameter counts, by part. Norm weights are counted; biases are not (modern decoders have
/// none; for GPT-3-style models they are <0.1%).
struct ParamCount {
  double embedding = 0;       ///< input embedding (V*h)
  double output = 0;          ///< output projection (0 when tied)
  double attention = 0;       ///< all layers
  double dense_mlp = 0;       ///< all dense layers
  double experts = 0;         ///< routed experts, all MoE layers
  double shared_experts = 0;  ///< all MoE layers
  double router = 0;
  double norms = 0;
  /// Multi-token-prediction modules, besides the shared embedding and head; not in total(), as
  /// published sizes count the main model (DeepSeek-V3: 671B, and 14B of MTP module).
  double mtp = 0;

  double total() const {
    return embedding + output + attention + dense_mlp + experts + shared_experts + router + norms;
  }
  /// Parameters touched per token: routed experts scaled by top_k/experts.
  double active(const ModelSpec& m) const;
};

ParamCount count_params(const ModelSpec& m);

/// Attention parameters of one layer (MHA/GQA or MLA).
double attention_params_per_layer(const ModelSpec& m);
/// MLP parameters of one expert or dense MLP of the given width.
double mlp_params(const ModelSpec& m, int64_t ffn_width);
/// Parameters of one multi-token-prediction module without the shared embedding and head: its
/// two input norms and [h; h] -> h projection, a transformer block of the last layer's kind
/// (attention, MLP or experts and router, two norms) and its final norm.
double mtp_module_params(const ModelSpec& m);

/// Checks internal consistency; `where` prefixes diagnostics (e.g. "llama.json:/model").
Diagnostics validate_model(const ModelSpec& m, const std::string& where);

}  // namespace parallax
