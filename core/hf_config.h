#pragma once
/// Importing a model architecture from a Hugging Face `config.json`.

#include <nlohmann/json.hpp>
#include <string>

#include "core/model_spec.h"
#include "core/result.h"

namespace parallax {

/// Builds a ModelSpec from a Hugging Face config.json object, reading the field names of Llama,
/// Qwen2/Qwen3, Qwen2-MoE/Qwen3-MoE, Mixtral and DeepSeek-V2/V3 configs:
///   num_hidden_layers, hidden_size, num_attention_heads, intermediate_size, vocab_size
///   (required); num_key_value_heads (default: heads), head_dim (default: hidden/heads; kept
///   when it differs, as in Qwen3), tie_word_embeddings (default false), hidden_act (default
///   "silu": silu/swish -> swiglu, gelu* -> gelu);
///   MoE: num_local_experts (Mixtral; expert width = intermediate_size), or num_experts +
///   moe_intermediate_size (+ shared_expert_intermediate_size, Qwen2-MoE), or n_routed_experts +
///   n_shared_experts + moe_intermediate_size + first_k_dense_replace (DeepSeek); all with
///   num_experts_per_tok;
///   MLA (present when kv_lora_rank is set): q_lora_rank (null -> 0), kv_lora_rank,
///   qk_nope_head_dim, qk_rope_head_dim, v_head_dim.
/// model_type must name a family read here (llama, mistral, mixtral, qwen2, qwen3, qwen2_moe,
/// qwen3_moe, deepseek_v2, deepseek_v3); the family gives defaults for missing keys (Qwen3's
/// head_dim 128). Anything the simulator has no model of is refused with the field and the
/// reason, never approximated: other families (gpt_oss, qwen3_next, gemma3, llama4, Mamba
/// hybrids, ...), active sliding windows, layer_types other than full_attention, multi-token
/// prediction layers (num_nextn_predict_layers > 0), sparse-attention indexers and quantized
/// weights other than fp8. Fields that change no cost (rope_theta, rope_scaling, norm epsilon,
/// router scoring, token ids) are not read; biases are not counted (<0.1% of the parameters).
/// Diagnostics name the JSON path, `where` + "/field" (e.g. "config.json:/num_attention_heads:
/// missing"); every problem is reported, including validate_model's, mapped to the JSON field.
/// Never throws.
Result<ModelSpec> model_from_hf_config(const nlohmann::json& cfg, const std::string& name,
                                       const std::string& where);

}  // namespace parallax
