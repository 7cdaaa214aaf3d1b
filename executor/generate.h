#pragma once
/// Inference with the executor's model: a batch of prompts is prefilled in one pass that fills a
/// KV cache per layer, then the model decodes one token per sequence at a time against the
/// cache, greedily or by sampling. Tensor-parallel ranks split the heads and the MLP as in
/// training; pipeline ranks each run their stage and hand the residual stream on, the last stage
/// samples and hands the new tokens back to the first. Reports time to first token, time per
/// output token and throughput.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "executor/model.h"
#include "executor/process_group.h"

namespace parallax::exec {

struct GenerateOptions {
  int tp = 1, pp = 1;
  int64_t max_new_tokens = 32;
  double temperature = 0;  ///< 0: greedy (argmax); else softmax(logits / temperature) sampling
  uint64_t seed = 1234;    ///< initialisation without a checkpoint, and sampling
  /// The newest complete checkpoint here gives the weights (any layout); empty: initialised
  /// from `seed` (an untrained model).
  std::string checkpoint_dir;
};

struct GenerateResult {
  std::vector<std::vector<int32_t>> tokens;  ///< per prompt, the generated ids
  int64_t checkpoint_step = 0;               ///< 0 when the weights were initialised
  double ttft_s = 0;           ///< prefill until the first generated token of every sequence
  double tpot_s = 0;           ///< mean time per output token after the first
  double tokens_per_s = 0;     ///< generated tokens (all sequences) per second of the whole run
  double peak_memory_gib = 0;  ///< the largest peak resident set over the ranks
};

/// Generates max_new_tokens after each of `prompts` (equal lengths; ids < vocab) on `group`
/// (tp * pp ranks). Every rank returns the same result.
Result<GenerateResult> generate(const ModelShape& shape,
                                const std::vector<std::vector<int32_t>>& prompts,
                                const GenerateOptions& options, ProcessGroup& group);

}  // namespace parallax::exec
