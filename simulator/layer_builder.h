#pragma once
/// LayerBuilder: the operators of one transformer layer on one rank for one microbatch (attention,
/// the dense MLP, the MoE block, the embedding and output layers, the multi-token-prediction
/// input), priced by cost/, forward and the backward that mirrors it. Private to the lowering:
/// lower.cc builds the stages with it, layer_builder.cc holds its primitives and dense blocks,
/// moe_block.cc its MoE block.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/model_spec.h"
#include "core/parallel_plan.h"
#include "core/rank_map.h"
#include "core/units.h"
#include "simulator/cost/collective_cost.h"
#include "simulator/cost/compute_cost.h"
#include "simulator/lower.h"
#include "simulator/moe_layer.h"

namespace parallax::lowering {

/// Bytes of one activation (and gathered parameter, and p2p) element: bf16, which fp8
/// recipes keep for activations too, or 4 in an fp32 plan.
double act_bytes(const ParallelPlan& p);
inline constexpr double kFp32 = kFp32Bytes;

/// Sizes one rank sees for one microbatch.
struct Dims {
  double tokens = 0;     ///< t = mbs * seq / cp
  double tokens_sp = 0;  ///< t / tp with sequence parallelism, else t
  double h = 0;
  int tp = 1;
  double q_heads = 0;   ///< query heads on this rank
  double kv_heads = 0;  ///< KV heads on this rank (replicated when tp > kv_heads)
  double d_qk = 0, d_v = 0;
};

/// The one derivation of the per-rank sizes that lowering and the memory formulas share.
Dims rank_dims(const ModelSpec& m, const ParallelPlan& p);

/// The K and V heads attention runs on: TorchTitan (AttentionImpl::kFlash2, PyTorch's SDPA)
/// repeats K and V to the query heads before the call, so its attention inputs, the K and V that
/// context parallelism exchanges and what SDPA saves for backward have the query heads.
double attention_kv_heads(const Dims& d, const ParallelPlan& p);

/// The ops of one pass, built op by op; backward mirrors forward.
class LayerBuilder {
 public:
  LayerBuilder(const ModelSpec& m, const ParallelPlan& p, const HwProfile& hw, const RankMap& ranks,
               TableUse* use)
      : m_(m),
        p_(p),
        compute_(hw, use),
        comm_(hw, use),
        tp_shape_(ranks.shape(GroupKind::kTp)),
        cp_shape_(ranks.shape(GroupKind::kCp)),
        ep_shape_(ranks.shape(GroupKind::kEp)),
        etp_shape_(ranks.shape(GroupKind::kEtp)),
        etp_ep_shape_(ranks.shape(GroupKind::kEtpEp)),
        fsdp_shape_(ranks.shape(GroupKind::kDpCp)),
        d_(rank_dims(m, p)),
        act_(act_bytes(p)),
        microbatches_(std::max<int64_t>(1, p.num_microbatches())),
        linear_(p.precision) {}

  const Dims& dims() const { return d_; }

  // --- primitives -------------------------------------------------------------------------------
  /// A GEMM [m x k] x [k x n]; in backward, the data-gradient and weight-gradient GEMMs (the
  /// latter is W in zero-bubble schedules). `kind`: a linear layer (in the layer's recipe: fp8,
  /// MXFP8 or NVFP4 when the plan is, see set_layer_precision), a bf16-only linear layer (logits,
  /// router: the recipes keep them in bf16), attention's batched GEMMs (bf16, and both backward
  /// GEMMs are input gradients), or the routed experts' linear layers, `batch` of them run as a
  /// grouped GEMM (ComputeCost::grouped_gemm) in the layer's recipe.
  enum class GemmKind { kLinear, kLinearBf16, kAttention, kExperts };

  /// The precision of the linear layers lowered next: the plan's, or bf16 for a layer its
  /// recipe keeps in higher precision (recipe_keeps_layer_in_bf16).
  void set_layer_precision(Precision p) { linear_ = p; }

  void gemm(const char* name, double m, double k, double n, double batch = 1,
            GemmKind kind = GemmKind::kLinear);

  /// fp8 recipes keep attention in bf16; an fp32 plan runs it in fp32.
  Precision attention_precision() const {
    return p_.precision == Precision::kFp32 ? Precision::kFp32 : Precision::kBf16;
  }

