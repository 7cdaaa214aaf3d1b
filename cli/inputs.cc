#include "cli/inputs.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>

#include "core/hf_config.h"
#include "core/model_zoo.h"
#include "core/software_stack.h"
#include "core/text.h"

namespace parallax::cli {

namespace fs = std::filesystem;

namespace {

std::string range_text(double lo, double hi) {
  return "[" + format_number("%g", lo) + ", " + format_number("%g", hi) + "]";
}

}  // namespace

CLI::Validator finite_in(double lo, double hi, const std::string& why) {
  return CLI::Validator(
      [lo, hi, why](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0' || !std::isfinite(v) || v < lo || v > hi)
          return "got '" + text_excerpt(text, 40) + "', want a number in " + range_text(lo, hi) +
                 (why.empty() ? "" : " (" + why + ")");
        return "";
      },
      "FLOAT in " + range_text(lo, hi));
}

CLI::Validator count_in(int64_t lo, int64_t hi, const std::string& why) {
  return CLI::Validator(
      [lo, hi, why](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(text.c_str(), &end, 10);
        if (end == text.c_str() || *end != '\0' || errno == ERANGE || v < lo || v > hi)
          return "got '" + text_excerpt(text, 40) + "', want an integer in [" + std::to_string(lo) +
                 ", " + std::to_string(hi) + "]" + (why.empty() ? "" : " (" + why + ")");
        return "";
      },
      "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

Result<std::string> read_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return Diagnostic{path, "is a directory", "give a file"};
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Diagnostic{path, "cannot open file",
                      std::error_code(errno, std::generic_category()).message()};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void remove_stale_temporaries(const std::string& path) {
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const std::string prefix = p.filename().string() + ".tmp.";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string pid_text = name.substr(prefix.size());
    if (pid_text.size() > 9 || pid_text.find_first_not_of("0123456789") != std::string::npos)
      continue;
    const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
    // Only a writer that no longer runs: kill(pid, 0) fails with ESRCH for no such process.
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    if (fs::remove(e.path(), ec))
      std::cerr << "note: removed " << e.path().string()
                << ", left by an interrupted write (process " << pid << ")\n";
  }
}

Result<bool> write_file_atomic(const std::string& path, const std::string& text) {
  remove_stale_temporaries(path);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      return Diagnostic{path, "cannot write file",
                        std::error_code(errno, std::generic_category()).message()};
    out << text;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      return Diagnostic{path, "write failed", "disk full?"};
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    return Diagnostic{path, "cannot rename temporary file into place", ec.message()};
  }
  return true;
}

Result<std::vector<HwProfile>> load_profiles(const std::string& extra_dir) {
  auto builtin = builtin_profiles();
  if (!builtin) return builtin.errors();
  std::vector<HwProfile> out = builtin.value();
  if (extra_dir.empty()) return out;
  std::error_code ec;
  if (!fs::is_directory(extra_dir, ec))
    return Diagnostic{"--profiles-dir", "not a directory: " + extra_dir, ""};
  Diagnostics d;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(extra_dir, ec))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    auto text = read_file(path.string());
    if (!text) {
      d.insert(d.end(), text.errors().begin(), text.errors().end());
      continue;
    }
    auto j = parse_json(text.value(), path.string());
    if (!j) {
      d.insert(d.end(), j.errors().begin(), j.errors().end());
      continue;
    }
    auto p = profile_from_json(j.value(), path.string() + ":");
    if (!p) {
      d.insert(d.end(), p.errors().begin(), p.errors().end());
      continue;
    }
    auto same =
        std::find_if(out.begin(), out.end(), [&](const HwProfile& h) { return h.name == p->name; });
    if (same != out.end())
      *same = p.value();
    else
      out.push_back(p.value());
  }
  if (!d.empty()) return d;
  return out;
}

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

