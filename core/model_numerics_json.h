#pragma once
/// The numerics keys of our model format (no cost depends on them; launch configs need them):
///   "qk_norm": bool, "rope_theta": number, "norm_eps": number,
///   "rope_scaling": {"type": "llama3" | "yarn", "factor": number},
///   and in "moe": "router": {"score": "softmax" | "sigmoid", "pre_softmax": bool,
///   "expert_bias": bool, "topk_scaling": number, "groups": int, "group_topk": int}.
/// Private to json_io.cc.

#include "core/json_io.h"

namespace parallax::detail {

/// The model-level keys, each absent one left at ModelSpec's default.
void read_model_numerics(JsonFields& f, const std::string& where, Diagnostics* d, ModelSpec* m);
/// The "router" object of a "moe" block, if present.
void read_router(JsonFields& moe, const std::string& where, Diagnostics* d, RouterSpec* r);
/// Writes the keys whose values differ from the defaults, so that older files stay as they are.
void write_model_numerics(const ModelSpec& m, Json* j);

}  // namespace parallax::detail