  void memory(const char* name, double bytes_fwd, double bwd_factor = 2.0);

  /// An op PyTorch eager runs as a chain of memory-bound kernels over `elems` elements: the bytes
  /// per element of each forward kernel and of each kernel its autograd runs in backward.
  void eager_kernels(const char* name, double elems, const std::vector<double>& fwd_bytes,
                     const std::vector<double>& bwd_bytes);

  /// RMSNorm over rows x width. Fused: the kernel reads and writes the activation; backward reads
  /// it and the gradient and writes the input gradient (twice the bytes). Eager: torch.nn.RMSNorm
  /// is ATen's composite rms_norm, one kernel per op: cast to fp32 (a + 4 bytes per element for
  /// activations of a bytes), square (4 + 4), mean (4), scale by the reciprocal root (4 + 4),
  /// cast back (4 + a), times the weight (2a): 36 bytes in bf16. Its autograd replays each op's
  /// backward: the weight product (2a) and the weight gradient (product 3a, sum a), the casts
  /// (a + 4, 4 + a), the scale's two gradients (4 + 4; product 12, sum 4), the mean's (4), the
  /// square's (8 + 12) and the sum of the two paths into the input (12): 84 bytes in bf16. An
  /// fp32 plan has no casts.
  void norm(const char* name, double rows, double width);

  /// Rotary embeddings on this rank's query and key heads. Fused: read and write each element.
  /// Eager (TorchTitan's apply_rotary_emb): cast to fp32 (a + 4), complex product with the
  /// frequencies (4 + 4), cast back (4 + a), and the same three in backward.
  void rope(double elems);

  /// The MLP activation over rows x width (width: the up projection's output per branch). Fused
  /// SwiGLU reads gate and up and writes their product (3a; backward twice that); GELU reads and
  /// writes (2a). Eager SwiGLU (silu(gate) * up): silu (2a) and the product (3a); backward the
  /// product's two gradients (3a each) and silu's (3a). Eager GELU: 2a, backward 3a.
  void activation(const char* name, double elems, bool glu);

  void attention();

  /// K and V of the whole sequence reach every context-parallel rank.
  void context_parallel_exchange(double attn_fwd_s, double attn_bwd_s);

  /// Tensor-parallel communication entering (`gather`) or leaving (`reduce`) a TP region.
  /// With SP: all-gather / reduce-scatter; without: identity / all-reduce (forward), mirrored in
  /// backward. With TP comm overlap the collective hides behind its neighbouring GEMM.
  void tp_enter(const char* name);

  /// Call right after the GEMM that follows tp_enter.
  void settle_enter();

  /// Leaving a TP region after a row-parallel GEMM.
  void tp_exit(const char* name);

  /// Expert-parallel communication taking `fwd_s` in forward and `bwd_s` in its backward mirror.
  void ep_comm(const char* name, double fwd_s, double bwd_s);
  void all_to_all(const char* name, double bytes);

  /// A collective over the expert-tensor-parallel group in forward and its mirror in backward.
  void etp_collective(const char* name, CollectiveOp fwd, CollectiveOp bwd, double bytes);

  /// Residual add after a block (bias-dropout-add when the model has dropout: it also writes a
  /// 1-byte mask, which backward reads).
  void residual_add(double tokens);

  // --- blocks -----------------------------------------------------------------------------------
  void attention_block();

  void dense_mlp(int64_t width);

  // --- MoE block (Megatron-LM's MoELayer: router, dispatch, experts, combine) ------------------
  void moe_mlp();

  /// Megatron's --moe-permute-fusion and --moe-router-fusion (TE's fused kernels), which the
  /// Megatron emitter turns on; PyTorch eager runs each op as a kernel.
  bool fused_moe_ops() const { return !p_.eager; }

  void kernel_chain(const char* name, const KernelChain& c);

  /// The dispatchers copy the per-expert token counts to the host (tokens_per_expert.cpu(), or
  /// DeepEP's received counts): the stream drains and the next kernel waits for its launch.
  void host_sync();

