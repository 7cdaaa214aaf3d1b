#pragma once
/// Software-stack profiles (stacks/*.json, compiled in): what a training framework runs, as the
/// simulator costs it: the attention kernel, fused or eager elementwise ops, how 'selective'
/// recompute is done, how pipeline sends and context-parallel K/V travel, the default dropout
/// and which communications it overlaps, each value with its source (the framework's code or
/// docs). Measured-run records name theirs (SCHEMA.md "stack"); the planner simulates each
/// framework's plans under its profile.

#include <string>
#include <vector>

#include "core/json_io.h"
#include "core/parallel_plan.h"

namespace parallax {

struct StackKernels {
  std::string framework;  ///< as records name it ("megatron-lm", "torchtitan", ...)
  std::string description;
  AttentionImpl attention = AttentionImpl::kFlash;
  /// Elementwise ops one kernel per ATen op (PyTorch eager) rather than fused or compiled.
  bool eager = false;
  /// fp8 runs compile their elementwise ops even where bf16 runs are eager (torchao's Float8
  /// casts are only fast fused).
  bool fp8_compiled = true;
  /// 'selective' as per-op selective activation checkpointing (PyTorch's SAC) rather than
  /// Megatron's recompute of the attention core.
  bool selective_per_op = false;
  /// Megatron-LM's --scatter-gather-tensors-in-pipeline: without SP each TP rank sends 1/tp of
  /// a stage's output and the next stage all-gathers it.
  bool pp_scatter_gather = false;
  CpComm cp_comm = CpComm::kRing;
  /// An unknown micro_batch under pipelining is the local batch over the stages (TorchTitan's
  /// default of one microbatch per stage) rather than 1.
  bool microbatch_per_stage = false;
  /// Attention and hidden dropout when the model does not say.
  double default_dropout = 0.0;
  bool overlap_grad_reduce = true, overlap_param_gather = true, overlap_tp_comm = false;
  /// The planner's launch target whose rules the framework's layouts follow ("megatron",
  /// "torchtitan", "deepspeed"); empty for a framework the planner emits nothing for.
  std::string launch_target;
};

/// Reads one profile; every problem located under `where`.
Result<StackKernels> stack_from_json(const Json& j, const std::string& where);

/// The profiles of stacks/*.json, sorted by file name.
const std::vector<StackKernels>& builtin_stacks();

/// The profile of `framework`; nullptr for `other`, an empty name or one without a profile.
const StackKernels* find_stack_kernels(const std::string& framework);

/// The stack of PyTorch FSDP runs that name no framework (TorchTitan's), and of all others
/// (Megatron-LM's).
const StackKernels& pytorch_fsdp_stack();
const StackKernels& megatron_stack();

/// `p` with the kernels and overlap switches of `s` (attention, eager or compiled for
/// `p.precision`, CP exchange, pipeline sends, and 'selective' as the stack does it).
ParallelPlan apply_stack(const StackKernels& s, ParallelPlan p);

}  // namespace parallax
