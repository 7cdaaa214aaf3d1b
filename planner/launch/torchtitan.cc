// TorchTitan: the [training], [parallelism], [activation_checkpoint], [compile] (unless the plan
// is eager; always for fp8, MXFP8 or async TP) and, for fp8 or MXFP8, [quantize.linear.float8]
// or [quantize.linear.mx] sections of a TOML job config, and TorchTitan's rules.
//
// Field names are those of the TOML-era JobConfig, torchtitan/config/job_config.py
// (pytorch/torchtitan, late 2025): Parallelism.data_parallel_replicate_degree,
// data_parallel_shard_degree, tensor_parallel_degree, enable_async_tensor_parallel (effective only
// with compile), pipeline_parallel_degree, module_fqns_per_model_part,
// pipeline_parallel_schedule, pipeline_parallel_microbatch_size, context_parallel_degree,
// context_parallel_rotate_method ("allgather" | "alltoall"), expert_parallel_degree,
// expert_tensor_parallel_degree (1 or tp); Training.local_batch_size, global_batch_size, seq_len;
// ActivationCheckpoint.mode ("selective" | "full" | "none"), selective_ac_option ("op");
// Compile.enable, components; Float8Linear under [quantize.linear.float8], enabled by the
// "quantize.linear.float8" model converter. Schedules come from
// torch.distributed.pipelining.get_schedule_class: single-stage 1F1B and GPipe, multi-stage
// Interleaved1F1B, InterleavedZeroBubble, ZBVZeroBubble and DualPipeV. TorchTitan's tensor
// parallel plan always shards the sequence between TP regions (SequenceParallel) and shards data
// parallelism only with FSDP2 (parameters, gradients and optimizer state together).

#include <string>
#include <vector>

#include "planner/launch/emitters.h"

