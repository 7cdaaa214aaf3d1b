#include "planner/plan_space.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/software_stack.h"

namespace parallax {
namespace {

std::vector<int> divisors(int64_t n) {
  std::vector<int> out;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(static_cast<int>(d));
  return out;
}

/// Counts rejections by rule, keeping the order in which rules first appear.
class PruneLedger {
 public:
  void reject(const char* rule, int64_t n = 1) {
    auto [it, inserted] = index_.try_emplace(rule, counts_.size());
    if (inserted) counts_.push_back({rule, 0});
    counts_[it->second].count += n;
  }
  /// Adds another ledger's counts, keeping this one's order and then the other's.
  void merge(const PruneLedger& o) {
    for (const PruneCount& c : o.counts_) reject(c.rule.c_str(), c.count);
  }
  std::vector<PruneCount> take() { return std::move(counts_); }

 private:
  std::map<std::string, size_t> index_;
  std::vector<PruneCount> counts_;
};

bool pinned_out(int pin, int v) { return pin > 0 && pin != v; }

/// The degree combinations (tp, cp, pp, dp, ep, etp) that pass the structural rules.
std::vector<ParallelPlan> layouts(const PlanRequest& r, PruneLedger* ledger, int64_t* considered) {
  const ModelSpec& m = r.model;
  const PlanConstraints& c = r.constraints;
  const int n = r.cluster.num_gpus;
  const int domain = std::max(1, r.cluster.hw.scale_up_domain);
  std::vector<ParallelPlan> out;
  for (int tp : divisors(n)) {
    for (int cp : divisors(n / tp)) {
      for (int pp : divisors(n / tp / cp)) {
        const int dp = n / tp / cp / pp;
        const std::vector<int> eps = m.moe ? divisors(m.moe->experts) : std::vector<int>{1};
        const std::vector<int> etps = m.moe ? divisors(tp) : std::vector<int>{1};
        for (int ep : eps) {
          for (int etp : etps) {
            ++*considered;
            const char* rule = nullptr;
            if (pinned_out(c.tp, tp) || pinned_out(c.cp, cp) || pinned_out(c.pp, pp) ||
                pinned_out(c.dp, dp) || pinned_out(c.ep, ep) || pinned_out(c.etp, etp))
              rule = "a degree differs from one pinned by the user";
            else if ((c.max_tp > 0 && tp > c.max_tp) || (c.max_pp > 0 && pp > c.max_pp) ||
                     (c.max_cp > 0 && cp > c.max_cp))
              rule = "a degree exceeds a user limit (--max-tp/--max-pp/--max-cp)";
            else if (m.heads % tp != 0 || (!m.mla && m.kv_heads % tp != 0 && tp % m.kv_heads != 0))
              rule = "tp must divide the heads and kv-heads (or be a multiple of kv-heads)";
            else if (!c.tp_across_domains && (tp > domain || domain % tp != 0))
              rule = "tp must stay inside one NVLink domain";
            else if (pp > m.layers)
              rule = "pp exceeds the layers";
            else if (r.global_batch % dp != 0)
              rule = "global batch must be a multiple of dp";
            else if (cp > 1 && r.seq_len % (2 * cp) != 0)
              rule = "seq must split into 2*cp chunks (load-balanced causal context parallelism)";
            else if (m.moe && m.moe->experts % ep != 0)
              rule = "ep must divide the experts";
            else if ((static_cast<int64_t>(dp) * cp * tp) % (static_cast<int64_t>(ep) * etp) != 0)
              rule = "ep*etp must divide dp*cp*tp (experts are laid over one stage's ranks)";
            if (rule) {
              ledger->reject(rule);
              continue;
            }
            ParallelPlan p = r.settings;
            p.tp = tp;
            p.cp = cp;
            p.pp = pp;
            p.dp = dp;
            p.ep = ep;
            p.etp = etp;
            p.global_batch = r.global_batch;
            p.seq_len = r.seq_len;
            out.push_back(p);
          }
        }
      }
    }
  }
  return out;
}

struct Sharding {
  int zero;
  bool fsdp;
};

/// What a framework searches beside the layout: the recompute modes it has (its own selective
/// one) and the overlap switches it has. A switch it lacks keeps the stack's value.
struct FrameworkSwitches {
  std::vector<Recompute> recomputes;
  bool tp_overlap = true, grad_overlap = true, param_overlap = true;
  /// The data-parallel shardings it runs as the simulator models them.
  std::vector<Sharding> shardings = {{0, false}, {1, false}, {2, false}, {3, false}, {3, true}};
};

/// `f` empty: the theoretical best, every switch.
FrameworkSwitches switches_of(std::optional<LaunchTarget> f) {
  using R = Recompute;
  if (!f) return {{R::kNone, R::kSelective, R::kFull}};
  switch (*f) {
    case LaunchTarget::kMegatron:
    case LaunchTarget::kTorchrun:
    case LaunchTarget::kSlurm:
      // --recompute-granularity selective|full; --tp-comm-overlap, --overlap-grad-reduce,
      // --overlap-param-gather.
      return {{R::kNone, R::kSelective, R::kFull}};
    case LaunchTarget::kTorchTitan:
    case LaunchTarget::kTorchTitanMain:
      // activation_checkpoint.mode none|selective (per-op)|full; enable_async_tensor_parallel.
      // FSDP2 and DDP always overlap their collectives: no switch.
      // Data parallelism is DDP or FSDP2 (fp32 sharded parameters), never Megatron-style ZeRO.
      return {{R::kNone, R::kSelectiveOp, R::kFull}, true, false, false, {{0, false}, {3, true}}};
    case LaunchTarget::kDeepSpeed:
      // Full-layer checkpointing is the model's (PipelineModule activation_checkpoint_interval,
      // deepspeed.checkpointing); anything finer is model code parallax does not write. No TP;
      // zero_optimization.overlap_comm and stage3_prefetch_bucket_size.
      // ZeRO stages 0-3 of bf16 parameters with fp32 master weights, not FSDP2's layout.
      return {{R::kNone, R::kFull},
              false,
              true,
              true,
              {{0, false}, {1, false}, {2, false}, {3, false}}};
  }
  return {{R::kNone, R::kSelective, R::kFull}};
}

/// TorchTitan, released or main: the same data parallelism (DDP or FSDP2, always overlapped).
bool is_torchtitan(LaunchTarget f) {
  return f == LaunchTarget::kTorchTitan || f == LaunchTarget::kTorchTitanMain;
}

bool contains(const std::vector<Recompute>& v, Recompute r) {
  return std::find(v.begin(), v.end(), r) != v.end();
}

/// True when `p` has framework `f`'s stack: its kernels, a recompute mode it has, and the value
/// of every overlap switch it lacks.
bool runs_as_simulated(LaunchTarget f, const PlanConstraints& c, const ParallelPlan& p) {
  const FrameworkSwitches sw = switches_of(f);
  const ParallelPlan stack = framework_stack(f, c, p);
  const bool sharding = std::any_of(sw.shardings.begin(), sw.shardings.end(), [&](Sharding s) {
    return s.zero == p.zero_stage && s.fsdp == p.fsdp;
  });
  // TorchTitan applies FSDP over the context-parallel ranks even without
  // data_parallel_shard_degree: replicated parameters with cp > 1 are not what it runs.
  if (is_torchtitan(f) && !p.fsdp && p.cp > 1) return false;
  return stack.attention == p.attention && stack.eager == p.eager && sharding &&
         contains(sw.recomputes, p.recompute) &&
         (sw.tp_overlap || !p.overlap_tp_comm || p.tp == 1) &&
         (sw.grad_overlap || stack.overlap_grad_reduce == p.overlap_grad_reduce) &&
         (sw.param_overlap || stack.overlap_param_gather == p.overlap_param_gather);
}

/// The values a switch takes: the pinned one, both where it has an effect and the framework has
/// it, else the stack's.
std::vector<bool> switch_values(std::optional<bool> pin, bool has, bool matters, bool stack) {
  if (pin) return {*pin};
  if (has && matters) return {false, true};
  return {stack};
}

struct Pipe {
  ScheduleKind schedule;
  int vpp;
};

/// Sharding and the overlap switches of one candidate.
struct CommSetting {
  Sharding sharding;
  bool tp_overlap, grad_overlap, param_overlap;
};

/// The values framework `f` (every one when empty) may give each setting of one layout, after
/// the setting rules; `base` is the layout with the framework's stack.
struct SettingChoices {
  ParallelPlan base;
  std::vector<bool> sps;
  std::vector<Pipe> pipes;
  std::vector<Recompute> recomputes;
  std::vector<CpComm> cp_comms;
  std::vector<CommSetting> comms;
};

std::vector<bool> sequence_parallel_choices(const PlanRequest& r, const ParallelPlan& layout,
                                            PruneLedger* ledger) {
  const PlanConstraints& c = r.constraints;
  std::vector<bool> sps;
  for (bool sp : {false, true}) {
    if (sp && layout.tp == 1) continue;  // nothing to shard
    if (c.sequence_parallel && *c.sequence_parallel != sp) continue;
    if (!sp && r.model.moe && layout.tp > 1) {
      ledger->reject("MoE with tp > 1 needs sequence parallelism");
      continue;
    }
    if (sp && (r.seq_len / layout.cp) % layout.tp != 0) {
      ledger->reject("sequence parallelism needs seq/cp divisible by tp");
      continue;
    }
    sps.push_back(sp);
  }
  return sps;
}

std::vector<Pipe> pipe_choices(const PlanRequest& r, const ParallelPlan& layout) {
  std::vector<Pipe> pipes = {{ScheduleKind::k1F1B, 1}};
  if (layout.pp == 1) return pipes;
  pipes.push_back({ScheduleKind::kZeroBubbleH1, 1});
  // DualPipe pairs rank r with rank pp-1-r; its microbatch rule is the schedule's to check.
  if (layout.pp % 2 == 0) pipes.push_back({ScheduleKind::kDualPipe, 1});
  for (int v = 2; layout.pp * v <= r.model.layers; ++v) {
    if (r.constraints.max_vpp > 0 && v > r.constraints.max_vpp) break;
    // Interleaving splits each rank's layers into equal chunks (Megatron's
    // --num-layers-per-virtual-pipeline-stage).
    if (r.model.layers % (layout.pp * v) == 0) pipes.push_back({ScheduleKind::kInterleaved1F1B, v});
  }
  return pipes;
}

/// Shardings the framework runs (and the user allows), each with the overlap switches it has
/// where they act: TP overlap at tp > 1, the gradient reduction over dp x cp, the parameter
/// gather when the optimizer is sharded over dp.
std::vector<CommSetting> comm_choices(const PlanConstraints& c, const FrameworkSwitches& sw,
                                      const ParallelPlan& layout, const ParallelPlan& base) {
  std::vector<CommSetting> out;
  for (Sharding s : sw.shardings) {
    if ((c.zero && *c.zero != s.zero) || (c.fsdp && *c.fsdp != s.fsdp)) continue;
    const bool sharded = (s.fsdp || s.zero >= 1) && layout.dp > 1;
    for (bool tpo :
         switch_values(c.overlap_tp_comm, sw.tp_overlap, layout.tp > 1, base.overlap_tp_comm))
      for (bool gro : switch_values(c.overlap_grad_reduce, sw.grad_overlap,
                                    layout.dp * layout.cp > 1, base.overlap_grad_reduce))
        for (bool pgo : switch_values(c.overlap_param_gather, sw.param_overlap, sharded,
                                      base.overlap_param_gather))
          out.push_back({s, tpo, gro, pgo});
  }
  return out;
}

SettingChoices setting_choices(const PlanRequest& r, const ParallelPlan& layout,
                               std::optional<LaunchTarget> f, PruneLedger* ledger) {
  const PlanConstraints& c = r.constraints;
  const FrameworkSwitches sw = switches_of(f);
  SettingChoices ch;
  ch.base = f ? framework_stack(*f, c, layout) : layout;
  ch.sps = sequence_parallel_choices(r, layout, ledger);
  ch.pipes = pipe_choices(r, layout);
  ch.cp_comms = {ch.base.cp_comm};
  if (layout.cp > 1 && !c.cp_comm) ch.cp_comms = {CpComm::kRing, CpComm::kAllGather};
  if (c.cp_comm) ch.cp_comms = {*c.cp_comm};
  ch.recomputes = sw.recomputes;
  if (c.recompute) {
    ch.recomputes.clear();
    if (contains(sw.recomputes, *c.recompute) || !f)
      ch.recomputes.push_back(*c.recompute);
    else
      ledger->reject(
          (std::string(to_string(*f)) + " has no such recompute mode (--recompute)").c_str());
  }
  ch.comms = comm_choices(c, sw, layout, ch.base);
  return ch;
}

/// Every setting combination of one layout that framework `f` runs (every one when `f` is
/// empty), after the setting rules, with `f`'s stack. `seen` drops a plan another framework
/// already gave.
void expand_settings(const PlanRequest& r, const ParallelPlan& layout,
                     std::optional<LaunchTarget> f, PruneLedger* ledger,
                     std::set<ParallelPlan>* seen, std::vector<ParallelPlan>* out) {
  const PlanConstraints& c = r.constraints;
  const SettingChoices ch = setting_choices(r, layout, f, ledger);
  const std::string refused =
      (f ? std::string(to_string(*f)) : "") + " cannot run it (check_launch)";
  // One request, its plan replaced per candidate: the model and the profile are copied once.
  LaunchRequest check{r.model, r.cluster, ch.base};
  const int64_t per_dp = r.global_batch / layout.dp;
  for (int mbs : divisors(per_dp)) {
    if (pinned_out(c.mbs, mbs) || (c.max_mbs > 0 && mbs > c.max_mbs)) continue;
    for (const Pipe& pipe : ch.pipes) {
      if ((c.schedule && *c.schedule != pipe.schedule) || pinned_out(c.vpp, pipe.vpp)) continue;
      if (pipe.schedule == ScheduleKind::kInterleaved1F1B && (per_dp / mbs) % layout.pp != 0) {
        ledger->reject("interleaved 1F1B needs microbatches divisible by pp", 1);
        continue;
      }
      for (Recompute rc : ch.recomputes)
        for (bool sp : ch.sps)
          for (const CommSetting& cs : ch.comms)
            for (CpComm cc : ch.cp_comms) {
              ParallelPlan& p = check.plan;
              p = ch.base;
              p.micro_batch = mbs;
              p.schedule = pipe.schedule;
              p.vpp = pipe.vpp;
              p.recompute = rc;
              p.sequence_parallel = sp;
              p.zero_stage = cs.sharding.zero;
              p.fsdp = cs.sharding.fsdp;
              p.overlap_tp_comm = cs.tp_overlap;
              p.overlap_grad_reduce = cs.grad_overlap;
              p.overlap_param_gather = cs.param_overlap;
              p.cp_comm = cc;
              if (f && (!runs_as_simulated(*f, c, p) ||
                        !check_launch_of_valid_model(*f, check).empty())) {
                ledger->reject(refused.c_str());
                continue;
              }
              if (seen->insert(p).second) out->push_back(p);
            }
    }
  }
}

}  // namespace

const std::vector<LaunchTarget>& training_frameworks() {
  static const std::vector<LaunchTarget> kAll = {LaunchTarget::kMegatron, LaunchTarget::kTorchTitan,
                                                 LaunchTarget::kDeepSpeed};
  return kAll;
}

ParallelPlan framework_stack(LaunchTarget f, const PlanConstraints& c, ParallelPlan p) {
  // The framework's kernels from its stack profile (stacks/*.json): Megatron-LM (and torchrun
  // and Slurm, which launch it) runs Transformer Engine's fused attention at the part's best
  // kernel and fused elementwise ops; TorchTitan and DeepSpeed's Hugging Face models attend
  // through SDPA (FlashAttention-2), DeepSpeed in eager PyTorch. A run pinned to the unfused
  // path stays unfused.
  if (f == LaunchTarget::kTorchTitan || f == LaunchTarget::kDeepSpeed) {
    const StackKernels* stack =
        find_stack_kernels(f == LaunchTarget::kTorchTitan ? "torchtitan" : "deepspeed");
    PX_CHECK(stack != nullptr, "the built-in stacks hold torchtitan and deepspeed");
    if (p.attention == AttentionImpl::kFlash) p.attention = stack->attention;
    // The TorchTitan config parallax emits turns torch.compile on ([compile] enable = true).
    p.eager = f == LaunchTarget::kTorchTitan ? false : stack->eager;
  }
  // TorchTitan main runs FlexAttention's FLASH backend (flex_flash): the part's fused kernel.
  if (f == LaunchTarget::kTorchTitanMain) p.eager = false;
  if (is_torchtitan(f)) {
    p.overlap_grad_reduce = true;
    p.overlap_param_gather = true;
  }
  if (c.attention) p.attention = *c.attention;
  if (c.eager) p.eager = *c.eager;
  if (c.overlap_grad_reduce) p.overlap_grad_reduce = *c.overlap_grad_reduce;
  if (c.overlap_param_gather) p.overlap_param_gather = *c.overlap_param_gather;
  return p;
}

std::vector<LaunchTarget> frameworks_running(const ModelSpec& m, const Cluster& cluster,
                                             const ParallelPlan& p, const PlanConstraints& c) {
  std::vector<LaunchTarget> out;
  for (LaunchTarget f : c.frameworks.empty() ? training_frameworks() : c.frameworks) {
    if (!runs_as_simulated(f, c, p)) continue;
    if (check_launch(f, LaunchRequest{m, cluster, p}).empty()) out.push_back(f);
  }
  return out;
}

Diagnostics validate_request(const PlanRequest& r) {
  Diagnostics d;
  const PlanConstraints& c = r.constraints;
  if (r.cluster.num_gpus <= 0)
    d.push_back({"--gpus", "gpus must be positive, got " + std::to_string(r.cluster.num_gpus), ""});
  else if (r.cluster.num_gpus > kMaxGpus)
    d.push_back(
        {"--gpus",
         "gpus=" + std::to_string(r.cluster.num_gpus) + " is beyond the largest cluster modelled",
         "at most " + std::to_string(kMaxGpus) + " GPUs"});
  if (r.global_batch <= 0)
    d.push_back({"--gbs", "gbs must be positive, got " + std::to_string(r.global_batch), ""});
  if (r.seq_len <= 0)
    d.push_back({"--seq", "seq must be positive, got " + std::to_string(r.seq_len), ""});
  if (c.memory_headroom < 0 || c.memory_headroom > 0.9)
    d.push_back({"--memory-headroom",
                 "memory headroom must be between 0% and 90%, got " +
                     std::to_string(static_cast<int>(c.memory_headroom * 100)) + "%",
                 ""});
  if (c.zero && (*c.zero < 0 || *c.zero > 3))
    d.push_back({"--zero", "zero must be 0, 1, 2 or 3, got " + std::to_string(*c.zero), ""});
  struct {
    const char* flag;
    int v;
  } limits[] = {{"--tp", c.tp},          {"--pp", c.pp},         {"--dp", c.dp},
                {"--cp", c.cp},          {"--ep", c.ep},         {"--etp", c.etp},
                {"--vpp", c.vpp},        {"--mbs", c.mbs},       {"--max-tp", c.max_tp},
                {"--max-pp", c.max_pp},  {"--max-cp", c.max_cp}, {"--max-vpp", c.max_vpp},
                {"--max-mbs", c.max_mbs}};
  for (const auto& l : limits)
    if (l.v < 0)
      d.push_back(
          {l.flag, std::string(l.flag + 2) + " must be >= 1, got " + std::to_string(l.v), ""});
  return d;
}

PlanSpaceResult enumerate_plans(const PlanRequest& r) {
  PlanSpaceResult out;
  PruneLedger ledger;
  const std::vector<ParallelPlan> kept = layouts(r, &ledger, &out.layouts_considered);
  out.layouts_kept = static_cast<int64_t>(kept.size());
  // Layouts expand independently: in parallel, each into its own list and ledger, joined in
  // layout order so that the result does not depend on the threads.
  std::vector<std::vector<ParallelPlan>> expanded(kept.size());
  std::vector<PruneLedger> ledgers(kept.size());
  tbb::parallel_for(size_t{0}, kept.size(), [&](size_t i) {
    std::set<ParallelPlan> seen;
    if (r.constraints.frameworks.empty())
      expand_settings(r, kept[i], std::nullopt, &ledgers[i], &seen, &expanded[i]);
    for (LaunchTarget f : r.constraints.frameworks)
      expand_settings(r, kept[i], f, &ledgers[i], &seen, &expanded[i]);
  });
  for (size_t i = 0; i < kept.size(); ++i) {
    ledger.merge(ledgers[i]);
    out.candidates.insert(out.candidates.end(), expanded[i].begin(), expanded[i].end());
  }
  out.pruned = ledger.take();
  return out;
}

}  // namespace parallax
