#pragma once
/// Launch configurations: a plan becomes what a user pastes into their cluster (Megatron-LM
/// arguments, a DeepSpeed JSON, a TorchTitan parallelism section, a torchrun command, a Slurm
/// batch script). Each emitter first checks the target framework's own rules and refuses, with
/// every reason, a plan that framework cannot run.

#include <optional>
#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/parallel_plan.h"
#include "core/result.h"

namespace parallax {

/// kTorchTitan is the released v0.2.2 (TOML job config); kTorchTitanMain its main branch at
/// b5bcd76c (a Python configuration module).
enum class LaunchTarget { kMegatron, kDeepSpeed, kTorchTitan, kTorchTitanMain, kTorchrun, kSlurm };
const char* to_string(LaunchTarget t);
std::optional<LaunchTarget> parse_launch_target(const std::string& s);
/// "megatron, deepspeed, torchtitan, torchtitan-main, torchrun, slurm"
const char* launch_target_names();

/// Everything an emitter needs: the model (its shape goes into the arguments), the cluster (GPU
/// count and GPUs per node from the profile) and the plan.
struct LaunchRequest {
  ModelSpec model;
  Cluster cluster;
  ParallelPlan plan;
};

/// The rules of `target` that the plan breaks, each as `where: what (hint)`; empty when the
/// framework can run it. `where` is the plan field (e.g. "plan/parallel/zero").
Diagnostics check_launch(LaunchTarget target, const LaunchRequest& r);

/// check_launch for a model the caller has already validated (validate_model): a search checks
/// many plans of one model.
Diagnostics check_launch_of_valid_model(LaunchTarget target, const LaunchRequest& r);

/// The text to paste: refuses (the diagnostics of check_launch) a plan the target cannot run.
Result<std::string> emit_launch(LaunchTarget target, const LaunchRequest& r);

/// What the user must still do or know that no setting of the target expresses (model code the
/// framework needs, arguments parallax leaves to the user), one sentence each. emit_launch writes
/// them as comments where the format has comments; DeepSpeed's JSON has none, so a caller shows
/// them beside it. Meaningful only for a plan check_launch accepts.
std::vector<std::string> launch_notes(LaunchTarget target, const LaunchRequest& r);

}  // namespace parallax
