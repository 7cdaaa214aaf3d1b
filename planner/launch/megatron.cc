// Megatron-LM: the arguments of pretrain_gpt.py for a plan, and the rules Megatron enforces.
//
// Flag names and rules are those of megatron/training/arguments.py (NVIDIA/Megatron-LM, 2025):
// validate_args() asserts seq-length % (2 * context-parallel-size) == 0 when cp > 1,
// --tp-comm-overlap only with --sequence-parallel, --overlap-param-gather only with the
// distributed optimizer or Megatron FSDP and with --overlap-grad-reduce, and an even layer split
// over pipeline stages unless --decoder-first/last-pipeline-num-layers or
// --pipeline-model-parallel-layout say otherwise. The interleaved schedule
// (megatron/core/pipeline_parallel/schedules.py) groups microbatches by pp and refuses a count
// that is not a multiple of pp; validate_plan already reports that one. There is no zero-bubble
// schedule flag.

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/rank_map.h"
#include "planner/launch/emitters.h"

namespace parallax::launch {
namespace {

std::string flag(const char* name, int64_t v) {
  return std::string(name) + " " + std::to_string(v);
}
std::string flag(const char* name, const std::string& v) { return std::string(name) + " " + v; }

/// Megatron's MoE layer pattern for leading dense layers: "([0]*3+[1]*58)", quoted for the shell.
std::string moe_layer_pattern(const ModelSpec& m) {
  return "'([0]*" + std::to_string(m.moe->dense_layers) + "+[1]*" +
         std::to_string(m.layers - m.moe->dense_layers) + ")'";
}

void add_attention_shape(const ModelSpec& m, std::vector<std::string>& a) {
  if (m.mla) {
    const MlaSpec& mla = *m.mla;
    a.push_back("--multi-latent-attention");
    // No --q-lora-rank means queries are projected without compression.
    if (mla.q_lora_rank > 0) a.push_back(flag("--q-lora-rank", mla.q_lora_rank));
    a.push_back(flag("--kv-lora-rank", mla.kv_lora_rank));
    // Megatron's --qk-head-dim is the part without rotary embedding.
    a.push_back(flag("--qk-head-dim", mla.qk_nope_head_dim));
    a.push_back(flag("--qk-pos-emb-head-dim", mla.qk_rope_head_dim));
    a.push_back(flag("--v-head-dim", mla.v_head_dim));
    return;
  }
  if (m.kv_heads < m.heads) {
    a.push_back("--group-query-attention");
    a.push_back(flag("--num-query-groups", m.kv_heads));
  }
  if (m.hidden % m.heads != 0 || m.head_dim != m.hidden / m.heads)
    a.push_back(flag("--kv-channels", m.head_dim));
}

/// The model's numerics where it gives them (Megatron's defaults otherwise): QK norm, rotary
/// base and scaling, norm epsilon.
void add_numerics(const ModelSpec& m, std::vector<std::string>& a) {
  if (m.qk_norm) a.push_back("--qk-layernorm");
  if (m.rope_theta > 0) a.push_back(flag("--rotary-base", std::llround(m.rope_theta)));
  if (m.norm_eps > 0) a.push_back("--norm-epsilon " + number_text(m.norm_eps));
  if (m.rope_scaling == RopeScaling::kLlama3) {
    a.push_back("--use-rope-scaling");
    a.push_back("--rope-scaling-factor " + number_text(m.rope_scaling_factor));
  } else if (m.rope_scaling == RopeScaling::kYarn) {
    // MLA applies YaRN by default (--rope-type); the factor is its --rotary-scaling-factor.
    a.push_back("--rotary-scaling-factor " + number_text(m.rope_scaling_factor));
  }
}

/// The router as the model defines it (--moe-router-*).
void add_router(const RouterSpec& r, std::vector<std::string>& a) {
  if (r.score == RouterScore::kSigmoid) a.push_back("--moe-router-score-function sigmoid");
  if (r.pre_softmax) a.push_back("--moe-router-pre-softmax");
  if (r.expert_bias) a.push_back("--moe-router-enable-expert-bias");
  if (r.topk_scaling != 1.0)
    a.push_back("--moe-router-topk-scaling-factor " + number_text(r.topk_scaling));
  if (r.groups > 0) {
    a.push_back(flag("--moe-router-num-groups", r.groups));
    a.push_back(flag("--moe-router-group-topk", r.group_topk));
  }
}

/// How the plan runs the MoE layers: grouped GEMMs and TE's fused router and permutation kernels
/// (which the simulation prices), the token dispatcher, node-limited routing, token dropping and
/// the EP-overlapping combined 1F1B.
void add_moe_plan(const LaunchRequest& r, std::vector<std::string>& a) {
  const ParallelPlan& p = r.plan;
  a.push_back("--moe-grouped-gemm");
  a.push_back("--moe-router-fusion");
  a.push_back("--moe-permute-fusion");
  // The plan's dispatcher (Megatron's default is allgather; the plan's alltoall).
  if (p.ep > 1) {
    a.push_back(flag("--moe-token-dispatcher-type", to_string(p.moe_dispatcher)));
    if (p.moe_dispatcher == MoeDispatcher::kFlex) a.push_back("--moe-enable-deepep");
  }
  if (p.moe_max_nodes > 0 && r.model.moe->router.groups == 0) {
    // Node-limited routing as group-limited routing with one group per node of the EP group
    // (transformer_config.py, moe_router_num_groups: "set equal to number of nodes in EP group").
    const GroupShape ep = RankMap(p, r.cluster.hw.scale_up_domain).shape(GroupKind::kEp);
    a.push_back(flag("--moe-router-num-groups", ep.domains));
    a.push_back(flag("--moe-router-group-topk", std::min(p.moe_max_nodes, ep.domains)));
  }
  if (p.moe_capacity_factor > 0)
    a.push_back("--moe-expert-capacity-factor " + number_text(p.moe_capacity_factor));
  if (p.overlap_moe_comm) a.push_back("--overlap-moe-expert-parallel-comm");
}

void add_model_shape(const LaunchRequest& r, std::vector<std::string>& a) {
  const ModelSpec& m = r.model;
  a.push_back(flag("--num-layers", m.layers));
  a.push_back(flag("--hidden-size", m.hidden));
  a.push_back(flag("--ffn-hidden-size", m.ffn_hidden));
  a.push_back(flag("--num-attention-heads", m.heads));
  add_attention_shape(m, a);
  a.push_back(flag("--seq-length", r.plan.seq_len));
  a.push_back(flag("--max-position-embeddings", r.plan.seq_len));
  // ModelSpec names no norm or position embedding: SwiGLU models are Llama-style (RMSNorm, RoPE,
  // no biases), GELU models GPT-style (LayerNorm, learned positions, biases: Megatron's defaults).
  if (m.ffn_act == FfnAct::kSwiglu) {
    a.push_back("--swiglu");
    a.push_back("--normalization RMSNorm");
    a.push_back("--position-embedding-type rope");
    a.push_back("--disable-bias-linear");
  } else {
    a.push_back("--normalization LayerNorm");
    a.push_back("--position-embedding-type learned_absolute");
  }
  if (!m.tied_embeddings) a.push_back("--untie-embeddings-and-output-weights");
  add_numerics(m, a);
  // Megatron's defaults are 0.1; the model's own value (0 for modern models) goes in explicitly.
  a.push_back(flag("--attention-dropout", number_text(m.dropout)));
  a.push_back(flag("--hidden-dropout", number_text(m.dropout)));
}

void add_moe(const LaunchRequest& r, std::vector<std::string>& a) {
  const ModelSpec& m = r.model;
  if (!m.moe) return;
  const MoeSpec& e = *m.moe;
  a.push_back(flag("--num-experts", e.experts));
  a.push_back(flag("--moe-router-topk", e.top_k));
  a.push_back(flag("--moe-ffn-hidden-size", e.expert_ffn_hidden));
  // Megatron takes the total width of all shared experts.
  if (e.shared_experts > 0)
    a.push_back(flag("--moe-shared-expert-intermediate-size",
                     static_cast<int64_t>(e.shared_experts) * e.expert_ffn_hidden));
  if (e.dense_layers > 0) a.push_back(flag("--moe-layer-freq", moe_layer_pattern(m)));
  add_router(e.router, a);
  add_moe_plan(r, a);
  if (m.mtp_layers > 0) a.push_back(flag("--mtp-num-layers", m.mtp_layers));
}

void add_parallelism(const LaunchRequest& r, std::vector<std::string>& a) {
  const ParallelPlan& p = r.plan;
  a.push_back(flag("--tensor-model-parallel-size", p.tp));
  a.push_back(flag("--pipeline-model-parallel-size", p.pp));
  if (p.vpp > 1)
    a.push_back(flag("--num-layers-per-virtual-pipeline-stage", r.model.layers / (p.pp * p.vpp)));
  a.push_back(flag("--context-parallel-size", p.cp));
  if (p.cp > 1)
    a.push_back(flag("--cp-comm-type", p.cp_comm == CpComm::kRing ? "p2p" : "all_gather"));
  // Megatron turns sequence parallelism off by itself when tp = 1.
  if (p.sequence_parallel && p.tp > 1) a.push_back("--sequence-parallel");
  if (r.model.moe) {
    a.push_back(flag("--expert-model-parallel-size", p.ep));
    a.push_back(flag("--expert-tensor-parallel-size", p.etp));
  }
  a.push_back(flag("--micro-batch-size", p.micro_batch));
  a.push_back(flag("--global-batch-size", p.global_batch));
}

/// The linear layers' recipe (arguments.py, core_v0.15.0: --fp8-format, --fp8-recipe with
/// choices tensorwise, delayed, mxfp8, blockwise; --fp4-format e2m1 with --fp4-recipe nvfp4,
/// Transformer Engine >= 2.7; --first-last-layers-bf16 with --num-layers-at-start-in-bf16 and
/// --num-layers-at-end-in-bf16, honoured for fp4 by megatron/core/fp4_utils.py get_fp4_context).
void add_low_precision(const ParallelPlan& p, std::vector<std::string>& a) {
  switch (p.precision) {
    case Precision::kFp8:
      a.push_back("--fp8-format hybrid");
      a.push_back("--fp8-amax-history-len 1024");
      a.push_back("--fp8-amax-compute-algo max");
      return;
    case Precision::kMxfp8:
      // E4M3 for every tensor: the format of TE's MXFP8BlockScaling (no pure E5M2).
      a.push_back("--fp8-format e4m3");
      a.push_back("--fp8-recipe mxfp8");
      return;
    case Precision::kNvfp4:
      a.push_back("--fp4-format e2m1");
      a.push_back("--fp4-recipe nvfp4");
      // The layers the simulation kept in bf16 (recipe_keeps_layer_in_bf16).
      a.push_back("--first-last-layers-bf16");
      a.push_back(flag("--num-layers-at-start-in-bf16", kNvfp4Bf16LayersAtStart));
      a.push_back(flag("--num-layers-at-end-in-bf16", kNvfp4Bf16LayersAtEnd));
      return;
    case Precision::kBf16:
    case Precision::kFp32:
      return;
  }
}

void add_training(const LaunchRequest& r, std::vector<std::string>& a) {
  const ParallelPlan& p = r.plan;
  if (p.recompute == Recompute::kSelective) {
    a.push_back("--recompute-granularity selective");
  } else if (p.recompute == Recompute::kFull) {
    a.push_back("--recompute-granularity full");
    a.push_back("--recompute-method uniform");
    a.push_back("--recompute-num-layers 1");
  }
  if (uses_megatron_fsdp(p)) {
    a.push_back("--use-megatron-fsdp");
    a.push_back(flag("--data-parallel-sharding-strategy",
                     p.shards_params() ? "optim_grads_params" : "optim_grads"));
    a.push_back("--ckpt-format fsdp_dtensor");
  } else if (p.zero_stage == 1) {
    a.push_back("--use-distributed-optimizer");
  }
  if (p.overlap_grad_reduce) a.push_back("--overlap-grad-reduce");
  if (p.overlap_param_gather && p.shards_optimizer()) a.push_back("--overlap-param-gather");
  if (p.overlap_tp_comm && p.tp > 1) a.push_back("--tp-comm-overlap");
  a.push_back("--bf16");
  add_low_precision(p, a);
  // Flash attention kernels need equal QK and V head dims; MLA (192 vs 128) takes cuDNN's fused
  // attention instead.
  if (p.attention == AttentionImpl::kUnfused)
    a.push_back("--attention-backend unfused");
  else
    a.push_back(flag("--attention-backend", r.model.mla ? "fused" : "flash"));
}

/// transformer_config.py's asserts on the MoE settings the plan can carry.
void check_megatron_moe(const LaunchRequest& r, RuleSink& sink) {
  const ParallelPlan& p = r.plan;
  const ModelSpec& m = r.model;
  if (!m.moe) return;
  if (p.overlap_moe_comm && m.mtp_layers > 1)
    sink.refuse("overlap-moe-comm",
                "Megatron-LM overlaps expert-parallel communication with at most one "
                "multi-token-prediction layer, the model has " +
                    std::to_string(m.mtp_layers),
                "leave --overlap-moe-comm out");
  if (p.moe_max_nodes > 0 && m.moe->router.groups > 0)
    sink.refuse("moe-max-nodes",
                "the model already routes by its own expert groups (" +
                    std::to_string(m.moe->router.groups) +
                    "), and Megatron-LM takes one --moe-router-num-groups",
                "leave --moe-max-nodes out: the model's group_topk limits the nodes");
  if (p.moe_max_nodes > 0 && p.ep > 1) {
    const int nodes = RankMap(p, r.cluster.hw.scale_up_domain).shape(GroupKind::kEp).domains;
    if (m.moe->experts % nodes != 0)
      sink.refuse("moe-max-nodes",
                  "node-limited routing groups the experts by node, and the " +
                      std::to_string(m.moe->experts) + " experts do not split over " +
                      std::to_string(nodes) + " nodes of the expert-parallel group",
                  "an ep whose nodes divide the experts");
  }
}

}  // namespace

bool uses_megatron_fsdp(const ParallelPlan& p) { return p.fsdp || p.zero_stage >= 2; }

void check_megatron(const LaunchRequest& r, RuleSink& sink) {
  const ParallelPlan& p = r.plan;
  const ModelSpec& m = r.model;
  if (m.rope_scaling == RopeScaling::kYarn && !m.mla)
    sink.refuse_at("model/rope_scaling",
                   "Megatron-LM core_v0.15 applies YaRN rotary scaling only to MLA models",
                   "--position-embedding-type yarn exists from core_v0.18");
  if (p.recompute == Recompute::kSelectiveOp)
    sink.refuse("recompute",
                "Megatron-LM has no per-op selective checkpointing (selective-op is PyTorch's, "
                "as TorchTitan runs it)",
                "use --recompute selective (--recompute-granularity selective: the attention "
                "core), full or none");
  if (p.schedule == ScheduleKind::kZeroBubbleH1)
    sink.refuse("schedule", "Megatron-LM has no zero-bubble (ZB-H1) pipeline schedule",
                "its schedules are 1F1B and interleaved 1F1B: use --schedule 1f1b or interleaved");
  check_megatron_moe(r, sink);
  // pp*vpp > layers is validate_plan's to report.
  if (p.pp > 1 && p.pp * p.vpp <= m.layers && !even_stage_split(m, p))
    sink.refuse("pp",
                "Megatron-LM splits layers=" + std::to_string(m.layers) + " evenly over pp*vpp=" +
                    std::to_string(p.pp * p.vpp) + " stages, and they do not divide",
                "pp*vpp in " + divisors_text(m.layers) +
                    "; uneven splits need --decoder-first-pipeline-num-layers/"
                    "--decoder-last-pipeline-num-layers or --pipeline-model-parallel-layout, "
                    "which parallax does not emit");
  // seq % cp != 0 is validate_plan's to report.
  if (p.cp > 1 && p.seq_len % p.cp == 0 && p.seq_len % (2 * p.cp) != 0)
    sink.refuse("seq",
                "Megatron-LM needs seq=" + std::to_string(p.seq_len) +
                    " to be a multiple of 2*cp=" + std::to_string(2 * p.cp),
                "each context-parallel rank holds one early and one late chunk of the sequence "
                "so that causal attention work is balanced");
  if (p.overlap_tp_comm && p.tp > 1 && !p.sequence_parallel)
    sink.refuse("sp",
                "Megatron-LM overlaps TP communication (--tp-comm-overlap) only with "
                "sequence parallelism",
                "use --sp 1, or turn TP communication overlap off");
  // Megatron FSDP's v2 adapter (megatron/core/distributed/fsdp/mcore_fsdp_adapter.py,
  // _validate_config) refuses pipeline and context parallelism; v1 does not check, and no
  // functional test of Megatron-LM runs either with it (tests/functional_tests: TP and EP only).
  if (uses_megatron_fsdp(p) && (p.pp > 1 || p.cp > 1))
    sink.refuse(p.pp > 1 ? "pp" : "cp",
                "Megatron FSDP (ZeRO-2/3, --use-megatron-fsdp) runs without pipeline and "
                "context parallelism, got pp=" +
                    std::to_string(p.pp) + " cp=" + std::to_string(p.cp),
                "use zero <= 1 (the distributed optimizer) with pp or cp, or pp=1 and cp=1");
  if (p.overlap_param_gather && p.shards_optimizer() && !p.overlap_grad_reduce)
    sink.refuse("overlap_param_gather",
                "Megatron-LM overlaps the parameter all-gather (--overlap-param-gather) only "
                "together with --overlap-grad-reduce",
                "turn gradient-reduce overlap on, or parameter-gather overlap off");
}

std::vector<std::string> megatron_args(const LaunchRequest& r) {
  std::vector<std::string> a;
  add_model_shape(r, a);
  add_moe(r, a);
  add_parallelism(r, a);
  add_training(r, a);
  return a;
}

std::vector<std::string> megatron_env(const LaunchRequest& r) {
  const ParallelPlan& p = r.plan;
  // arguments.py asserts it with tp > 1 or cp > 1 before Blackwell, except under Megatron FSDP,
  // which asserts the opposite.
  if ((p.tp > 1 || p.cp > 1) && !uses_megatron_fsdp(p))
    return {"export CUDA_DEVICE_MAX_CONNECTIONS=1"};
  return {};
}

std::vector<std::string> megatron_common_notes(const LaunchRequest& r) {
  std::vector<std::string> notes = {
      "Data, tokenizer (vocabulary " + std::to_string(r.model.vocab) +
      "), optimizer, learning-rate and checkpoint arguments are not part of the plan: add "
      "your own."};
  const ModelSpec& m = r.model;
  if (m.rope_theta <= 0 || m.norm_eps <= 0)
    notes.push_back(
        "The model spec gives no rotary base or norm epsilon: add the model's own "
        "(Megatron-LM's defaults otherwise apply).");
  if (m.rope_scaling == RopeScaling::kYarn)
    notes.push_back(
        "YaRN's other parameters (--mscale, --mscale-all-dim, beta) are not in the model spec: "
        "add the model's own (DeepSeek-V3: --mscale 1.0 --mscale-all-dim 1.0).");
  if (m.moe)
    notes.push_back(
        "The load-balancing loss and its coefficient are training choices, not part of the "
        "plan: add your own.");
  const ParallelPlan& p = r.plan;
  if (uses_megatron_fsdp(p))
    notes.push_back(std::string(p.shards_params() ? "ZeRO-3/FSDP" : "ZeRO-2") +
                    " runs as Megatron FSDP: it saves fsdp_dtensor checkpoints and needs "
                    "CUDA_DEVICE_MAX_CONNECTIONS unset or above 1.");
  return notes;
}

std::vector<std::string> megatron_notes(const LaunchRequest& r) {
  std::vector<std::string> notes = megatron_common_notes(r);
  if (!megatron_env(r).empty())
    notes.push_back(
        "Set CUDA_DEVICE_MAX_CONNECTIONS=1: Megatron-LM requires it with tp > 1 or "
        "cp > 1 (before Blackwell).");
  return notes;
}

std::string emit_megatron(const LaunchRequest& r) {
  return "# Megatron-LM pretrain_gpt.py arguments (they follow `pretrain_gpt.py \\` in a "
         "launcher): " +
         plan_summary(r) + "\n" + comment_lines(megatron_notes(r)) +
         shell_continued(megatron_args(r), 0);
}

}  // namespace parallax::launch
