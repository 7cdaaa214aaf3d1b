#pragma once
/// The cost of one serving engine step and the KV-cache budget of a deployment, from the same
/// compute and collective cost functions the training simulator uses (simulator/cost): no
/// formula of a kernel or a collective is repeated here, only which kernels an inference
/// forward pass runs and on how many tokens.
///
/// A deployment is `dp` independent replicas (engines), each tp x pp GPUs; within a replica the
/// attention and dense MLPs are tensor-parallel (Megatron/vLLM column and row splits, one
/// all-reduce after each), the routed experts are tensor-parallel too (ep = 1) or spread over ep
/// of the tp ranks (vLLM's --enable-expert-parallel within one instance), and the layers are
/// split into pp stages.
///
/// Wide expert parallelism (ep = tp x dp, pp = 1): the experts of every MoE layer are spread
/// over all the deployment's GPUs, whole (DeepSeek-style serving: vLLM's --data-parallel-size
/// with --enable-expert-parallel, SGLang's DP attention with --ep-size). The dp replicas keep
/// their own schedulers and KV caches (attention stays data-parallel across them) but step
/// together: every MoE layer dispatches each replica's tokens to the experts' GPUs and combines
/// them back with all-to-alls, and a replica with nothing to run joins with an empty batch.

#include <cstdint>
#include <vector>

#include "core/hw_profile.h"
#include "core/model_spec.h"
#include "core/result.h"
#include "simulator/cost/collective_cost.h"
#include "simulator/cost/compute_cost.h"

namespace parallax::serving {

/// Layout and engine settings of a serving deployment (vLLM's names in comments).
struct Deployment {
  int tp = 1;  ///< --tensor-parallel-size
  int pp = 1;  ///< --pipeline-parallel-size
  int dp = 1;  ///< independent replicas (--data-parallel-size of a dense model)
  int ep = 1;  ///< expert-parallel ranks: dividing tp (inside a replica), or tp * dp (wide)
  Precision precision = Precision::kBf16;  ///< weights and GEMMs; the KV cache is bf16
  double gpu_memory_utilization = 0.9;     ///< --gpu-memory-utilization
  int block_size = 16;                     ///< KV-cache block, tokens (--block-size)
  int64_t max_num_seqs = 256;              ///< --max-num-seqs
  int64_t max_num_batched_tokens = 8192;   ///< --max-num-batched-tokens
  bool enable_prefix_caching = true;       ///< --enable-prefix-caching (vLLM V1's default)
  /// Wide ep only: each step as two micro-batches whose all-to-alls overlap the other's compute
  /// (vLLM's --enable-dbo, SGLang's --enable-two-batch-overlap).
  bool two_batch_overlap = false;
  int gpus() const { return tp * pp * dp; }
  /// Experts spread over every replica (ep = tp * dp > tp): the replicas step together.
  bool wide_ep() const { return ep > tp; }
};

/// One pool of wide-ep `d` disaggregated: `replicas` of its replicas, the experts over their
/// GPUs (ep = tp * replicas), as `serve --pd` and serve-plan run each pool.
Deployment wide_ep_pool(const Deployment& d, int replicas);

/// Every problem of `d` for `m` on `gpus` GPUs (0: not checked): degrees not dividing heads,
/// KV heads, MLP widths or experts; ep not dividing tp; gpus != tp * pp * dp; settings out of
/// range. Fields are named by their flags.
Diagnostics check_deployment(const ModelSpec& m, const Deployment& d, int gpus);

/// Memory of the busiest GPU of a replica, as vLLM sizes its KV cache: the usable HBM
/// (capacity x gpu_memory_utilization) minus the weights, the peak activations of a profiling
/// forward pass of max_num_batched_tokens tokens, and the runtime's reservation; what is left
/// holds `blocks` KV blocks.
struct KvBudget {
  double usable_gib = 0, weights_gib = 0, activation_gib = 0, reserved_gib = 0, kv_gib = 0;
  /// KV-cache bytes one token takes on that GPU over all its layers.
  double kv_bytes_per_token = 0;
  int64_t blocks = 0;  ///< KV blocks of block_size tokens; 0 when nothing is left
  int block_size = 16;
  int64_t tokens() const;  ///< blocks * block_size
};

/// The budget, or an error when the weights and activations leave no room for the KV cache.
Result<KvBudget> kv_budget(const ModelSpec& m, const HwProfile& hw, const Deployment& d);

/// KV-cache bytes per token per layer on one GPU: K and V of its KV heads (a head is
/// replicated when tp exceeds the KV heads), or MLA's latent and rotary key, which every
/// tensor-parallel rank keeps whole.
double kv_bytes_per_token_layer(const ModelSpec& m, int tp);

/// What one engine step runs: the new tokens of each prefill chunk with the context before it,
/// and the decoding sequences' contexts. Every sequence that completes its prompt or decodes
/// samples one token.
struct StepShape {
  struct Chunk {
    int64_t new_tokens = 0, context = 0;
  };
  std::vector<Chunk> prefills;
  int64_t decodes = 0;        ///< sequences decoding one token each
  double decode_context = 0;  ///< sum over them of the tokens already in their KV cache
  int64_t sampled = 0;        ///< sequences that sample a token this step
  int64_t tokens() const;     ///< prefill tokens + decodes
};

/// One step of one replica, in seconds.
class StepCost {
 public:
  /// Keeps references to `m` and `hw`, which must outlive it.
  StepCost(const ModelSpec& m, const HwProfile& hw, const Deployment& d);
  // A temporary model or profile would dangle (ASan: stack-use-after-scope in a test).
  StepCost(ModelSpec&&, const HwProfile&, const Deployment&) = delete;
  StepCost(const ModelSpec&, HwProfile&&, const Deployment&) = delete;

