#pragma once
/// Serving launch commands: a deployment (serving::Deployment) becomes the command that starts
/// it on a serving engine (`vllm serve`, `python -m sglang.launch_server`). Like the training
/// emitters (launch.h), each first checks the engine's own rules and refuses, with every reason,
/// a deployment that engine cannot run.

#include <cstdint>
#include <optional>
#include <string>

#include "core/model_spec.h"
#include "core/result.h"
#include "simulator/serving/step_cost.h"

namespace parallax {

/// Engine settings a serving::Deployment does not carry.
struct ServeEngineSettings {
  bool enable_chunked_prefill = true;  ///< a prompt may be computed over several steps
  /// Longest request (prompt + output), tokens; 0: the model's own (then no --max-model-len is
  /// written, and the rule that needs it cannot be checked).
  int64_t max_model_len = 0;
  /// GPUs the command must use in all; 0: tp * pp * dp (nothing to check).
  int gpus = 0;
  /// GPUs of one host (the profile's gpus_per_node); a deployment over more is launched on
  /// several hosts, one command each. 0: every GPU on one host.
  int gpus_per_node = 0;
  /// SGLang only: --enable-dp-attention (attention data-parallel over the tp ranks, which then
  /// are all the instance's GPUs). Not simulated by parallax; emitted when asked.
  bool sglang_dp_attention = false;
  /// Disaggregated prefill/decode: `prefill_replicas` of the dp replicas prefill and the other
  /// dp - prefill_replicas decode, the KV moved over NIXL; each pool is one command with the
  /// engine limits of the deployment, behind a router. 0: colocated.
  int prefill_replicas = 0;
};

/// The Hugging Face repository of a zoo model's instruction-tuned checkpoint
/// ("llama3.1-70b" -> "meta-llama/Llama-3.1-70B-Instruct"); nullopt for a model the zoo does not
/// map (the command then carries the name as given and asks the user to set the path).
std::optional<std::string> hf_model_id(const std::string& model_name);

/// vLLM's rules that `d` breaks, each `--flag: what, got X, want Y (hint)`: the structural rules of
/// serving::check_deployment, tp*pp*dp against settings.gpus, max_num_batched_tokens against
/// max_num_seqs and (without chunked prefill) against max_model_len, the CUDA block sizes, and
/// expert parallelism (a MoE model, over all the tp ranks of an instance).
Diagnostics check_vllm(const ModelSpec& m, const serving::Deployment& d,
                       const ServeEngineSettings& s);

/// `vllm serve <model-id> --tensor-parallel-size ...`, commented; refuses (check_vllm) what vLLM
/// cannot run.
Result<std::string> emit_vllm(const ModelSpec& m, const serving::Deployment& d,
                              const ServeEngineSettings& s);

/// SGLang's rules that `d` breaks: the structural rules of serving::check_deployment, the GPU
/// count, ep dividing tp (SGLang's MoE tensor-parallel size is tp/ep), dp dividing tp with DP
/// attention, and the ranges of its memory fraction and page size.
Diagnostics check_sglang(const ModelSpec& m, const serving::Deployment& d,
                         const ServeEngineSettings& s);

/// `python -m sglang.launch_server --model-path <id> --tp-size ...`, commented; refuses
/// (check_sglang) what SGLang cannot run.
Result<std::string> emit_sglang(const ModelSpec& m, const serving::Deployment& d,
                                const ServeEngineSettings& s);

}  // namespace parallax