Result<HwProfile> resolve_profile(const std::string& name_or_path, const std::string& extra_dir,
                                  const std::string& where) {
  const bool looks_like_file =
      name_or_path.find('/') != std::string::npos ||
      (name_or_path.size() > 5 && name_or_path.substr(name_or_path.size() - 5) == ".json");
  if (looks_like_file) {
    auto text = read_file(name_or_path);
    if (!text) return text.errors();
    auto j = parse_json(text.value(), name_or_path);
    if (!j) return j.errors();
    return profile_from_json(j.value(), name_or_path + ":");
  }
  auto profiles = load_profiles(extra_dir);
  if (!profiles) return profiles.errors();
  return find_profile(profiles.value(), name_or_path, where);
}

Result<ModelSpec> resolve_model(const std::string& name_or_path, const std::string& where) {
  const bool looks_like_file =
      name_or_path.find('/') != std::string::npos ||
      (name_or_path.size() > 5 && name_or_path.substr(name_or_path.size() - 5) == ".json");
  if (!looks_like_file) return find_zoo_model(name_or_path, where);
  auto text = read_file(name_or_path);
  if (!text) return text.errors();
  auto j = parse_json(text.value(), name_or_path);
  if (!j) return j.errors();
  const Json& cfg = j.value();
  if (cfg.is_object() && (cfg.contains("num_hidden_layers") || cfg.contains("model_type"))) {
    std::string stem = fs::path(name_or_path).stem().string();
    if (stem == "config") stem = fs::path(name_or_path).parent_path().filename().string();
    return model_from_hf_config(cfg, stem.empty() ? "hf-model" : stem, name_or_path + ":");
  }
  const Json& m =
      cfg.is_object() && cfg.contains("model") && cfg["model"].is_object() ? cfg["model"] : cfg;
  return model_from_json(m, name_or_path + ":" + (&m == &cfg ? "" : "/model"));
}

namespace {

/// A 1/0 switch: the flag alone means 1.
void add_switch(CLI::App* cmd, const char* name, int* target, const std::string& help) {
  cmd->add_option(name, *target, help)->check(CLI::Range(0, 1))->expected(0, 1)->default_str("1");
}

}  // namespace