  /// The step's time: every pipeline stage's forward over the step's tokens one after the
  /// other with the activations sent between stages (one batch in flight, as an engine without
  /// virtual pipeline engines runs), plus sampling on the last stage.
  double time_s(const StepShape& s) const;

  /// The parts of it (for reports and tests): the layers' GEMMs, attention, memory-bound
  /// kernels, communication, and the output layer with sampling.
  struct Parts {
    double gemm_s = 0, attention_s = 0, memory_s = 0, comm_s = 0, head_s = 0;
    double total() const { return gemm_s + attention_s + memory_s + comm_s + head_s; }
  };
  Parts parts(const StepShape& s) const;

  /// The step on each of the pp stages, stage 0 first: its layers (an even split, the remainder
  /// to the last stages), the embedding on the first, sending the activations to the next on
  /// every stage but the last, the output layer and sampling on the last. They sum to time_s.
  void stage_times(const StepShape& s, std::vector<double>* stage_s) const;

  /// Wide expert parallelism: one step of every replica at once (shapes[r]: replica r's step,
  /// empty when it has nothing to run). Each replica's attention, dense layers, router, shared
  /// experts, embedding and head on its own tokens, the slowest replica setting the pace (every
  /// MoE layer waits for all), plus every MoE layer's routed experts over the tokens of all
  /// replicas and the all-to-alls that dispatch and combine them. With two-batch overlap each
  /// replica runs its step as two micro-batches (half the sequences each) and the step is the
  /// longer of the compute and the all-to-alls, plus the shorter's share of one layer. A
  /// deployment of one replica (pp 1) takes one shape and steps alone (time_s).
  double lockstep_time_s(const std::vector<StepShape>& shapes) const;

 private:
  /// The pieces of a step, each priced once: one dense and one MoE layer, the embedding, one
  /// stage-to-stage send, the output layer with sampling.
  struct Priced {
    Parts dense, moe, embed, head;
    double send_s = 0;
  };
  /// With `routed` false, the MoE layers leave out the routed experts (wide ep prices them over
  /// every replica's tokens).
  Priced price(const StepShape& s, bool routed = true) const;
  /// The whole step from its pieces: every layer, the embedding, the sends, the head.
  Parts sum(const Priced& q) const;
  /// One MoE layer's routed experts on this GPU: `tokens` routed over the expert-parallel group
  /// in all, `local` of them from this GPU's replica (wide ep: dispatched and combined).
  void routed_experts(double tokens, double local, Parts* p) const;
  void layer(const StepShape& s, bool moe, bool routed, Parts* p) const;
  void attention(const StepShape& s, Parts* p) const;
  double gemm(double m, double k, double n, double batch = 1) const;

  const ModelSpec& m_;
  Deployment d_;
  ComputeCost compute_;
  CollectiveCost comm_;
  GroupShape tp_shape_, pp_pair_, ep_shape_;
  int dense_layers_ = 0, moe_layers_ = 0;  ///< of the whole model (all stages run in turn)
};

}  // namespace parallax::serving
