// TorchTitan main: a Python configuration module for a plan, and the rules of TorchTitan's main
// branch as of pytorch/torchtitan@b5bcd76c (2026-08-21), where the TOML job config is gone.
//
// A run is a function returning Trainer.Config, selected with `--module M --config F`
// (torchtitan/config/README.md); the emitted module derives the plan from the model's own
// registry function (llama3_70b, qwen3_30b_a3b, deepseek_v3_671b, ...) and replaces what the
// plan decides. Field names are those of torchtitan/config/configs.py at that commit:
// TrainingConfig.num_tokens_per_microbatch_per_dp_rank (tokens of one microbatch of one
// data-parallel rank, before CP/TP sharding), num_tokens_per_train_step, max_context_length;
// ParallelismConfig (data_parallel_replicate_degree / _shard_degree, tensor_parallel_degree,
// enable_sequence_parallel, pipeline_parallel_degree / _schedule, num_pp_microbatches,
// module_fqns_per_model_part, context_parallel_degree, expert_parallel_degree; no expert tensor
// parallelism); CompileConfig.enable_async_tensor_parallel. Activation checkpointing is a
// policy object (SelectiveAC.Config(), FullAC.Config(), or None). Language models have no SDPA
// attention any more (models/common/config_utils.py: flex, flex_flash, varlen), and context
// parallelism needs FlexAttention (models/common/decoder.py). The decoder's modules are
// tok_embeddings, layers.N, norm and lm_head.

#include <string>
#include <vector>

#include "planner/launch/emitters.h"