void add_layout_flags(CLI::App* cmd, LayoutFlags* f) {
  cmd->add_option(
      "--model", f->model,
      "zoo model name (see `parallax models`), a model JSON, or a Hugging Face config.json");
  cmd->add_option("--cluster", f->cluster,
                  "hardware profile name (see `parallax profiles`) or a profile JSON (e.g. one "
                  "written by `parallax calibrate`)");
  cmd->add_option("--gpus", f->gpus, "number of GPUs (= tp*pp*dp*cp)");
  cmd->add_option("--tp", f->tp, "tensor-parallel degree");
  cmd->add_option("--pp", f->pp, "pipeline-parallel degree");
  cmd->add_option("--dp", f->dp, "data-parallel degree (derived from --gpus when left out)");
  cmd->add_option("--cp", f->cp, "context-parallel degree");
  cmd->add_option("--ep", f->ep, "expert-parallel degree (MoE)");
  cmd->add_option("--etp", f->etp, "expert tensor-parallel degree (MoE)");
  cmd->add_option("--vpp", f->vpp, "virtual pipeline stages per rank (interleaved schedule)");
  cmd->add_option("--mbs", f->mbs, "micro-batch size in sequences");
  cmd->add_option("--gbs", f->gbs, "global batch size in sequences");
  cmd->add_option("--seq", f->seq, "sequence length in tokens");
  add_switch(cmd, "--sp", &f->sp, "sequence parallelism (1/0; the flag alone means 1)");
  cmd->add_option("--recompute", f->recompute,
                  "activation recomputation: none | selective (attention core, Megatron) | "
                  "selective-op (every other matmul saved, TorchTitan) | full");
  cmd->add_option("--zero", f->zero, "ZeRO stage 0-3 (1 = distributed optimizer)");
  add_switch(cmd, "--fsdp", &f->fsdp,
             "PyTorch FSDP2 parameter sharding (1/0; the flag alone means 1)");
  cmd->add_option("--schedule", f->schedule,
                  "pipeline schedule: 1f1b | interleaved | zb-h1 | dualpipe");
  cmd->add_option("--precision", f->precision, "bf16 | fp8 | mxfp8 | nvfp4");
  cmd->add_option("--cp-comm", f->cp_comm, "context-parallel K/V exchange: ring | allgather");
  cmd->add_option(
      "--attention", f->attention,
      "attention kernel: flash (fused; FlashAttention-3/cuDNN on Hopper) | flash2 "
      "(FlashAttention-2, PyTorch SDPA) | flash1 (FlashAttention-1) | unfused (materialised s x s "
      "scores)");
  add_switch(cmd, "--eager", &f->eager,
             "elementwise ops as PyTorch eager runs them (one kernel per op, norms and rotary "
             "embeddings in fp32; TorchTitan without torch.compile) instead of fused (1/0)");
  cmd->add_option("--moe-imbalance", f->moe_imbalance,
                  "routed tokens on the busiest expert-parallel rank over the mean (>= 1; 1 = even "
                  "routing): that rank's experts and received tokens set each MoE layer's time");
  cmd->add_option("--moe-dispatcher", f->moe_dispatcher,
                  "MoE token dispatcher: alltoall (NCCL) | allgather | flex (DeepEP)");
  cmd->add_option("--moe-max-nodes", f->moe_max_nodes,
                  "node-limited routing: the most nodes of the expert-parallel group a token's "
                  "experts lie on (0 = the model's own routing)");
  cmd->add_option(
      "--moe-capacity-factor", f->moe_capacity_factor,
      "expert capacity over the mean load; copies beyond it are dropped (0 = dropless)");
  add_switch(cmd, "--overlap-moe-comm", &f->overlap_moe,
             "overlap expert-parallel communication with another microbatch's compute "
             "(Megatron's combined 1F1B; pp=1 or interleaved) (1/0)");
  add_switch(cmd, "--overlap-tp-comm", &f->overlap_tp, "overlap TP communication with GEMMs (1/0)");
  add_switch(cmd, "--overlap-grad-reduce", &f->overlap_grad,
             "overlap DP gradient reduction with backward (1/0)");
  add_switch(cmd, "--overlap-param-gather", &f->overlap_param,
             "overlap ZeRO parameter all-gather with forward (1/0)");
  add_switch(cmd, "--pp-scatter-gather", &f->pp_scatter_gather,
             "without SP, split each pipeline send over the TP ranks and all-gather it on "
             "arrival (Megatron-LM before Megatron-Core) (1/0)");
  cmd->add_option("--scenario,--plan", f->scenario,
                  "scenario or plan JSON (model, cluster, layout, settings; a plan file from "
                  "`parallax plan --out`); flags override it");
  cmd->add_option("--profiles-dir", f->profiles_dir,
                  "directory of extra hardware profiles (*.json)");
}

namespace {

/// The built-in default: Llama-3.1 70B on 64 H100s, a layout that fits.
ParallelPlan default_plan() {
  ParallelPlan p;
  p.tp = 8;
  p.pp = 1;
  p.micro_batch = 1;
  p.global_batch = 128;
  p.seq_len = 8192;
  p.sequence_parallel = true;
  p.recompute = Recompute::kFull;
  p.zero_stage = 1;
  return p;
}

void flag_enum(const std::string& value, const char* flag, auto parse, auto* target,
               const char* valid, Diagnostics* d) {
  if (!value.empty()) assign_enum(value, flag, "value", parse, target, valid, d);
}

}  // namespace

