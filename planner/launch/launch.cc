#include "planner/launch/launch.h"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <utility>

#include "planner/launch/emitters.h"

namespace parallax {

namespace launch {

void RuleSink::refuse(const char* field, std::string what, std::string hint) {
  // The same locator as validate_plan's, so both report one field at one path.
  static const FieldLocator loc = json_locator("plan");
  out_->push_back({loc(field), std::move(what), std::move(hint)});
}

void RuleSink::refuse_at(std::string where, std::string what, std::string hint) {
  out_->push_back({std::move(where), std::move(what), std::move(hint)});
}

std::string plan_summary(const LaunchRequest& r) {
  const ParallelPlan& p = r.plan;
  std::ostringstream s;
  s << r.model.name << " on " << r.cluster.num_gpus << " x " << r.cluster.hw.name << ": tp=" << p.tp
    << " pp=" << p.pp << " vpp=" << p.vpp << " dp=" << p.dp << " cp=" << p.cp << " ep=" << p.ep
    << " etp=" << p.etp << ", mbs=" << p.micro_batch << " gbs=" << p.global_batch
    << " seq=" << p.seq_len;
  return s.str();
}

std::string number_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::string comment_lines(const std::vector<std::string>& notes) {
  std::string s;
  for (const auto& n : notes) s += "# " + n + "\n";
  return s;
}

std::string shell_continued(const std::vector<std::string>& lines, int indent) {
  const std::string pad(static_cast<size_t>(indent), ' ');
  std::string s;
  for (size_t i = 0; i < lines.size(); ++i) {
    s += pad + lines[i];
    s += i + 1 < lines.size() ? " \\\n" : "\n";
  }
  return s;
}

std::string divisors_text(int64_t n) {
  std::string s = "{";
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0) {
      if (s.size() > 1) s += ",";
      s += std::to_string(d);
    }
  return s + "}";
}

std::optional<Diagnostic> pd_split_problem(int prefill_replicas, int dp) {
  if (prefill_replicas == 0 || (prefill_replicas > 0 && prefill_replicas < dp)) return std::nullopt;
  return Diagnostic{"--pd",
                    "a disaggregated deployment needs P prefill + D decode replicas with P, D >= 1 "
                    "and P + D = dp=" +
                        std::to_string(dp) + ", got P=" + std::to_string(prefill_replicas),
                    dp >= 2 ? "P in 1.." + std::to_string(dp - 1) + ", or 0 (colocated)"
                            : std::string("dp >= 2, or 0 (colocated)")};
}

std::string stage_module_names(const LaunchRequest& r, const char* output_name, int indent) {
  const ParallelPlan& p = r.plan;
  const int stages = p.pp * p.vpp;
  const std::string pad(static_cast<size_t>(indent), ' ');
  std::string s = "[\n";
  for (int v = 0; v < stages; ++v) {
    std::vector<std::string> names;
    if (v == 0) names.push_back("tok_embeddings");
    const int first = first_layer_of_virtual_stage(r.model, p, v);
    for (int l = first; l < first + layers_in_virtual_stage(r.model, p, v); ++l)
      names.push_back("layers." + std::to_string(l));
    if (v == stages - 1) {
      names.push_back("norm");
      names.push_back(output_name);
    }
    s += pad + "[";
    for (size_t i = 0; i < names.size(); ++i) s += (i ? ", \"" : "\"") + names[i] + "\"";
    s += "],\n";
  }
  return s + std::string(static_cast<size_t>(std::max(0, indent - 2)), ' ') + "]";
}

std::optional<Diagnostic> multi_host_pd_problem(const char* engine, int gpus, int gpus_per_node,
                                                int prefill_replicas) {
  if (gpus_per_node <= 0 || gpus <= gpus_per_node || prefill_replicas <= 0) return std::nullopt;
  return Diagnostic{"--pd",
                    std::string("parallax emits a disaggregated ") + engine +
                        " deployment on one host only, got " + std::to_string(gpus) +
                        " GPUs over hosts of " + std::to_string(gpus_per_node),
                    "a colocated deployment, or one host"};
}

bool even_stage_split(const ModelSpec& m, const ParallelPlan& p) {
  return m.layers % (p.pp * p.vpp) == 0;
}

}  // namespace launch