namespace parallax::launch {
namespace {

/// Replicated data parallelism (DDP) unless the plan shards parameters (ZeRO-3 or FSDP).
bool fsdp_sharded(const ParallelPlan& p) { return p.shards_params(); }

std::string training_section(const LaunchRequest& r) {
  const ParallelPlan& p = r.plan;
  // With pipelining the local batch is every microbatch of one step (TorchTitan splits it into
  // pipeline_parallel_microbatch_size pieces); without, it is one microbatch and TorchTitan
  // accumulates global_batch_size / (local_batch_size * dp) of them.
  const int64_t local = p.pp > 1 ? p.global_batch / p.dp : p.micro_batch;
  return "[training]\nlocal_batch_size = " + std::to_string(local) +
         "\nglobal_batch_size = " + std::to_string(p.global_batch) +
         "\nseq_len = " + std::to_string(p.seq_len) + "\n";
}

std::string parallelism_section(const LaunchRequest& r) {
  const ParallelPlan& p = r.plan;
  const bool shard = fsdp_sharded(p);
  std::string s = "[parallelism]\n";
  s += "data_parallel_replicate_degree = " + std::to_string(shard ? 1 : p.dp) + "\n";
  s += "data_parallel_shard_degree = " + std::to_string(shard ? p.dp : 1) + "\n";
  s += "tensor_parallel_degree = " + std::to_string(p.tp) + "\n";
  if (p.tp > 1 && p.overlap_tp_comm) s += "enable_async_tensor_parallel = true\n";
  s += "context_parallel_degree = " + std::to_string(p.cp) + "\n";
  // "alltoall" passes KV shards around the ring; "allgather" gathers them all at once.
  if (p.cp > 1)
    s += std::string("context_parallel_rotate_method = ") +
         (p.cp_comm == CpComm::kRing ? "\"alltoall\"" : "\"allgather\"") + "\n";
  s += "pipeline_parallel_degree = " + std::to_string(p.pp) + "\n";
  if (p.pp > 1) {
    s += std::string("pipeline_parallel_schedule = ") +
         (p.vpp > 1 ? "\"Interleaved1F1B\"" : "\"1F1B\"") + "\n";
    s += "pipeline_parallel_microbatch_size = " + std::to_string(p.micro_batch) + "\n";
    s += "module_fqns_per_model_part = " + stage_module_names(r, "output", 2) + "\n";
  }
  if (r.model.moe) {
    s += "expert_parallel_degree = " + std::to_string(p.ep) + "\n";
    s += "expert_tensor_parallel_degree = " + std::to_string(p.etp) + "\n";
    if (p.ep > 1 && p.moe_dispatcher == MoeDispatcher::kFlex)
      s += "expert_parallel_comm_backend = \"deepep\"\n";
  }
  return s;
}

std::string activation_checkpoint_section(const ParallelPlan& p) {
  std::string s = "[activation_checkpoint]\nmode = ";
  switch (p.recompute) {
    case Recompute::kNone:
      return s + "\"none\"\n";
    case Recompute::kSelective:  // the nearest TorchTitan has; torchtitan_notes says so
    case Recompute::kSelectiveOp:
      return s + "\"selective\"\nselective_ac_option = \"op\"\n";
    case Recompute::kFull:
      return s + "\"full\"\n";
  }
  return s + "\"none\"\n";
}

/// Whether the plan's linear layers run a quantized recipe, which TorchTitan runs only under
/// torch.compile.
bool quantized(const ParallelPlan& p) {
  return p.precision == Precision::kFp8 || is_block_scaled(p.precision);
}

std::string fp8_sections(const ParallelPlan& p) {
  std::string s = "[model]\nconverters = [\"quantize.linear.float8\"]\n\n";
  s += "[quantize.linear.float8]\n";
  if (fsdp_sharded(p)) {
    s += "enable_fsdp_float8_all_gather = true\n";
    s += "precompute_float8_dynamic_scale_for_fsdp = true\n";
  }
  return s + "filter_fqns = [\"output\"]\n";
}

/// MXFP8 (torchtitan/config/job_config.py v0.2.2, MXLinear and MXGroupedMM; converters
/// "quantize.linear.mx" and "quantize.grouped_mm.mx", components/quantization/mx.py): torchao's
/// cuBLAS MXFP8 GEMM, the dim-1 (column-wise) cast on its CUDA kernel, which the config
/// recommends; the output layer stays in bf16, as in the simulation.
std::string mx_sections(const ModelSpec& m) {
  std::string s = "[model]\nconverters = [\"quantize.linear.mx\"" +
                  std::string(m.moe ? ", \"quantize.grouped_mm.mx\"" : "") + "]\n\n";
  s += "[quantize.linear.mx]\nrecipe_name = \"mxfp8_cublas\"\n";
  s += "mxfp8_dim1_cast_kernel_choice = \"cuda\"\nfilter_fqns = [\"output\"]\n";
  if (m.moe) s += "\n[quantize.grouped_mm.mx]\nrecipe_name = \"mxfp8\"\nfqns = [\"experts\"]\n";
  return s;
}

}  // namespace

void check_torchtitan(const LaunchRequest& r, RuleSink& sink) {
  const ParallelPlan& p = r.plan;
  if (!p.fsdp && (p.zero_stage == 1 || p.zero_stage == 2))
    sink.refuse("zero",
                "TorchTitan shards data parallelism only with FSDP2 (parameters, gradients and "
                "optimizer state together), got zero=" +
                    std::to_string(p.zero_stage),
                "use --fsdp 1 (data_parallel_shard_degree) or zero=0 (DDP, "
                "data_parallel_replicate_degree)");
  // torchtitan/models/llama3/infra/parallelize.py (v0.2.2): the DDP branch raises "DDP has not
  // supported > 1D parallelism" unless data parallelism spans the whole world. Context
  // parallelism takes the FSDP branch (ParallelDims.fsdp_enabled includes cp_enabled).
  if (!fsdp_sharded(p) && p.cp == 1 && p.dp > 1 && (p.tp > 1 || p.pp > 1 || p.ep > 1))
    sink.refuse("zero",
                "TorchTitan's DDP (data_parallel_replicate_degree without sharding) runs alone: "
                "it raises \"DDP has not supported > 1D parallelism\" with tp=" +
                    std::to_string(p.tp) + " pp=" + std::to_string(p.pp) +
                    " ep=" + std::to_string(p.ep),
                "use --fsdp 1 (data_parallel_shard_degree), or tp=pp=ep=1");
  if (r.model.ffn_act != FfnAct::kSwiglu)
    sink.refuse_at("model/ffn_act",
                   "TorchTitan's decoders (Llama 3, Qwen3, DeepSeek-V3, gpt-oss) are SwiGLU "
                   "models; it has no GELU (GPT-style) decoder",
                   "use --target megatron");
  // torchtitan/models (v0.2.2): its MoE decoders are DeepSeek-V3 (MLA), Qwen3 (QK norm), Llama 4
  // and gpt-oss; a Mixtral-style model (GQA without QK norm) has no model definition there.
  if (r.model.moe && !r.model.mla && !r.model.qk_norm)
    sink.refuse_at(
        "model/moe",
        "TorchTitan has no MoE model of this architecture (GQA experts without QK "
        "norm, as Mixtral); its MoE decoders are DeepSeek-V3, Qwen3, Llama 4 and gpt-oss",
        "use --target megatron");
  // torchtitan/models/deepseek_v3/infra/parallelize.py (v0.2.2): "Context Parallel only supports
  // SDPA attention"; its MLA flavors run FlexAttention (or varlen), whose heads differ in size.
  if (r.model.mla && p.cp > 1)
    sink.refuse("cp",
                "TorchTitan's DeepSeek-V3 (MLA) attention runs FlexAttention, which its context "
                "parallelism does not support, got cp=" +
                    std::to_string(p.cp),
                "use cp=1, or --target megatron");
  if (p.tp > 1 && !p.sequence_parallel)
    sink.refuse("sp",
                "TorchTitan's tensor parallelism always runs sequence parallel between TP "
                "regions, got tp=" +
                    std::to_string(p.tp) + " without sp",
                "use --sp 1");
  if (p.schedule == ScheduleKind::kZeroBubbleH1)
    sink.refuse("schedule",
                "torch.distributed.pipelining has no single-stage zero-bubble (ZB-H1) schedule",
                "its zero-bubble schedules (InterleavedZeroBubble, ZBVZeroBubble) run two or "
                "more stages per rank; use --schedule interleaved or 1f1b");
  if (p.precision == Precision::kNvfp4)
    sink.refuse("precision",
                "TorchTitan 0.2.2 has no NVFP4 training converter (its quantize converters are "
                "float8 and mx)",
                "--torchtitan-version main (NVFP4LinearConverter), --target megatron, or "
                "--precision mxfp8");
  if (r.model.moe && p.ep > 1) {
    if (p.etp != 1 && p.etp != p.tp)
      sink.refuse("etp",
                  "TorchTitan's expert tensor parallelism is 1 or tp=" + std::to_string(p.tp) +
                      ", got etp=" + std::to_string(p.etp),
                  "use etp=1 or etp=tp");
    // Experts borrow ranks from FSDP and context parallelism (and TP when etp = 1).
    const int shard = fsdp_sharded(p) ? p.dp : 1;
    const int unit = p.etp == 1 ? p.cp * p.tp : p.cp;
    const int span = shard * unit;
    if (p.ep % unit != 0 || span % p.ep != 0)
      sink.refuse(
          "ep",
          "TorchTitan lays ep=" + std::to_string(p.ep) + " over the FSDP-shard x cp" +
              std::string(p.etp == 1 ? " x tp" : "") + " ranks (" + std::to_string(span) +
              "): ep must be a multiple of " + std::to_string(unit) + " that divides " +
              std::to_string(span),
          "experts shard over the FSDP dimension: use --fsdp 1, or ep in " + divisors_text(span));
  }
}

std::vector<std::string> torchtitan_notes(const LaunchRequest& r) {
  const ParallelPlan& p = r.plan;
  std::vector<std::string> notes = {
      "Merge into a TOML job config (--job.config_file) of TorchTitan's TOML-era JobConfig; "
      "newer releases take these fields from Python config_registry functions instead.",
      "Set [model] name and flavor to TorchTitan's definition of " + r.model.name +
          "; tokenizer, optimizer and data settings are not part of the plan."};
  if (p.pp > 1)
    notes.push_back(
        "module_fqns_per_model_part uses TorchTitan's decoder module names "
        "(tok_embeddings, layers.N, norm, output) and reproduces parallax's layer "
        "split.");
  if (p.recompute == Recompute::kSelective)
    notes.push_back(
        "TorchTitan's selective checkpointing is per-op (every other matmul output and attention "
        "saved, the rest recomputed), not the plan's recompute of the attention core: it uses "
        "less memory and recomputes more. Simulate with --recompute selective-op for its time "
        "and memory.");
  if (p.attention == AttentionImpl::kFlash)
    notes.push_back(
        "TorchTitan runs attention through PyTorch SDPA (FlashAttention-2 on Hopper); the plan "
        "was simulated with the part's fastest fused kernel: simulate with --attention flash2 "
        "for TorchTitan's time.");
  if (p.eager && (quantized(p) || (p.tp > 1 && p.overlap_tp_comm)))
    notes.push_back(
        "The plan was simulated eager, but " +
        std::string(p.precision == Precision::kFp8 ? "Float8 training"
                    : quantized(p)                 ? "MX training"
                                                   : "async tensor parallelism") +
        " runs under torch.compile: [compile] is enabled. Simulate with --eager 0 for its time.");
  if (p.precision == Precision::kMxfp8)
    notes.push_back(
        "torchao casts MXFP8 row-wise and column-wise in two kernels, each reading the bf16 "
        "tensor; the simulation priced Transformer Engine's single fused cast.");
  else if (p.tp > 1 && p.overlap_tp_comm)
    notes.push_back(
        "Async tensor parallelism works only under torch.compile: [compile] is "
        "enabled.");
  if (!fsdp_sharded(p) && p.cp > 1)
    notes.push_back(
        "TorchTitan applies FSDP over the context-parallel ranks even without "
        "data_parallel_shard_degree, so parameters are sharded over cp=" +
        std::to_string(p.cp) + " unlike the plan's replicated (zero=0) layout.");
  return notes;
}

std::string emit_torchtitan(const LaunchRequest& r) {
  const ParallelPlan& p = r.plan;
  std::string s = "# TorchTitan job config: " + plan_summary(r) + "\n" +
                  comment_lines(torchtitan_notes(r)) + "\n";
  s += training_section(r) + "\n";
  s += parallelism_section(r) + "\n";
  s += activation_checkpoint_section(p);
  // The simulation's fused elementwise ops are torch.compile's; eager plans leave it off.
  if (!p.eager || quantized(p) || (p.tp > 1 && p.overlap_tp_comm))
    s += "\n[compile]\nenable = true\ncomponents = [\"model\", \"loss\"]\n";
  if (p.precision == Precision::kFp8) s += "\n" + fp8_sections(p);
  if (p.precision == Precision::kMxfp8) s += "\n" + mx_sections(r.model);
  return s;
}

}  // namespace parallax::launch
