#include "core/software_stack.h"

#include "core/builtin_profiles.h"

namespace parallax {

Result<StackKernels> stack_from_json(const Json& j, const std::string& where) {
  Diagnostics d;
  JsonFields f(j, where, &d);
  f.reject_unknown({"name", "framework", "description", "attention", "eager", "fp8_compiled",
                    "selective_recompute", "pp_scatter_gather", "cp_comm", "microbatch_per_stage",
                    "dropout", "overlap_grad_reduce", "overlap_param_gather", "overlap_tp_comm",
                    "launch_target"});
  StackKernels s;
  s.framework = f.name("framework");
  s.description = f.string("description", "");
  const std::string attention = f.string("attention");
  if (auto a = parse_attention(attention))
    s.attention = *a;
  else if (d.empty())
    d.push_back({f.path("attention"), "unknown attention kernel '" + attention + "'",
                 "valid: flash, flash2, flash1, unfused"});
  s.eager = f.boolean("eager");
  s.fp8_compiled = f.boolean("fp8_compiled");
  const std::string selective = f.string("selective_recompute");
  if (selective != "attention-core" && selective != "per-op" && d.empty())
    d.push_back({f.path("selective_recompute"), "unknown mode '" + selective + "'",
                 "valid: attention-core, per-op"});
  s.selective_per_op = selective == "per-op";
  s.pp_scatter_gather = f.boolean("pp_scatter_gather");
  const std::string cp = f.string("cp_comm");
  if (auto c = parse_cp_comm(cp))
    s.cp_comm = *c;
  else if (d.empty())
    d.push_back({f.path("cp_comm"), "unknown exchange '" + cp + "'", "valid: ring, allgather"});
  s.microbatch_per_stage = f.boolean("microbatch_per_stage");
  s.default_dropout = f.number_in("dropout", 0, 1, "a dropout probability");
  s.overlap_grad_reduce = f.boolean("overlap_grad_reduce");
  s.overlap_param_gather = f.boolean("overlap_param_gather");
  s.overlap_tp_comm = f.boolean("overlap_tp_comm");
  s.launch_target = f.string("launch_target", "");
  if (!d.empty()) return d;
  return s;
}

const std::vector<StackKernels>& builtin_stacks() {
  static const std::vector<StackKernels> stacks = [] {
    std::vector<StackKernels> out;
    for (const auto& [stem, text] : builtin_stack_texts()) {
      const std::string file = "stacks/" + stem + ".json";
      auto j = parse_json(text, file);
      PX_CHECK(j.ok(), "built-in stack profile: " + j.error_text());
      auto s = stack_from_json(j.value(), file + ":");
      PX_CHECK(s.ok(), "built-in stack profile: " + s.error_text());
      PX_CHECK(s->framework == stem, file + ": framework must be the file's name");
      out.push_back(std::move(s).value());
    }
    return out;
  }();
  return stacks;
}

const StackKernels* find_stack_kernels(const std::string& framework) {
  for (const auto& s : builtin_stacks())
    if (s.framework == framework) return &s;
  return nullptr;
}

const StackKernels& pytorch_fsdp_stack() {
  const StackKernels* s = find_stack_kernels("torchtitan");
  PX_CHECK(s != nullptr, "stacks/torchtitan.json is built in");
  return *s;
}

const StackKernels& megatron_stack() {
  const StackKernels* s = find_stack_kernels("megatron-lm");
  PX_CHECK(s != nullptr, "stacks/megatron-lm.json is built in");
  return *s;
}

ParallelPlan apply_stack(const StackKernels& s, ParallelPlan p) {
  p.attention = s.attention;
  p.eager = s.eager && !(s.fp8_compiled && p.precision == Precision::kFp8);
  p.cp_comm = s.cp_comm;
  p.pp_scatter_gather = s.pp_scatter_gather;
  if (s.selective_per_op && p.recompute == Recompute::kSelective)
    p.recompute = Recompute::kSelectiveOp;
  p.overlap_grad_reduce = s.overlap_grad_reduce;
  p.overlap_param_gather = s.overlap_param_gather;
  p.overlap_tp_comm = s.overlap_tp_comm;
  return p;
}

}  // namespace parallax