namespace {

struct TargetName {
  LaunchTarget target;
  const char* name;
};

constexpr TargetName kTargets[] = {
    {LaunchTarget::kMegatron, "megatron"},     {LaunchTarget::kDeepSpeed, "deepspeed"},
    {LaunchTarget::kTorchTitan, "torchtitan"}, {LaunchTarget::kTorchTitanMain, "torchtitan-main"},
    {LaunchTarget::kTorchrun, "torchrun"},     {LaunchTarget::kSlurm, "slurm"}};

/// True when every degree and size is positive, so the framework rules may divide by them.
/// validate_plan reports the ones that are not.
bool sizes_usable(const LaunchRequest& r) {
  const ParallelPlan& p = r.plan;
  const ModelSpec& m = r.model;
  return p.tp >= 1 && p.pp >= 1 && p.dp >= 1 && p.cp >= 1 && p.ep >= 1 && p.etp >= 1 &&
         p.vpp >= 1 && p.micro_batch >= 1 && p.global_batch > 0 && p.seq_len > 0 &&
         r.cluster.num_gpus > 0 && m.layers > 0 && m.heads > 0 && m.hidden > 0;
}

void check_target(LaunchTarget target, const LaunchRequest& r, launch::RuleSink& sink) {
  switch (target) {
    case LaunchTarget::kMegatron:
      launch::check_megatron(r, sink);
      return;
    case LaunchTarget::kDeepSpeed:
      launch::check_deepspeed(r, sink);
      return;
    case LaunchTarget::kTorchTitan:
      launch::check_torchtitan(r, sink);
      return;
    case LaunchTarget::kTorchTitanMain:
      launch::check_torchtitan_main(r, sink);
      return;
    case LaunchTarget::kTorchrun:
    case LaunchTarget::kSlurm:
      // Both launch pretrain_gpt.py: Megatron's rules, then whole nodes.
      launch::check_megatron(r, sink);
      launch::check_node_layout(r, sink);
      return;
  }
  PX_CHECK(false, "unknown launch target " << static_cast<int>(target));
}

}  // namespace

const char* to_string(LaunchTarget t) {
  for (const auto& e : kTargets)
    if (e.target == t) return e.name;
  return "?";
}

std::optional<LaunchTarget> parse_launch_target(const std::string& s) {
  std::string lower;
  for (unsigned char c : s) lower += static_cast<char>(std::tolower(c));
  for (const auto& e : kTargets)
    if (lower == e.name) return e.target;
  return std::nullopt;
}

const char* launch_target_names() {
  return "megatron, deepspeed, torchtitan, torchtitan-main, torchrun, slurm";
}

Diagnostics check_launch_of_valid_model(LaunchTarget target, const LaunchRequest& r) {
  static const FieldLocator plan_locator = json_locator("plan");
  Diagnostics out = validate_plan(r.model, r.cluster, r.plan, plan_locator);
  if (!sizes_usable(r)) return out;
  launch::RuleSink sink(&out);
  launch::check_moe_support(target, r, sink);
  check_target(target, r, sink);
  return out;
}

Diagnostics check_launch(LaunchTarget target, const LaunchRequest& r) {
  // A plan that does not fit its own model and cluster cannot run anywhere: those problems come
  // first, located like the framework's own.
  Diagnostics out = validate_model(r.model, "model");
  for (auto& d : check_launch_of_valid_model(target, r)) out.push_back(std::move(d));
  return out;
}

Result<std::string> emit_launch(LaunchTarget target, const LaunchRequest& r) {
  Diagnostics problems = check_launch(target, r);
  if (!problems.empty()) return problems;
  switch (target) {
    case LaunchTarget::kMegatron:
      return launch::emit_megatron(r);
    case LaunchTarget::kDeepSpeed:
      return launch::emit_deepspeed(r);
    case LaunchTarget::kTorchTitan:
      return launch::emit_torchtitan(r);
    case LaunchTarget::kTorchTitanMain:
      return launch::emit_torchtitan_main(r);
    case LaunchTarget::kTorchrun:
      return launch::emit_torchrun(r);
    case LaunchTarget::kSlurm:
      return launch::emit_slurm(r);
  }
  PX_CHECK(false, "unknown launch target " << static_cast<int>(target));
  return std::string();
}

std::vector<std::string> launch_notes(LaunchTarget target, const LaunchRequest& r) {
  // The notes divide by the plan's sizes; a plan with unusable ones gets none.
  if (!sizes_usable(r)) return {};
  switch (target) {
    case LaunchTarget::kMegatron:
      return launch::megatron_notes(r);
    case LaunchTarget::kDeepSpeed:
      return launch::deepspeed_notes(r);
    case LaunchTarget::kTorchTitan:
      return launch::torchtitan_notes(r);
    case LaunchTarget::kTorchTitanMain:
      return launch::torchtitan_main_notes(r);
    case LaunchTarget::kTorchrun:
      return launch::torchrun_notes(r);
    case LaunchTarget::kSlurm:
      return launch::slurm_notes(r);
  }
  PX_CHECK(false, "unknown launch target " << static_cast<int>(target));
  return {};
}

}  // namespace parallax
