#include "cli/plan_inputs.h"

#include <cstdlib>

namespace parallax::cli {
namespace {

std::optional<Objective> parse_objective(const std::string& s) {
  if (s == "throughput") return Objective::kThroughput;
  if (s == "time-to-train" || s == "time") return Objective::kTimeToTrain;
  if (s == "cost") return Objective::kCost;
  return std::nullopt;
}

/// "10%" or a fraction "0.1"; empty: the default.
std::optional<double> parse_headroom(const std::string& s) {
  if (s.empty()) return kDefaultMemoryHeadroom;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str()) return std::nullopt;
  const std::string rest(end);
  // A fraction of HBM in [0, 1): NaN fails every comparison and is refused with the rest.
  const double fraction = rest == "%" ? v / 100 : rest.empty() ? v : -1;
  if (fraction >= 0 && fraction < 1) return fraction;
  return std::nullopt;
}

int pin(int64_t flag) { return flag == kUnset ? 0 : static_cast<int>(flag); }

}  // namespace

void add_plan_flags(CLI::App* cmd, PlanFlags* f) {
  cmd->add_option("--objective", f->objective,
                  "throughput (default) | time-to-train | cost (GPU-hours; may use fewer GPUs); "
                  "the last two need --tokens");
  cmd->add_option("--tokens", f->tokens, "token budget to train, e.g. 15e12")
      ->check(finite_in(1, 1e18, "tokens to train"));
  cmd->add_option("--max-days", f->max_days,
                  "with --tokens: keep only plans that train them within this many days (a "
                  "deadline for --objective cost, which may otherwise pick a few GPUs for years)")
      ->check(finite_in(1e-3, 1e5, "days"));
  cmd->add_option("--framework", f->framework,
                  std::string("keep only plans this framework runs, simulated with its stack and "
                              "its switches searched (torchtitan: per-op selective recompute, SDPA "
                              "attention, async TP; deepspeed: SDPA, eager, no TP): ") +
                      launch_target_names() +
                      "; default: any of megatron, torchtitan, deepspeed; none: every layout, "
                      "the theoretical best, which no framework may run");
  cmd->add_option("--memory-headroom", f->memory_headroom,
                  "HBM to leave free beyond the simulated peak (which holds the profile's "
                  "reserved_gib: CUDA context, NCCL buffers), as a percentage (10%) or a fraction "
                  "(0.1); default 10%, what PyTorch's caching allocator reserves beyond what it "
                  "hands out (measured 11-15% in LLM training; sources in the README)");
  cmd->add_option("--max-tp", f->max_tp, "largest tensor-parallel degree")
      ->check(count_in(1, kMaxGpus));
  cmd->add_option("--max-pp", f->max_pp, "largest pipeline-parallel degree")
      ->check(count_in(1, kMaxGpus));
  cmd->add_option("--max-cp", f->max_cp, "largest context-parallel degree")
      ->check(count_in(1, kMaxGpus));
  cmd->add_option("--max-vpp", f->max_vpp, "most virtual stages per pipeline rank")
      ->check(count_in(1, 1024));
  cmd->add_option("--max-mbs", f->max_mbs, "largest micro batch")->check(count_in(1, 1 << 16));
  cmd->add_flag("--tp-across-domains", f->tp_across_domains,
                "allow tensor parallelism beyond one NVLink domain");
  cmd->add_option("--threads", f->threads, "worker threads (default: all cores)")
      ->check(CLI::Range(0, 1024));
}

Result<ResolvedPlanRequest> resolve_plan_request(const LayoutFlags& layout, const PlanFlags& f) {
  auto run = resolve_run(layout, /*check_layout=*/false);
  if (!run) return run.errors();
  Diagnostics d;
  ResolvedPlanRequest out;
  PlanRequest& r = out.request;
  r.model = run->model;
  r.cluster = run->cluster;
  if (layout.gpus == kUnset && layout.scenario.empty() && layout.dp != kUnset)
    r.cluster.num_gpus = run->plan.gpus();
  r.global_batch = run->plan.global_batch;
  r.seq_len = run->plan.seq_len;
  r.settings = run->plan;
  PlanConstraints& c = r.constraints;
  c.tp = pin(layout.tp);
  c.pp = pin(layout.pp);
  c.dp = pin(layout.dp);
  c.cp = pin(layout.cp);
  c.ep = pin(layout.ep);
  c.etp = pin(layout.etp);
  c.vpp = pin(layout.vpp);
  c.mbs = pin(layout.mbs);
  if (layout.zero != kUnset) c.zero = static_cast<int>(layout.zero);
  if (layout.fsdp >= 0) c.fsdp = layout.fsdp == 1;
  if (layout.sp >= 0) c.sequence_parallel = layout.sp == 1;
  if (!layout.recompute.empty()) c.recompute = run->plan.recompute;
  if (!layout.schedule.empty()) c.schedule = run->plan.schedule;
  if (!layout.cp_comm.empty()) c.cp_comm = run->plan.cp_comm;
  c.max_tp = f.max_tp;
  c.max_pp = f.max_pp;
  c.max_cp = f.max_cp;
  c.max_vpp = f.max_vpp;
  c.max_mbs = f.max_mbs;
  c.tp_across_domains = f.tp_across_domains;
  if (auto h = parse_headroom(f.memory_headroom))
    c.memory_headroom = *h;
  else
    d.push_back({"--memory-headroom", "cannot read '" + f.memory_headroom + "'",
                 "a percentage like 10% or a fraction like 0.1"});
  if (!layout.attention.empty()) c.attention = run->plan.attention;
  if (layout.eager >= 0) c.eager = layout.eager == 1;
  if (layout.overlap_tp >= 0) c.overlap_tp_comm = layout.overlap_tp == 1;
  if (layout.overlap_grad >= 0) c.overlap_grad_reduce = layout.overlap_grad == 1;
  if (layout.overlap_param >= 0) c.overlap_param_gather = layout.overlap_param == 1;
  if (f.framework == "none") {
    c.frameworks.clear();
  } else if (!f.framework.empty()) {
    if (auto t = parse_launch_target(f.framework))
      c.frameworks = {*t};
    else
      d.push_back({"--framework", "unknown framework '" + f.framework + "'",
                   std::string("valid: ") + launch_target_names() + ", none"});
  }
  if (!parse_objective(f.objective))
    d.push_back({"--objective", "unknown objective '" + f.objective + "'",
                 "valid: throughput, time-to-train, cost"});
  if (f.tokens < 0) d.push_back({"--tokens", "the token budget must be positive", ""});
  const Diagnostics req = validate_request(r);
  d.insert(d.end(), req.begin(), req.end());
  if (!d.empty()) return d;
  return out;
}

SearchOptions search_options(const PlanFlags& f) {
  SearchOptions o;
  o.objective = parse_objective(f.objective).value_or(Objective::kThroughput);
  o.token_budget = f.tokens;
  o.max_days = f.max_days;
  o.threads = f.threads;
  return o;
}

}  // namespace parallax::cli
