#pragma once
/// Measured-run records (validation/SCHEMA.md): a published training run, its layout
/// and what it measured. `to_plan` fills unknown fields by one documented rule (FILL_RULE) that
/// never looks at the measurement.

#include <optional>
#include <string>
#include <vector>

#include "core/json_io.h"
#include "core/software_stack.h"

namespace parallax {

enum class FlopsBasis { kModel, kHardware };
enum class AttentionCounting { kFull, kCausal };

/// The software stack a record ran, as its source names it (SCHEMA.md "stack").
struct RecordStack {
  /// megatron-lm, nemo, megatron-deepspeed, torchtitan, fsdp, deepspeed, maxtext, nanotron,
  /// picotron, colossalai or other; empty when the record does not say.
  std::string framework;
  std::string version, kernels, notes;
  /// The attention kernel, where the source says which (SCHEMA.md "stack.attention"); the
  /// framework's default otherwise.
  std::optional<AttentionImpl> attention;
  /// Whether elementwise ops ran compiled or fused (torch.compile, fused kernels) rather than
  /// eager, where the source says; the framework's default otherwise.
  std::optional<bool> compiled;
};

/// How a record's pipeline stages were split when the source says it (SCHEMA.md).
struct PipelineSplit {
  std::optional<int> first_stage_layers, last_stage_layers;
  std::optional<bool> embedding_as_layer, loss_as_layer;
  std::string layout;
};

/// The frameworks a record may name, for messages.
inline constexpr const char* kRecordFrameworks =
    "megatron-lm, nemo, megatron-deepspeed, torchtitan, fsdp, deepspeed, maxtext, nanotron, "
    "picotron, colossalai, other";

struct MeasuredRun {
  std::string id, source, source_url;
  std::string source_locator;  ///< the table, row or file the numbers came from
  std::string sweep;           ///< shared by the records of one published sweep
  RecordStack stack;
  std::optional<PipelineSplit> pipeline_split;
  std::string where;  ///< where the record was read ("runs.jsonl:12:"), for diagnostics
  ModelSpec model;
  bool dropout_given = false;  ///< the model names its dropout (not a SCHEMA.md field)
  int64_t seq_len = 0;
  std::string gpu;
  int num_gpus = 0;
  // Layout as recorded; nullopt = the source does not say (JSON null). A degree left out of the
  // record is 1, except dp, which is derived from the others (num_gpus / (tp*pp*cp)).
  std::optional<int> tp = 1, pp = 1, dp, cp = 1, ep = 1, etp = 1;
  std::optional<int> vpp, micro_batch;
  std::optional<bool> sequence_parallel, fsdp, distributed_optimizer;
  int64_t global_batch = 0;
  std::optional<Recompute> recompute;
  Precision precision = Precision::kBf16;
  // Measurements (any may be absent).
  std::optional<double> tflops_per_gpu, mfu, tokens_per_s_per_gpu, step_time_s;
  FlopsBasis flops_basis = FlopsBasis::kModel;
  std::optional<AttentionCounting> attention_flops;
};

/// The rule for unknown fields, printed by `parallax validate`.
inline constexpr const char* kFillRule =
    "unknown degrees (tp, pp, cp, ep or etp given as null): the layout is completed by the "
    "planner's search, the best one consistent with every known field, among the layouts the "
    "record's framework runs (micro_batch, vpp, recompute and the sharding searched too when "
    "unknown). Otherwise, unknown fields: micro_batch=1; vpp=1 (1F1B); recompute=none; "
    "sequence_parallel=(tp>1); "
    "distributed_optimizer=false; fsdp=false; attention FLOPs counted 'full' when the record does "
    "not say; overlap of gradient reduction and parameter gathering on, TP overlap off; "
    "dropout (attention and hidden) as the stack's default (Megatron's 0.1, none elsewhere). "
    "Software stack: the attention kernel and compiled or eager ops the record's stack names "
    "(stack.attention, stack.compiled), else the kernels of the framework the record names "
    "(core/software_stack.cc: "
    "Megatron-LM, NeMo and Megatron-DeepSpeed run Transformer Engine's fused attention at the "
    "part's best kernel, fused norms, 'selective' as the attention core recomputed and, without "
    "SP, pipeline sends split over the TP ranks and all-gathered on arrival; TorchTitan and "
    "plain FSDP run SDPA (FlashAttention-2), eager PyTorch ops except in fp8 runs (torchao "
    "Float8 runs compiled), per-op selective checkpointing, context-parallel K and V "
    "all-gathered and an unknown micro_batch under pipelining as local batch / (pp*vpp); "
    "DeepSpeed, nanotron, picotron, Colossal-AI and MaxText as that file says); a record that "
    "names no framework, or 'other', runs TorchTitan's stack when sharded with PyTorch FSDP "
    "(fsdp=true), Megatron-LM's otherwise. Runs published on arXiv before FlashAttention "
    "(arXiv 2205.14135), when no framework had a fused kernel, compute attention unfused "
    "(batched QK^T and PV GEMMs around a softmax over the s x s scores)";

/// Parses one record; `where` is e.g. "runs.jsonl:12".
Result<MeasuredRun> measured_run_from_json(const Json& j, const std::string& where);

/// The arXiv identifier of a source address (".../abs/2104.04473", ".../pdf/2205.05198v2") as
/// YYMM.NNNNN, which orders by submission; nullopt when the address is not an arXiv paper.
std::optional<double> arxiv_number(const std::string& url);

/// The kernels a record's run used (core/software_stack.h): its stack's framework, or, where
/// the record names none or `other`, the stack its sharding implies (PyTorch FSDP: TorchTitan's;
/// otherwise Megatron-LM's), per kFillRule.
const StackKernels& record_stack(const MeasuredRun& r);

/// The degrees (tp, pp, cp, ep, etp) the record gives as null; empty when its layout is known
/// up to dp, which follows from the others. A record with unknown degrees is predicted on the
/// layout the planner completes (planner/replan.h, complete_layout), never on degrees of 1.
std::vector<std::string> unknown_degrees(const MeasuredRun& r);

/// The plan the simulator runs for a record, unknown fields filled by kFillRule. Unknown degrees
/// (unknown_degrees) read as 1 here: the plan is then only the settings a completion starts from.
ParallelPlan to_plan(const MeasuredRun& r);
/// The model the simulator runs for a record: its dropout, when not given, filled by kFillRule.
ModelSpec to_model(const MeasuredRun& r);

}  // namespace parallax