namespace parallax::launch {
namespace {

/// A zoo model TorchTitan main defines: its model package, the registry function the plan
/// starts from and the flavor of model_registry.
struct TitanModel {
  const char* zoo;
  const char* module;
  const char* base_config;
  const char* flavor;
};

// Qwen3-235B-A22B has a flavor but no registry function: it starts from the 30B-A3B one (same
// vocabulary and loss) with its own model.
constexpr TitanModel kTitanModels[] = {
    {"llama3.1-8b", "llama3", "llama3_8b", "8B"},
    {"llama3.1-70b", "llama3", "llama3_70b", "70B"},
    {"llama3.1-405b", "llama3", "llama3_405b", "405B"},
    {"qwen3-30b-a3b", "qwen3", "qwen3_30b_a3b", "30B-A3B"},
    {"qwen3-235b-a22b", "qwen3", "qwen3_30b_a3b", "235B-A22B"},
    {"deepseek-v3", "deepseek_v3", "deepseek_v3_671b", "671B"},
};

const TitanModel* titan_model(const ModelSpec& m) {
  for (const TitanModel& t : kTitanModels)
    if (m.name == t.zoo) return &t;
  return nullptr;
}

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

std::string python_bool(bool b) { return b ? "True" : "False"; }

std::string parallelism(const LaunchRequest& r) {
  const ParallelPlan& p = r.plan;
  const bool shard = p.shards_params();
  std::vector<std::pair<std::string, std::string>> kw = {
      {"data_parallel_replicate_degree", std::to_string(shard ? 1 : p.dp)},
      {"data_parallel_shard_degree", std::to_string(shard ? p.dp : 1)},
      {"tensor_parallel_degree", std::to_string(p.tp)},
      {"enable_sequence_parallel", python_bool(p.sequence_parallel || p.tp == 1)},
      {"context_parallel_degree", std::to_string(p.cp)},
      {"pipeline_parallel_degree", std::to_string(p.pp)}};
  if (p.pp > 1) {
    kw.push_back({"pipeline_parallel_schedule", quoted(p.vpp > 1 ? "Interleaved1F1B" : "1F1B")});
    kw.push_back({"num_pp_microbatches", std::to_string(p.num_microbatches())});
    kw.push_back({"module_fqns_per_model_part", stage_module_names(r, "lm_head", 12)});
  }
  if (r.model.moe) kw.push_back({"expert_parallel_degree", std::to_string(p.ep)});
  std::string s = "    config.parallelism = ParallelismConfig(\n";
  for (const auto& [k, v] : kw) s += "        " + k + "=" + v + ",\n";
  return s + "    )\n";
}

std::string activation_checkpoint(Recompute rc) {
  switch (rc) {
    case Recompute::kNone:
      return "None";
    case Recompute::kSelective:
    case Recompute::kSelectiveOp:
      return "SelectiveAC.Config()";
    case Recompute::kFull:
      return "FullAC.Config()";
  }
  return "None";
}

}  // namespace

void check_torchtitan_main(const LaunchRequest& r, RuleSink& sink) {
  const ParallelPlan& p = r.plan;
  const ModelSpec& m = r.model;
  if (!titan_model(m)) {
    std::string names;
    for (const TitanModel& t : kTitanModels)
      names += (names.empty() ? "" : ", ") + std::string(t.zoo);
    sink.refuse_at(
        "model/name",
        "TorchTitan main has no model definition (config_registry function) for '" + m.name + "'",
        "its models parallax maps: " + names + "; or --torchtitan-version 0.2.2");
  }
  if (!p.fsdp && (p.zero_stage == 1 || p.zero_stage == 2))
    sink.refuse("zero",
                "TorchTitan shards data parallelism only with FSDP2 (parameters, gradients and "
                "optimizer state together), got zero=" +
                    std::to_string(p.zero_stage),
                "use --fsdp 1 (data_parallel_shard_degree) or zero=0 (replicated)");
  if (p.schedule == ScheduleKind::kZeroBubbleH1)
    sink.refuse("schedule",
                "torch.distributed.pipelining has no single-stage zero-bubble (ZB-H1) schedule",
                "use --schedule interleaved or 1f1b");
  if (m.moe && p.etp != 1)
    sink.refuse(
        "etp", "TorchTitan main has no expert tensor parallelism, got etp=" + std::to_string(p.etp),
        "use etp=1");
  // ParallelismConfig.expert_parallel_degree: EP borrows ranks from FSDP, CP and TP
  // (efsdp = dp_shard * cp * tp / ep).
  const int dense = (p.shards_params() ? p.dp : 1) * p.cp * p.tp;
  if (m.moe && p.ep > 1 && dense % p.ep != 0)
    sink.refuse("ep",
                "TorchTitan main lays ep=" + std::to_string(p.ep) +
                    " over the FSDP-shard x cp x tp ranks (" + std::to_string(dense) +
                    "), which it must divide",
                "ep in " + divisors_text(dense) + ", or --fsdp 1");
  if (m.tied_embeddings && p.pp > 1)
    sink.refuse("pp", "TorchTitan ties embeddings only without pipeline parallelism",
                "pp=1 (models/common/decoder.py: weight tying is not supported with PP)");
  // components/quantization/nvfp4.py converts Linear.Config only; GroupedExperts have an MXFP8
  // converter (mx.py) and no NVFP4 one.
  if (m.moe && p.precision == Precision::kNvfp4)
    sink.refuse("precision",
                "TorchTitan main quantizes dense Linear layers to NVFP4 but has no NVFP4 "
                "converter for its grouped MoE experts",
                "--precision mxfp8 (MXFP8GroupedExpertsConverter), or --target megatron");
}

std::vector<std::string> torchtitan_main_notes(const LaunchRequest& r) {
  const TitanModel* t = titan_model(r.model);
  const ParallelPlan& p = r.plan;
  const NodeLayout nodes = node_layout(r.cluster);
  std::vector<std::string> notes = {
      "Save as parallax_plan.py in the TorchTitan checkout (main @ b5bcd76c, 2026-08-21) and run "
      "on each of the " +
          std::to_string(nodes.nodes) + " hosts: torchrun --nnodes " + std::to_string(nodes.nodes) +
          " --nproc_per_node " + std::to_string(nodes.procs_per_node) +
          " --rdzv_backend c10d --rdzv_endpoint $HEAD_IP:29500 -m torchtitan.train "
          "--module parallax_plan --config plan (one host: NGPU=" +
          std::to_string(nodes.procs_per_node) +
          " MODULE=parallax_plan CONFIG=plan ./run_train.sh).",
      std::string("It starts from TorchTitan's ") + (t ? t->base_config : "?") +
          " (optimizer, data, checkpointing, loss) and sets what the plan decides."};
  notes.push_back(
      "Attention runs FlexAttention with its FLASH backend (flex_flash, Hopper or newer), "
      "simulated as the part's fused kernel; main has no SDPA path for language models.");
  if (p.recompute == Recompute::kSelective)
    notes.push_back(
        "SelectiveAC is per-op checkpointing, not the plan's attention-core recompute: simulate "
        "with --recompute selective-op for its time and memory.");
  if (p.eager)
    notes.push_back("The plan was simulated eager; the config leaves torch.compile off.");
  return notes;
}

namespace {

std::string converter_imports(const ParallelPlan& p) {
  switch (p.precision) {
    case Precision::kMxfp8:
      return "Float8LinearConverter, MXFP8GroupedExpertsConverter, MXFP8LinearConverter";
    case Precision::kNvfp4:
      return "Float8LinearConverter, NVFP4LinearConverter";
    default:
      return "Float8LinearConverter";
  }
}

/// The model converters of the plan's recipe (torchtitan/components/quantization, main): the
/// LM head stays in bf16 in each, as in the simulation; NVFP4 also keeps the first and last
/// decoder layers in bf16 (recipe_keeps_layer_in_bf16), converting layers.1. .. layers.L-2.
/// (fqns match as substrings, hence the trailing dot, as nvfp4_bf16_tail_fqns writes them).
std::string converter_list(const LaunchRequest& r) {
  const ParallelPlan& p = r.plan;
  switch (p.precision) {
    case Precision::kFp8:
      return "[Float8LinearConverter.Config(filter_fqns=[\"lm_head\"], "
             "model_compile_enabled=True)]";
    case Precision::kMxfp8:
      return "[MXFP8LinearConverter.Config(fqns=[\"layers\"], model_compile_enabled=True)" +
             std::string(r.model.moe ? ", MXFP8GroupedExpertsConverter.Config("
                                       "model_compile_enabled=True)"
                                     : "") +
             "]";
    case Precision::kNvfp4:
      return "[NVFP4LinearConverter.Config(fqns=[f\"layers.{i}.\" for i in range(" +
             std::to_string(kNvfp4Bf16LayersAtStart) + ", " +
             std::to_string(r.model.layers - kNvfp4Bf16LayersAtEnd) +
             ")], model_compile_enabled=True)]";
    default:
      return "None";
  }
}

}  // namespace

std::string emit_torchtitan_main(const LaunchRequest& r) {
  const TitanModel& t = *titan_model(r.model);
  const ParallelPlan& p = r.plan;
  const bool quantized = p.precision == Precision::kFp8 || is_block_scaled(p.precision);
  const bool compile = !p.eager || quantized || (p.tp > 1 && p.overlap_tp_comm);
  std::string s = "# TorchTitan (main) configuration: " + plan_summary(r) + "\n" +
                  comment_lines(torchtitan_main_notes(r));
  s += "from torchtitan.components.quantization import " + converter_imports(p) + "\n";
  s += "from torchtitan.config import CompileConfig, ParallelismConfig\n";
  s += "from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC\n";
  s += "from torchtitan.models." + std::string(t.module) + " import model_registry\n";
  s += "from torchtitan.models." + std::string(t.module) + ".config_registry import " +
       t.base_config + "\n\n\n";
  s += "def plan():\n";
  s += "    config = " + std::string(t.base_config) + "()\n";
  const std::string converters = converter_list(r);
  s += "    config.model_spec = model_registry(\"" + std::string(t.flavor) +
       "\", attn_backend=\"flex_flash\", converters=" + converters + ")\n";
  const int64_t micro_tokens = static_cast<int64_t>(p.micro_batch) * p.seq_len;
  s += "    config.training.num_tokens_per_microbatch_per_dp_rank = " +
       std::to_string(micro_tokens) + "\n";
  s += "    config.training.num_tokens_per_train_step = " +
       std::to_string(p.global_batch * p.seq_len) + "\n";
  s += "    config.training.max_context_length = " + std::to_string(p.seq_len) + "\n";
  s += parallelism(r);
  s += "    config.activation_checkpoint = " + activation_checkpoint(p.recompute) + "\n";
  s += "    config.compile = CompileConfig(\n        enable=" + python_bool(compile) +
       ",\n        enable_async_tensor_parallel=" + python_bool(p.tp > 1 && p.overlap_tp_comm) +
       ",\n    )\n";
  return s + "    return config\n";
}

}  // namespace parallax::launch
