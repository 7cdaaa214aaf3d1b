#pragma once
/// The software stacks measured runs name (validation/SCHEMA.md "stack"), as the kernels and
/// defaults the simulator runs for them: which attention kernel, fused or eager elementwise ops,
/// how 'selective' recompute is done, how pipeline sends and context-parallel K/V travel. One
/// row per framework, each with where it comes from. The fill rule (kFillRule) reads a record's
/// stack from here; a record that names none, or `other`, gets the stack its sharding implies.

#include <string>

#include "core/parallel_plan.h"

namespace parallax {

struct StackKernels {
  const char* framework;  ///< as records name it
  AttentionImpl attention = AttentionImpl::kFlash;
  /// Elementwise ops one kernel per ATen op (PyTorch eager), except in fp8 runs, which the
  /// stacks run compiled (torchao's Float8 casts are only fast fused).
  bool eager_unless_fp8 = false;
  /// Megatron-LM's --scatter-gather-tensors-in-pipeline: without SP each TP rank sends 1/tp of
  /// a stage's output and the next stage all-gathers it.
  bool pp_scatter_gather = false;
  /// 'selective' as per-op selective activation checkpointing (PyTorch's SAC) rather than
  /// Megatron's recompute of the attention core.
  bool selective_per_op = false;
  CpComm cp_comm = CpComm::kRing;
  /// An unknown micro_batch under pipelining is the local batch over the stages (TorchTitan's
  /// default of one microbatch per stage) rather than 1.
  bool microbatch_per_stage = false;
  /// Attention and hidden dropout when the model does not say: Megatron-LM's
  /// --attention-dropout and --hidden-dropout default to 0.1; the Llama-style models of the
  /// other stacks have none.
  double default_dropout = 0.0;
  const char* source = "";
};

/// The row of `framework`; nullptr for `other`, an empty name or one not in the table.
const StackKernels* find_stack_kernels(const std::string& framework);

/// The stack of PyTorch FSDP runs that name no framework (TorchTitan's), and of all others
/// (Megatron-LM's).
const StackKernels& pytorch_fsdp_stack();
const StackKernels& megatron_stack();

}  // namespace parallax