namespace {

/// Applies the numeric flags that were given; every given value must be positive and within
/// the bounds of a layout (core/parallel_plan.h), checked here so that no value wraps in an int.
void apply_numeric_flags(const LayoutFlags& f, ParallelPlan* p, Diagnostics* d) {
  auto set_int = [](int* target) { return [target](int64_t v) { *target = static_cast<int>(v); }; };
  const struct {
    const char* name;
    int64_t value;
    int64_t max;
    std::function<void(int64_t)> set;
  } numeric[] = {
      {"tp", f.tp, kMaxGpus, set_int(&p->tp)},
      {"pp", f.pp, kMaxGpus, set_int(&p->pp)},
      {"dp", f.dp, kMaxGpus, set_int(&p->dp)},
      {"cp", f.cp, kMaxGpus, set_int(&p->cp)},
      {"ep", f.ep, kMaxGpus, set_int(&p->ep)},
      {"etp", f.etp, kMaxGpus, set_int(&p->etp)},
      {"vpp", f.vpp, kMaxGpus, set_int(&p->vpp)},
      {"mbs", f.mbs, kMaxGlobalBatch, set_int(&p->micro_batch)},
      {"gbs", f.gbs, kMaxGlobalBatch, [p](int64_t v) { p->global_batch = v; }},
      {"seq", f.seq, kMaxSeqLen, [p](int64_t v) { p->seq_len = v; }},
      {"gpus", f.gpus, kMaxGpus, [](int64_t) {}},
  };
  for (const auto& n : numeric) {
    if (n.value == kUnset) continue;
    if (n.value <= 0)
      d->push_back({std::string("--") + n.name,
                    std::string(n.name) + " must be positive, got " + std::to_string(n.value), ""});
    else if (n.value > n.max)
      d->push_back({std::string("--") + n.name,
                    std::string(n.name) + "=" + std::to_string(n.value) + " is out of range",
                    "at most " + std::to_string(n.max)});
    else
      n.set(n.value);
  }
  if (f.zero != kUnset) {
    if (f.zero < 0 || f.zero > 3)
      d->push_back({"--zero", "zero=" + std::to_string(f.zero) + " must be 0, 1, 2 or 3",
                    "1 = distributed optimizer, 3 = sharded parameters"});
    else
      p->zero_stage = f.zero;
  }
  if (f.sp >= 0) p->sequence_parallel = f.sp != 0;
  if (f.fsdp >= 0) p->fsdp = f.fsdp != 0;
  if (f.eager >= 0) p->eager = f.eager != 0;
  if (f.moe_imbalance) p->moe_imbalance = *f.moe_imbalance;
  if (f.moe_capacity_factor) p->moe_capacity_factor = *f.moe_capacity_factor;
  if (f.moe_max_nodes != kUnset)
    p->moe_max_nodes = static_cast<int>(std::clamp<int64_t>(f.moe_max_nodes, -1, kMaxGpus));
  if (f.overlap_moe >= 0) p->overlap_moe_comm = f.overlap_moe != 0;
  flag_enum(f.moe_dispatcher, "--moe-dispatcher", parse_moe_dispatcher, &p->moe_dispatcher,
            "alltoall, allgather, flex", d);
  if (f.overlap_tp >= 0) p->overlap_tp_comm = f.overlap_tp != 0;
  if (f.overlap_grad >= 0) p->overlap_grad_reduce = f.overlap_grad != 0;
  if (f.overlap_param >= 0) p->overlap_param_gather = f.overlap_param != 0;
  if (f.pp_scatter_gather >= 0) p->pp_scatter_gather = f.pp_scatter_gather != 0;
  flag_enum(f.recompute, "--recompute", parse_recompute, &p->recompute,
            "none, selective, selective-op, full", d);
  flag_enum(f.schedule, "--schedule", parse_schedule, &p->schedule,
            "1f1b, interleaved, zb-h1, dualpipe", d);
  flag_enum(f.precision, "--precision", parse_precision, &p->precision, kPrecisionNames, d);
  flag_enum(f.cp_comm, "--cp-comm", parse_cp_comm, &p->cp_comm, "ring, allgather", d);
  flag_enum(f.attention, "--attention", parse_attention, &p->attention,
            "flash, flash2, flash1, unfused", d);
  if (f.vpp != kUnset && f.vpp > 1 && f.schedule.empty())
    p->schedule = ScheduleKind::kInterleaved1F1B;
}

/// Plan fields given by flag are named as flags, the rest by their place in the scenario file.
FieldLocator locator_for(const LayoutFlags& f) {
  if (f.scenario.empty()) return flag_locator();
  const FieldLocator in_file = json_locator(f.scenario + ":");
  const std::map<std::string, bool> by_flag = {
      {"tp", f.tp != kUnset},
      {"pp", f.pp != kUnset},
      {"dp", f.dp != kUnset},
      {"cp", f.cp != kUnset},
      {"ep", f.ep != kUnset},
      {"etp", f.etp != kUnset},
      {"vpp", f.vpp != kUnset},
      {"mbs", f.mbs != kUnset},
      {"gbs", f.gbs != kUnset},
      {"seq", f.seq != kUnset},
      {"gpus", f.gpus != kUnset},
      {"sp", f.sp >= 0},
      {"zero", f.zero != kUnset},
      {"schedule", !f.schedule.empty()},
      {"precision", !f.precision.empty()},
      {"moe-imbalance", f.moe_imbalance.has_value()},
      {"moe-dispatcher", !f.moe_dispatcher.empty()},
      {"moe-max-nodes", f.moe_max_nodes != kUnset},
      {"moe-capacity-factor", f.moe_capacity_factor.has_value()},
      {"overlap-moe-comm", f.overlap_moe >= 0}};
  return [by_flag, in_file](const char* field) {
    auto it = by_flag.find(field);
    return it != by_flag.end() && it->second ? std::string("--") + field : in_file(field);
  };
}

}  // namespace

