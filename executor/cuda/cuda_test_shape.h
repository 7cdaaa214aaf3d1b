#pragma once
/// The small dense model the CUDA backend's tests run: 4 heads (2 KV) of 16, hidden 64, MLP 128,
/// vocabulary 97.

#include <cstdint>

#include "executor/model.h"

namespace parallax::exec::gpu {

inline ModelShape cuda_test_shape(int64_t layers, bool tied = false) {
  ModelShape s;
  s.layers = layers;
  s.hidden = 64;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 16;
  s.ffn_hidden = 128;
  s.vocab = 97;
  s.tied_embeddings = tied;
  return s;
}

}  // namespace parallax::exec::gpu