  /// Token dispatch by the plan's dispatcher (token_dispatcher.py), up to the expert input of
  /// `rows_in` copies; returns the distinct tokens the rank received (the rows unpermute writes).
  double moe_dispatch(double t, double rows_in);

  /// The mirror of moe_dispatch after the experts.
  void moe_combine(double t, double rows_in, double received);

  /// DeepEP's normal kernels for `t` tokens of this rank (CollectiveCost::deepep): each token
  /// once per distinct destination node over RDMA (the other nodes' share of the nodes it
  /// reaches) and once per distinct destination rank over NVLink, except the GPU that received
  /// it; the busiest rank's load scaled by the plan's imbalance. The combine moves the same rows
  /// back, and each backward mirrors its forward. Returns the distinct tokens the busiest rank
  /// receives.
  double deepep_exchange(const char* name, double t, double rows_in);

  /// The input of a multi-token-prediction module (DeepSeek-V3 Sec. 2.2; Megatron's
  /// MultiTokenPredictionLayer): the next tokens' embeddings from the shared table, the RMSNorms
  /// of the previous depth's hidden state and of those embeddings, and the projection of their
  /// concatenation [2h -> h], replicated over the TP ranks and run on each rank's tokens.
  void mtp_input();

  void embedding();

  void output_layer();

  /// FSDP / ZeRO-3: gather this layer's parameters before its forward and backward, reduce-
  /// scatter its gradients after backward; each overlaps with the neighbouring layer's compute.
  /// Only without pipelining: with pp > 1 the stage stays gathered across microbatches and
  /// reduces once per step (simulate's data-parallel sync).
  void fsdp_layer(double params);

  /// Moves the ops built so far into the passes, settling FSDP overlap against layer compute.
  /// `sac_share`: under selective-op recompute, the share of each GEMM op's forward recomputed.
  void flush_layer(PassCost* fwd, PassCost* bwd_in, PassCost* bwd_w, PassCost* recompute_into,
                   Recompute rc, const std::vector<std::pair<std::string, double>>& sac_share = {});

 private:
  static int64_t ll(double x) { return static_cast<int64_t>(std::llround(std::max(1.0, x))); }
  static double sum(const std::vector<OpCost>& ops) {
    double s = 0;
    for (const auto& o : ops)
      if (o.category == CostCategory::kCompute) s += o.time_s;
    return s;
  }
  OpCost compute_op(std::string name, const KernelTime& k) const {
    return OpCost{std::move(name), CostCategory::kCompute, k.time_s, k.time_s, k.flops};
  }
  void push_comm(std::vector<OpCost>* ops, std::string name, CostCategory c, double busy,
                 double exposed);
  /// Exposed part of a TP collective next to a GEMM of duration g: all of it without overlap;
  /// with overlap, the first of tp chunks plus whatever the GEMM cannot hide.
  double overlap(double comm, double g) const;
  /// Cost on the compute stream of `comm` run beside `compute`: the part that does not fit,
  /// plus the slowdown of the compute it overlaps (the SMs the communication kernels occupy).
  double hidden(double comm, double compute) const {
    return std::max(0.0, comm - compute) + comm_.overlap_slowdown() * std::min(comm, compute);
  }

  const ModelSpec& m_;
  const ParallelPlan& p_;
  ComputeCost compute_;
  CollectiveCost comm_;
  GroupShape tp_shape_, cp_shape_, ep_shape_, etp_shape_, etp_ep_shape_, fsdp_shape_;
  Dims d_;
  double act_ = kBf16Bytes;  ///< act_bytes(p_)
  std::vector<OpCost> fwd_, bwd_in_, bwd_w_;
  std::vector<OpCost> core_fwd_;  ///< the attention core, recomputed by selective recompute
  std::pair<std::string, double> pending_fwd_, pending_bwd_;
  double regather_s_ = 0;
  double last_gemm_fwd_s_ = 0, last_gemm_bwd_s_ = 0, last_gemm_wgrad_s_ = 0;
  int64_t microbatches_ = 1;  ///< microbatches that reuse one fp8 weight cast
  Precision linear_;          ///< the current layer's linear-layer precision
  double fsdp_fwd_comm_ = 0, fsdp_bwd_comm_ = 0;
};

}  // namespace parallax::lowering
