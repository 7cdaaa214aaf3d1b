// torchrun and Slurm: launch Megatron-LM's pretrain_gpt.py with the plan's arguments on whole
// nodes (or one node with fewer GPUs).
//
// torchrun flags are those of torch/distributed/run.py: --nnodes, --nproc-per-node,
// --rdzv-backend c10d, --rdzv-endpoint host:port, --rdzv-id. The c10d rendezvous assigns node
// ranks, so neither script passes --node-rank. The Slurm script runs one task per node
// (srun starts one torchrun on each) and takes the rendezvous host from the first node of
// $SLURM_JOB_NODELIST.

#include <cctype>
#include <string>
#include <vector>

#include "planner/launch/emitters.h"

namespace parallax::launch {
namespace {

// CPU cores per GPU the Slurm script asks for: data-loader workers and the launcher. Not a fact
// of the part (profiles do not record host cores); the user tunes it to their nodes.
constexpr int kCpusPerGpu = 8;
constexpr int kDefaultMasterPort = 29500;

/// "parallax-<model>", with every character a shell word or an #SBATCH value could trip on
/// (spaces, quotes, slashes of Hugging Face names) replaced by '-'.
std::string job_name(const LaunchRequest& r) {
  std::string name = "parallax-" + r.model.name;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '-';
  return name;
}

/// The torchrun launcher flags, pretrain_gpt.py and its arguments, one per entry.
std::vector<std::string> torchrun_lines(const LaunchRequest& r, const std::string& nnodes,
                                        const std::string& rdzv_id) {
  const NodeLayout n = node_layout(r.cluster);
  std::vector<std::string> lines = {"--nnodes " + nnodes,
                                    "--nproc-per-node " + std::to_string(n.procs_per_node),
                                    "--rdzv-id " + rdzv_id,
                                    "--rdzv-backend c10d",
                                    "--rdzv-endpoint \"$MASTER_ADDR:$MASTER_PORT\"",
                                    "pretrain_gpt.py"};
  for (auto& a : megatron_args(r)) lines.push_back(std::move(a));
  return lines;
}

/// "torchrun \\\n  --nnodes ..." with `prefix` before torchrun (e.g. "srun ").
std::string torchrun_command(const LaunchRequest& r, const std::string& prefix,
                             const std::string& nnodes, const std::string& rdzv_id) {
  return prefix + "torchrun \\\n" + shell_continued(torchrun_lines(r, nnodes, rdzv_id), 2);
}

std::string env_lines(const LaunchRequest& r) {
  std::string s;
  for (const auto& e : megatron_env(r)) s += e + "\n";
  return s;
}

}  // namespace

NodeLayout node_layout(const Cluster& c) {
  const int per_node = c.hw.gpus_per_node;
  if (per_node <= 0) return {1, c.num_gpus, false};  // refused by check_node_layout
  if (c.num_gpus < per_node) return {1, c.num_gpus, true};
  return {c.num_gpus / per_node, per_node, false};
}

void check_node_layout(const LaunchRequest& r, RuleSink& sink) {
  const Cluster& c = r.cluster;
  const int per_node = c.hw.gpus_per_node;
  if (per_node <= 0) {
    sink.refuse_at(
        "cluster/hw/gpus_per_node",
        "the profile " + c.hw.name + " has no GPU count per node, got " + std::to_string(per_node),
        "set gpus_per_node in the hardware profile");
    return;
  }
  if (c.num_gpus > per_node && c.num_gpus % per_node != 0) {
    const int below = c.num_gpus / per_node * per_node;
    sink.refuse("gpus",
                "gpus=" + std::to_string(c.num_gpus) + " must fill whole nodes of " +
                    std::to_string(per_node) + " GPUs (" + c.hw.name + ")",
                "use " + std::to_string(below) + " or " + std::to_string(below + per_node) +
                    " GPUs, or fewer than one node");
  }
}

std::vector<std::string> torchrun_notes(const LaunchRequest& r) {
  const NodeLayout n = node_layout(r.cluster);
  std::vector<std::string> notes = {
      "Run this on each of the " + std::to_string(n.nodes) +
      " node(s) from the Megatron-LM directory, with MASTER_ADDR (the first node) and "
      "MASTER_PORT set alike on all."};
  for (auto& s : megatron_common_notes(r)) notes.push_back(std::move(s));
  return notes;
}

std::string emit_torchrun(const LaunchRequest& r) {
  const NodeLayout n = node_layout(r.cluster);
  return "# torchrun for Megatron-LM: " + plan_summary(r) + "\n" +
         comment_lines(torchrun_notes(r)) + env_lines(r) +
         torchrun_command(r, "", std::to_string(n.nodes), job_name(r));
}

std::vector<std::string> slurm_notes(const LaunchRequest& r) {
  std::vector<std::string> notes = {
      "Submit with sbatch from the Megatron-LM directory; add your partition, account and time "
      "limit, and tune --cpus-per-task to your nodes."};
  if (node_layout(r.cluster).partial_node)
    notes.push_back(
        "The plan uses part of one node, so the job does not ask for it "
        "exclusively.");
  for (auto& s : megatron_common_notes(r)) notes.push_back(std::move(s));
  return notes;
}

std::string emit_slurm(const LaunchRequest& r) {
  const NodeLayout n = node_layout(r.cluster);
  std::string s = "#!/bin/bash\n";
  s += "#SBATCH --job-name=" + job_name(r) + "\n";
  s += "#SBATCH --nodes=" + std::to_string(n.nodes) + "\n";
  s += "#SBATCH --ntasks-per-node=1\n";
  s += "#SBATCH --gpus-per-node=" + std::to_string(n.procs_per_node) + "\n";
  s += "#SBATCH --cpus-per-task=" + std::to_string(kCpusPerGpu * n.procs_per_node) + "\n";
  if (!n.partial_node) s += "#SBATCH --exclusive\n";
  // The description follows the directives: sbatch reads #SBATCH lines only up to the first
  // command, so they stay together at the top.
  s += "\n# Slurm job for Megatron-LM: " + plan_summary(r) + "\n" + comment_lines(slurm_notes(r));
  s += "\nset -euo pipefail\n";
  s += "export MASTER_ADDR=\"$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\"\n";
  s += "export MASTER_PORT=\"${MASTER_PORT:-" + std::to_string(kDefaultMasterPort) + "}\"\n";
  s += env_lines(r) + "\n";
  s += torchrun_command(r, "srun ", "\"$SLURM_NNODES\"", "\"$SLURM_JOB_ID\"");
  return s;
}

}  // namespace parallax::launch