Result<ParallelPlan> with_stack(const std::string& name, const LayoutFlags& f, ParallelPlan p) {
  const StackKernels* stack = find_stack_kernels(name);
  if (!stack) {
    std::string names;
    for (const auto& s : builtin_stacks()) names += (names.empty() ? "" : ", ") + s.framework;
    return Diagnostic{"--stack", "no stack profile '" + printable(name) + "'", "valid: " + names};
  }
  const ParallelPlan s = apply_stack(*stack, p);
  if (f.attention.empty()) p.attention = s.attention;
  if (f.eager < 0) p.eager = s.eager;
  if (f.cp_comm.empty()) p.cp_comm = s.cp_comm;
  if (f.pp_scatter_gather < 0) p.pp_scatter_gather = s.pp_scatter_gather;
  if (f.overlap_tp < 0) p.overlap_tp_comm = s.overlap_tp_comm;
  if (f.overlap_grad < 0) p.overlap_grad_reduce = s.overlap_grad_reduce;
  if (f.overlap_param < 0) p.overlap_param_gather = s.overlap_param_gather;
  p.recompute = s.recompute;  // 'selective' as the stack does it
  return p;
}

Result<ResolvedRun> resolve_run(const LayoutFlags& f, bool check_layout) {
  Diagnostics d;
  Scenario sc;
  sc.plan = default_plan();
  if (!f.scenario.empty()) {
    auto text = read_file(f.scenario);
    if (!text) return text.errors();
    auto j = parse_json(text.value(), f.scenario);
    if (!j) return j.errors();
    auto s = scenario_from_json(j.value(), f.scenario + ":", sc.plan);
    if (!s) return s.errors();
    sc = s.value();
  }
  ParallelPlan& p = sc.plan;
  apply_numeric_flags(f, &p, &d);
  const FieldLocator locate = locator_for(f);

  // Model and hardware.
  ResolvedRun run;
  const std::string model_name = !f.model.empty() ? f.model : sc.model_name.value_or("");
  bool have_model = true, have_hw = true;
  if (!model_name.empty()) {
    auto m = resolve_model(model_name, f.model.empty() ? f.scenario + ":/model" : "--model");
    if (m)
      run.model = m.value();
    else
      d.insert(d.end(), m.errors().begin(), m.errors().end()), have_model = false;
  } else if (sc.model) {
    run.model = *sc.model;
  } else {
    run.model = resolve_model("llama3.1-70b", "--model").value();
  }
  const std::string gpu = !f.cluster.empty() ? f.cluster : sc.gpu.value_or("h100-sxm-80gb");
  auto hw =
      resolve_profile(gpu, f.profiles_dir,
                      f.cluster.empty() && sc.gpu ? f.scenario + ":/cluster/gpu" : "--cluster");
  if (hw)
    run.cluster.hw = hw.value();
  else
    d.insert(d.end(), hw.errors().begin(), hw.errors().end()), have_hw = false;

  // GPU count and dp: either may be derived from the other.
  // In 64 bits: degrees read from a plan file are only bounded by validate_plan, below. A
  // product past kMaxGpus divides no GPU count validate_plan accepts.
  const int64_t model_par = int64_t{std::max(1, p.tp)} * std::max(1, p.pp) * std::max(1, p.cp);
  const bool dp_given = f.dp != kUnset || sc.dp_given;
  int gpus = f.gpus != kUnset ? static_cast<int>(f.gpus) : sc.num_gpus.value_or(0);
  bool gpus_error = false;
  if (!dp_given) {
    if (gpus <= 0) gpus = 64;
    p.dp = static_cast<int>(std::max<int64_t>(1, gpus / model_par));
    if (check_layout && gpus % model_par != 0) {
      d.push_back({locate("gpus"),
                   "gpus=" + std::to_string(gpus) +
                       " is not a multiple of tp*pp*cp=" + std::to_string(model_par),
                   "pick --gpus as a multiple of " + std::to_string(model_par) + " or give --dp"});
      gpus_error = true;
    }
  } else if (gpus <= 0) {
    // Clamped rather than wrapped: validate_plan names a product past kMaxGpus.
    const int64_t product = model_par * std::max(1, p.dp);
    gpus = static_cast<int>(std::min<int64_t>(product, std::numeric_limits<int>::max()));
  }
  run.cluster.num_gpus = gpus;
  run.plan = p;
  // Check the plan too, so one run reports every problem; the gpus mismatch is said once.
  if (have_model && have_hw && check_layout) {
    for (auto& e : validate_plan(run.model, run.cluster, run.plan, locate))
      if (!(gpus_error && e.what.rfind("gpus=", 0) == 0)) d.push_back(std::move(e));
  }
  if (!d.empty()) return d;
  return run;
}

