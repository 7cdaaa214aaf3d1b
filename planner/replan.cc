#include "planner/replan.h"

namespace parallax {
namespace {

/// The search request for a record's model, cluster, batch and sequence, with its settings
/// (precision, kernels, overlap switches: the stack, pinned) and only the layouts its framework
/// runs with them.
PlanRequest record_request(const MeasuredRun& r, const Cluster& cluster,
                           const ParallelPlan& settings) {
  PlanRequest req;
  req.model = to_model(r);
  req.cluster = cluster;
  req.global_batch = settings.global_batch;
  req.seq_len = settings.seq_len;
  req.settings = settings;
  // A framework the planner has no rules for: every layout, at the record's kernels.
  const auto framework = record_framework(r);
  req.constraints.frameworks.clear();
  if (framework) req.constraints.frameworks = {*framework};
  req.constraints.attention = settings.attention;
  req.constraints.eager = settings.eager;
  req.constraints.overlap_tp_comm = settings.overlap_tp_comm;
  req.constraints.overlap_grad_reduce = settings.overlap_grad_reduce;
  req.constraints.overlap_param_gather = settings.overlap_param_gather;
  return req;
}

/// Pins every layout field the record gives.
void pin_known(const MeasuredRun& r, const ParallelPlan& filled, PlanConstraints* c) {
  for (auto [value, pin] : {std::pair{r.tp, &c->tp},
                            {r.pp, &c->pp},
                            {r.cp, &c->cp},
                            {r.ep, &c->ep},
                            {r.etp, &c->etp},
                            {r.dp, &c->dp},
                            {r.vpp, &c->vpp},
                            {r.micro_batch, &c->mbs}})
    if (value) *pin = *value;
  if (r.recompute) c->recompute = filled.recompute;  // as the record's stack names it
  if (r.sequence_parallel) c->sequence_parallel = *r.sequence_parallel;
  if (r.fsdp) c->fsdp = *r.fsdp;
  if (r.distributed_optimizer && !r.fsdp.value_or(false))
    c->zero = *r.distributed_optimizer ? 1 : 0;
}

}  // namespace

std::optional<LaunchTarget> record_framework(const MeasuredRun& r) {
  const std::string& target = record_stack(r).launch_target;
  if (target.empty()) return std::nullopt;
  return parse_launch_target(target);
}

Result<ParallelPlan> complete_layout(const MeasuredRun& r, const HwProfile& hw,
                                     const SearchOptions& opt) {
  const std::string where = r.where.empty() ? r.id + ":" : r.where;
  const ParallelPlan filled = to_plan(r);
  PlanRequest req = record_request(r, Cluster{hw, r.num_gpus}, filled);
  pin_known(r, filled, &req.constraints);
  SearchOptions one = opt;
  one.top_k = 1;
  auto found = search_plans(req, one);
  if (!found) {
    Diagnostics d;
    for (const auto& e : found.errors())
      d.push_back({where + "/parallel",
                   "no layout of " + record_stack(r).framework +
                       " completes the record's unknown degrees: " + e.what,
                   e.hint});
    return d;
  }
  return found->top.front().report.plan;
}

Result<ReplanRow> replan_record(const MeasuredRun& r, const std::vector<HwProfile>& profiles,
                                const SearchOptions& opt) {
  const std::string where = r.where.empty() ? r.id + ":" : r.where;
  auto hw = find_profile(profiles, r.gpu, where + "/cluster/gpu");
  if (!hw) return hw.errors();
  const Cluster cluster{hw.value(), r.num_gpus};
  ParallelPlan published = to_plan(r);
  if (!unknown_degrees(r).empty()) {
    auto completed = complete_layout(r, hw.value(), opt);
    if (!completed) return completed.errors();
    published = completed.value();
  }
  SimulationOptions sim;
  sim.locate = json_locator(where);
  auto pub = simulate(to_model(r), cluster, published, sim);
  if (!pub) return pub.errors();
  SearchOptions one = opt;
  one.top_k = 1;
  auto found = search_plans(record_request(r, cluster, published), one);
  if (!found) return found.errors();
  const StepReport& best = found->top.front().report;
  ReplanRow row;
  row.id = r.id;
  row.published_layout = layout_label(published);
  row.published_step_s = pub->step_time_s;
  row.published_fits = pub->fits;
  row.best_layout = layout_label(best.plan);
  row.best_step_s = best.step_time_s;
  row.gain = row.published_step_s / row.best_step_s - 1;
  return row;
}

}  // namespace parallax
