#include "planner/plan_space.h"

#include <map>

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

/// Every setting combination of one layout, after the setting rules.
void expand_settings(const PlanRequest& r, const ParallelPlan& layout, PruneLedger* ledger,
                     std::vector<ParallelPlan>* out) {
  const ModelSpec& m = r.model;
  const PlanConstraints& c = r.constraints;
  const int64_t per_dp = r.global_batch / layout.dp;

  std::vector<bool> sps;
  for (bool sp : {false, true}) {
    if (sp && layout.tp == 1) continue;  // nothing to shard
    if (c.sequence_parallel && *c.sequence_parallel != sp) continue;
    if (!sp && m.moe && layout.tp > 1) {
      ledger->reject("MoE with tp > 1 needs sequence parallelism");
      continue;
    }
    if (sp && (r.seq_len / layout.cp) % layout.tp != 0) {
      ledger->reject("sequence parallelism needs seq/cp divisible by tp");
      continue;
    }
    sps.push_back(sp);
  }
  std::vector<Sharding> shardings;
  for (Sharding s : {Sharding{0, false}, Sharding{1, false}, Sharding{2, false}, Sharding{3, false},
                     Sharding{3, true}}) {
    if (c.zero && *c.zero != s.zero) continue;
    if (c.fsdp && *c.fsdp != s.fsdp) continue;
    shardings.push_back(s);
  }
  struct Pipe {
    ScheduleKind schedule;
    int vpp;
  };
  std::vector<Pipe> pipes;
  pipes.push_back({ScheduleKind::k1F1B, 1});
  if (layout.pp > 1) {
    pipes.push_back({ScheduleKind::kZeroBubbleH1, 1});
    for (int v = 2; layout.pp * v <= m.layers; ++v) {
      if (c.max_vpp > 0 && v > c.max_vpp) break;
      // Interleaving splits each rank's layers into equal chunks (Megatron's
      // --num-layers-per-virtual-pipeline-stage).
      if (m.layers % (layout.pp * v) == 0) pipes.push_back({ScheduleKind::kInterleaved1F1B, v});
    }
  }
  std::vector<CpComm> cp_comms = {r.settings.cp_comm};
  if (layout.cp > 1 && !c.cp_comm) cp_comms = {CpComm::kRing, CpComm::kAllGather};
  if (c.cp_comm) cp_comms = {*c.cp_comm};

  // Selective recompute as the framework runs it: TorchTitan's is per-op, Megatron's (and the
  // default) the attention core.
  std::vector<Recompute> recomputes = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  if (c.framework == LaunchTarget::kTorchTitan) recomputes[1] = Recompute::kSelectiveOp;
  if (c.recompute) recomputes = {*c.recompute};

  for (int mbs : divisors(per_dp)) {
    if (pinned_out(c.mbs, mbs) || (c.max_mbs > 0 && mbs > c.max_mbs)) continue;
    const int64_t microbatches = per_dp / mbs;
    for (const Pipe& pipe : pipes) {
      if (c.schedule && *c.schedule != pipe.schedule) continue;
      if (pinned_out(c.vpp, pipe.vpp)) continue;
      if (pipe.schedule == ScheduleKind::kInterleaved1F1B && microbatches % layout.pp != 0) {
        ledger->reject("interleaved 1F1B needs microbatches divisible by pp", 1);
        continue;
      }
      for (Recompute rc : recomputes) {
        for (bool sp : sps) {
          for (const Sharding& s : shardings) {
            for (CpComm cc : cp_comms) {
              ParallelPlan p = layout;
              p.micro_batch = mbs;
              p.schedule = pipe.schedule;
              p.vpp = pipe.vpp;
              p.recompute = rc;
              p.sequence_parallel = sp;
              p.zero_stage = s.zero;
              p.fsdp = s.fsdp;
              p.cp_comm = cc;
              if (c.framework &&
                  !check_launch(*c.framework, LaunchRequest{m, r.cluster, p}).empty()) {
                ledger->reject("the framework cannot run it (--framework)");
                continue;
              }
              out->push_back(p);
            }
          }
        }
      }
    }
  }
}

}  // namespace

Diagnostics validate_request(const PlanRequest& r) {
  Diagnostics d;
  const PlanConstraints& c = r.constraints;
  if (r.cluster.num_gpus <= 0)
    d.push_back({"--gpus", "gpus must be positive, got " + std::to_string(r.cluster.num_gpus), ""});
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
  for (const ParallelPlan& layout : kept) expand_settings(r, layout, &ledger, &out.candidates);
  out.pruned = ledger.take();
  return out;
}

}  // namespace parallax
