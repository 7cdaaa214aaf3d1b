#pragma once
/// Setup shared by the unit tests: a part with round numbers, small GPT-style models, matchers
/// for diagnostics and the paths and contents of fixture files. Test code only: the paths come
/// from PARALLAX_SOURCE_DIR, which tests/CMakeLists.txt defines for
/// parallax_tests.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "core/hw_profile.h"
#include "core/model_spec.h"
#include "core/result.h"

namespace parallax::testing {

// ---- fixture files ----------------------------------------------------------------------------

/// The public training runs of validation/, one JSON record a line.
inline constexpr char kPublicTrainingRuns[] =
    PARALLAX_SOURCE_DIR "/validation/public-training.jsonl";

/// The path of a fixture under tests/data, e.g. test_data("hf/qwen3-4b.json").
inline std::string test_data(std::string_view name) {
  return std::string(PARALLAX_SOURCE_DIR "/tests/data/") + std::string(name);
}

/// The whole content of the file at `path`, or nullopt when it cannot be opened.
inline std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ---- hardware and models ----------------------------------------------------------------------

/// A part with round numbers so that every expected time can be derived by hand. Compute:
/// 1000 TFLOP/s bf16 and 2000 fp8 on 100 SMs, 128 x 128 GEMM tiles at 0.8 efficiency in both
/// precisions, attention at 0.5 forward and 0.4 backward, no kernel overhead. Memory: 80 GiB of
/// HBM at 1000 GB/s, full efficiency. Interconnect: NVLink 100 GB/s and NIC 10 GB/s per GPU, both
/// at full efficiency and without latency; a node is one scale-up domain of `scale_up_domain`.
/// A test that needs another number sets it on the copy it gets.
inline HwProfile round_profile(int scale_up_domain = 8) {
  HwProfile hw;
  hw.name = "synthetic";
  hw.bf16_tflops = 1000;
  hw.fp8_tflops = 2000;
  hw.sm_count = 100;
  hw.gemm_tile_m = 128;
  hw.gemm_tile_n = 128;
  hw.gemm_efficiency = 0.8;
  hw.fp8_gemm_efficiency = 0.8;
  hw.attention_fwd_efficiency = 0.5;
  hw.attention_bwd_efficiency = 0.4;
  hw.kernel_overhead_us = 0;
  hw.hbm_gib = 80;
  hw.hbm_bw_gbps = 1000;
  hw.hbm_efficiency = 1.0;
  hw.gpus_per_node = scale_up_domain;
  hw.scale_up_domain = scale_up_domain;
  hw.scale_up_bw_gbps = 100;
  hw.scale_up_efficiency = 1.0;
  hw.scale_up_latency_us = 0;
  hw.scale_out_bw_gbps = 10;
  hw.scale_out_efficiency = 1.0;
  hw.scale_out_latency_us = 0;
  return hw;
}

/// What varies between the GPT-style models of the tests.
struct GptShape {
  std::string name;
  int layers = 0;
  int64_t hidden = 0;
  int heads = 0;
  int64_t vocab = 0;
  bool tied_embeddings = false;
};

/// A GPT-style model: multi-head attention (kv_heads = heads, head_dim = hidden / heads) and a
/// GELU MLP of width 4 * hidden.
inline ModelSpec gpt_model(const GptShape& s) {
  PX_CHECK(s.heads > 0 && s.hidden % s.heads == 0,
           "hidden=" << s.hidden << " is not a multiple of heads=" << s.heads);
  ModelSpec m;
  m.name = s.name;
  m.layers = s.layers;
  m.hidden = s.hidden;
  m.heads = s.heads;
  m.kv_heads = s.heads;
  m.head_dim = static_cast<int>(s.hidden / s.heads);
  m.ffn_hidden = 4 * s.hidden;
  m.ffn_act = FfnAct::kGelu;
  m.vocab = s.vocab;
  m.tied_embeddings = s.tied_embeddings;
  return m;
}

// ---- diagnostics and numbers ------------------------------------------------------------------

/// True when some diagnostic's full text (`where: what (hint: ...)`) contains `needle`.
inline bool mentions(const Diagnostics& d, std::string_view needle) {
  for (const auto& e : d)
    if (e.str().find(needle) != std::string::npos) return true;
  return false;
}

/// True when some diagnostic of a failed result contains `needle`.
template <typename T>
bool mentions(const Result<T>& r, std::string_view needle) {
  return mentions(r.errors(), needle);
}

/// Every diagnostic on a line of its own, for the message of a failed expectation.
inline std::string text(const Diagnostics& d) {
  std::string s;
  for (const auto& e : d) s += e.str() + "\n";
  return s;
}

/// `actual` equals `expected` to a relative 1e-12: for oracles that are the same closed form.
inline void expect_rel(double actual, double expected) {
  EXPECT_NEAR(actual, expected, 1e-12 * std::abs(expected)) << "expected " << expected;
}

}  // namespace parallax::testing