std::string printable(const std::string& s) { return text_excerpt(s, 2000, /*keep_layout=*/true); }

int report_errors(const Diagnostics& d) {
  // One write per line: the ranks of an MPI job share the terminal, and unbuffered pieces of
  // their lines would interleave.
  for (const auto& e : d) std::cerr << ("error: " + printable(e.str()) + "\n") << std::flush;
  return kExitBadInput;
}

void report_warnings(const Diagnostics& d) {
  for (const auto& e : d) std::cerr << ("warning: " + printable(e.str()) + "\n") << std::flush;
}

Result<ServingInputs> resolve_serving_inputs(const std::string& model, const std::string& cluster,
                                             const std::string& profiles_dir,
                                             const std::string& precision) {
  Diagnostics bad;
  auto m = resolve_model(model, "--model");
  auto hw = resolve_profile(cluster, profiles_dir, "--cluster");
  if (!m) bad.insert(bad.end(), m.errors().begin(), m.errors().end());
  if (!hw) bad.insert(bad.end(), hw.errors().begin(), hw.errors().end());
  const auto p = parse_precision(precision);
  if (!p) bad.push_back({"--precision", "unknown precision " + precision, "bf16 | fp8"});
  if (p && is_block_scaled(*p))
    bad.push_back({"--precision",
                   "serving is simulated with bf16 or fp8 weights and GEMMs, got " + precision +
                       " (a block-scaled training recipe here)",
                   "bf16 | fp8"});
  if (!bad.empty()) return bad;
  return ServingInputs{std::move(m).value(), std::move(hw).value(), *p};
}

}  // namespace parallax::cli
