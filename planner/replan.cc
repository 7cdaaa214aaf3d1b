#include "planner/replan.h"

namespace parallax {

Result<ReplanRow> replan_record(const MeasuredRun& r, const std::vector<HwProfile>& profiles,
                                const SearchOptions& opt) {
  const std::string where = r.where.empty() ? r.id + ":" : r.where;
  auto hw = find_profile(profiles, r.gpu, where + "/cluster/gpu");
  if (!hw) return hw.errors();
  const Cluster cluster{hw.value(), r.num_gpus};
  const ParallelPlan published = to_plan(r);
  const ModelSpec model = to_model(r);
  SimulationOptions sim;
  sim.locate = json_locator(where);
  auto pub = simulate(model, cluster, published, sim);
  if (!pub) return pub.errors();
  PlanRequest req;
  req.model = model;
  req.cluster = cluster;
  req.global_batch = published.global_batch;
  req.seq_len = published.seq_len;
  req.settings = published;  // precision, attention kernel, overlap switches
  // Only layouts the record's own stack runs, with its kernels (kFillRule reads the stack:
  // PyTorch FSDP runs TorchTitan's, everything else Megatron-LM's).
  req.constraints.frameworks = {published.fsdp ? LaunchTarget::kTorchTitan
                                               : LaunchTarget::kMegatron};
  req.constraints.attention = published.attention;
  req.constraints.eager = published.eager;
  SearchOptions one = opt;
  one.top_k = 1;
  auto found = search_plans(req, one);
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
