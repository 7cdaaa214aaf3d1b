#pragma once
/// Private to planner/launch: one rule checker, one text writer and one list of notes per
/// framework, and the helpers they share. launch.cc dispatches to them; nothing else includes
/// this header.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "planner/launch/launch.h"

namespace parallax::launch {

// ---- shared helpers (launch.cc) ---------------------------------------------------------------

/// Collects `where: what (hint)` diagnostics located at plan fields ("plan/parallel/zero",
/// "plan/batch/global_batch", "plan/seq_len", "plan/cluster/num_gpus", ...).
class RuleSink {
 public:
  explicit RuleSink(Diagnostics* out) : out_(out) {}
  /// `field` is a plan field name of FieldLocator (tp pp dp cp ep etp vpp mbs gbs seq sp zero
  /// schedule precision gpus, or another plan member such as "recompute").
  void refuse(const char* field, std::string what, std::string hint = "");
  /// A diagnostic at a path that is not a plan field (e.g. "cluster/hw/gpus_per_node").
  void refuse_at(std::string where, std::string what, std::string hint = "");

 private:
  Diagnostics* out_;
};

/// "llama3.1-70b on 64 x h100-sxm-80gb: tp=8 pp=4 vpp=5 dp=2 cp=1 ep=1 etp=1, mbs=1 gbs=128
/// seq=8192"
std::string plan_summary(const LaunchRequest& r);
/// Shortest round-trip text of a number: 0 -> "0", 0.1 -> "0.1".
std::string number_text(double v);
/// Each note as a "# ..." line (with the trailing newline).
std::string comment_lines(const std::vector<std::string>& notes);
/// The lines joined with " \\\n" (a shell command continued over lines), each indented by
/// `indent` spaces; the last line has no continuation. Ends with a newline.
std::string shell_continued(const std::vector<std::string>& lines, int indent);
/// "{1,2,4,5,8,...}": the divisors of n, for hints.
std::string divisors_text(int64_t n);
/// The problem with a disaggregated split of `prefill_replicas` of the `dp` replicas (0:
/// colocated), where "--pd"; none when P and D = dp - P are both at least 1.
std::optional<Diagnostic> pd_split_problem(int prefill_replicas, int dp);
/// The problem with a disaggregated deployment (`prefill_replicas` > 0) of `gpus` GPUs over hosts
/// of `gpus_per_node` (0: one host) for `engine`: parallax emits P/D on one host only.
std::optional<Diagnostic> multi_host_pd_problem(const char* engine, int gpus, int gpus_per_node,
                                                int prefill_replicas);
/// TorchTitan's module_fqns_per_model_part for the plan's own layer split: one line a virtual
/// stage, `["tok_embeddings", "layers.0", ...]` (the embedding on the first, "norm" and
/// `output_name` on the last), each line `indent` and a trailing comma, the whole in brackets
/// with the closing one indented by `indent` - 2.
std::string stage_module_names(const LaunchRequest& r, const char* output_name, int indent);
/// True when the model's layers split into the plan's pp*vpp virtual stages of equal size.
bool even_stage_split(const ModelSpec& m, const ParallelPlan& p);
/// The plan's MoE settings (dispatcher, capacity factor, node limit, EP overlap), multi-token
/// prediction and DualPipe that `target` cannot run (moe_support.cc).
void check_moe_support(LaunchTarget target, const LaunchRequest& r, RuleSink& sink);

// ---- Megatron-LM (megatron.cc) ----------------------------------------------------------------

void check_megatron(const LaunchRequest& r, RuleSink& sink);
/// pretrain_gpt.py arguments, one flag (with its value) per entry.
std::vector<std::string> megatron_args(const LaunchRequest& r);
/// Environment lines ("export NAME=value") the Megatron arguments need, e.g.
/// CUDA_DEVICE_MAX_CONNECTIONS=1 with tp > 1 or cp > 1.
std::vector<std::string> megatron_env(const LaunchRequest& r);
/// ZeRO-2/3 and FSDP run as Megatron FSDP (--use-megatron-fsdp).
bool uses_megatron_fsdp(const ParallelPlan& p);
/// Notes for every way of running pretrain_gpt.py; megatron_notes adds the environment.
std::vector<std::string> megatron_common_notes(const LaunchRequest& r);
std::vector<std::string> megatron_notes(const LaunchRequest& r);
std::string emit_megatron(const LaunchRequest& r);

// ---- DeepSpeed (deepspeed.cc) -----------------------------------------------------------------

void check_deepspeed(const LaunchRequest& r, RuleSink& sink);
std::vector<std::string> deepspeed_notes(const LaunchRequest& r);
std::string emit_deepspeed(const LaunchRequest& r);

// ---- TorchTitan (torchtitan.cc) ---------------------------------------------------------------

void check_torchtitan(const LaunchRequest& r, RuleSink& sink);
std::vector<std::string> torchtitan_notes(const LaunchRequest& r);
std::string emit_torchtitan(const LaunchRequest& r);

// ---- TorchTitan main (torchtitan_main.cc) -----------------------------------------------------

void check_torchtitan_main(const LaunchRequest& r, RuleSink& sink);
std::vector<std::string> torchtitan_main_notes(const LaunchRequest& r);
std::string emit_torchtitan_main(const LaunchRequest& r);

// ---- torchrun and Slurm (cluster_scripts.cc) --------------------------------------------------

/// The node layout both scripts launch: whole nodes, or one node with fewer GPUs.
struct NodeLayout {
  int nodes = 0;
  int procs_per_node = 0;
  bool partial_node = false;  ///< one node, fewer GPUs than it has
};
NodeLayout node_layout(const Cluster& c);
void check_node_layout(const LaunchRequest& r, RuleSink& sink);
std::vector<std::string> torchrun_notes(const LaunchRequest& r);
std::string emit_torchrun(const LaunchRequest& r);
std::vector<std::string> slurm_notes(const LaunchRequest& r);
std::string emit_slurm(const LaunchRequest& r);

}  // namespace parallax::launch
