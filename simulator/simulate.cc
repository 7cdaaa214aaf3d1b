#include "simulator/simulate.h"

#include <algorithm>

#include "core/rank_map.h"
#include "core/units.h"
#include "simulator/cost/collective_cost.h"

namespace parallax {
namespace {

/// Gradient and parameter synchronisation of one virtual stage across its data-parallel group.
void data_parallel_sync(const ParallelPlan& p, const StageCost& st, const CollectiveCost& comm,
                        const GroupShape& dense, const GroupShape& expert, double* grad_s,
                        double* param_s) {
  *grad_s = *param_s = 0;
  if (p.shards_params() && p.pp == 1) return;  // per-layer gathers and reductions in the passes
  const bool scatter = p.shards_optimizer();
  const CollectiveOp op = scatter ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce;
  // Gradients are reduced in fp32 (Megatron's default grad buffer; FSDP2's reduce dtype).
  *grad_s = comm.time(op, st.dense_params * kFp32Bytes, dense).time_s +
            comm.time(op, st.expert_params * kFp32Bytes, expert).time_s;
  if (scatter) {
    *param_s = comm.time(CollectiveOp::kAllGather, st.dense_params * kBf16Bytes, dense).time_s +
               comm.time(CollectiveOp::kAllGather, st.expert_params * kBf16Bytes, expert).time_s;
  }
}

double largest_layer_params(const std::vector<StageCost>& stages) {
  double best = 0;
  for (const auto& s : stages)
    if (s.layers > 0) best = std::max(best, (s.dense_params + s.expert_params) / s.layers);
  return best;
}

/// Everything the engine needs: lowered stages, p2p and data-parallel sync times, and the
/// parameter memory and optimizer time of each pipeline rank (into `stages`).
EngineSetup build_engine_setup(const ModelSpec& m, const HwProfile& hw, const ParallelPlan& p,
                               const SimulationOptions& opt, std::vector<StageReport>* stages,
                               TableUse* use = nullptr) {
  RankMap ranks(p, hw.scale_up_domain);
  CollectiveCost comm(hw, use);
  EngineSetup setup;
  setup.plan = p;
  setup.stages = lower_stages(m, p, hw, ranks, /*keep_ops=*/opt.record_trace, use);
  setup.full_ranks = opt.full_ranks;
  setup.overlap_slowdown = comm.overlap_slowdown();
  setup.record_trace = opt.record_trace;
  setup.scale_up_domain = hw.scale_up_domain;
  if (p.pp > 1) {
    const GroupShape pair = neighbour_pair(ranks.shape(GroupKind::kPp));
    const double bytes = setup.stages[0].p2p_bytes;
    if (p.pp_scatter_gather && p.tp > 1 && !p.sequence_parallel)
      setup.p2p_time_s =
          comm.time(CollectiveOp::kSendRecv, bytes / p.tp, pair).time_s +
          comm.time(CollectiveOp::kAllGather, bytes, ranks.shape(GroupKind::kTp)).time_s;
    else
      setup.p2p_time_s = comm.time(CollectiveOp::kSendRecv, bytes, pair).time_s;
  }
  const int vstages = p.pp * p.vpp;
  setup.grad_sync_s.resize(vstages);
  setup.param_sync_s.resize(vstages);
  const GroupShape dense_dp = ranks.shape(GroupKind::kDpCp);
  const GroupShape expert_dp_shape = ranks.shape(GroupKind::kExpertDp);
  for (int vs = 0; vs < vstages; ++vs)
    data_parallel_sync(p, setup.stages[vs], comm, dense_dp, expert_dp_shape, &setup.grad_sync_s[vs],
                       &setup.param_sync_s[vs]);
  const PipelineLayout layout{p.schedule, p.pp, p.vpp};
  if (layout.dual()) {
    // DualPipe: ranks r and pp-1-r both hold stages r and pp-1-r and sum their gradients
    // (deepseek-ai/DualPipe example: each copy adds the other's) over the pipeline link.
    const GroupShape pair = neighbour_pair(ranks.shape(GroupKind::kPp));
    for (int vs = 0; vs < vstages; ++vs) {
      const StageCost& st = setup.stages[vs];
      setup.grad_sync_s[vs] += comm.time(CollectiveOp::kAllReduce,
                                         (st.dense_params + st.expert_params) * kFp32Bytes, pair)
                                   .time_s;
    }
  }
  if ((m.tied_embeddings || m.mtp_layers > 0) && vstages > 1) {
    // The first and last stages each hold the tied embedding (or the embedding that the
    // multi-token-prediction modules share) and all-reduce its fp32 gradient between them after
    // backward (Megatron's embedding group).
    const double params = static_cast<double>(m.vocab) * m.hidden / p.tp;
    const GroupShape pair = neighbour_pair(ranks.shape(GroupKind::kPp));
    const double t = comm.time(CollectiveOp::kAllReduce, params * kFp32Bytes, pair).time_s;
    setup.grad_sync_s.front() += t;
    setup.grad_sync_s.back() += t;
  }

  const int expert_dp = ranks.group_size(GroupKind::kExpertDp);
  const double layer_params = largest_layer_params(setup.stages);
  stages->resize(p.pp);
  setup.optimizer_s.resize(p.pp);
  for (int rank = 0; rank < p.pp; ++rank) {
    double dense = 0, expert = 0;
    for (int ch = 0; ch < layout.chunks_per_rank(); ++ch) {
      const StageCost& st = setup.stages[layout.stage_of(rank, ch)];
      dense += st.dense_params;
      expert += st.expert_params;
    }
    (*stages)[rank].pipeline_rank = rank;
    (*stages)[rank].memory = parameter_memory(p, dense, expert, expert_dp, layer_params);
    const double shard = p.shards_optimizer()
                             ? dense / (static_cast<double>(p.dp) * p.cp) + expert / expert_dp
                             : dense + expert;
    setup.optimizer_s[rank] = optimizer_step_time_s(hw, shard, p.precision);
  }
  return setup;
}

/// Adds to a stage's parameter memory its peak activations, the two p2p buffers (send and
/// receive) and the runtime's reserve.
void complete_stage_memory(const EngineSetup& setup, const HwProfile& hw, double peak_activation,
                           MemoryBreakdown* mem) {
  mem->activations_bytes = peak_activation;
  mem->buffers_bytes += 2 * setup.stages[0].p2p_bytes;
  mem->reserved_bytes = hw.reserved_gib * kGiB;
}

/// Copies each stage's simulated outcome (its first entity represents it) into the report and
/// picks the busiest stage (least bubble) to explain the step.
void collect_stage_outcomes(const EngineSetup& setup, const HwProfile& hw, StepReport* r) {
  std::vector<bool> seen(r->stages.size(), false);
  for (size_t e = 0; e < r->engine.ranks.size(); ++e) {
    const int stage = r->engine.stage_of_rank[e];
    if (seen[stage]) continue;
    seen[stage] = true;
    const RankOutcome& o = r->engine.ranks[e];
    StageReport& sr = r->stages[stage];
    std::copy(std::begin(o.busy_by_category), std::end(o.busy_by_category), sr.busy_by_category);
    complete_stage_memory(setup, hw, o.peak_activation_bytes, &sr.memory);
  }
  double least_bubble = 1e300;
  for (const auto& sr : r->stages) {
    const double b = sr.busy_by_category[static_cast<int>(CostCategory::kBubble)];
    if (b < least_bubble) {
      least_bubble = b;
      r->critical_stage = sr.pipeline_rank;
    }
  }
  const StageReport& critical = r->stages[r->critical_stage];
  std::copy(std::begin(critical.busy_by_category), std::end(critical.busy_by_category),
            r->breakdown_s);
  r->fits = true;
  for (const auto& sr : r->stages) {
    r->peak_memory_gib = std::max(r->peak_memory_gib, sr.memory.total() / kGiB);
    if (sr.memory.total() > hw.hbm_gib * kGiB) r->fits = false;
  }
}

/// Throughput and FLOP rates from the step time.
void derive_rates(const ModelSpec& m, const Cluster& c, const ParallelPlan& p, StepReport* r) {
  const double tokens = static_cast<double>(p.global_batch) * p.seq_len;
  r->tokens_per_s = tokens / r->step_time_s;
  r->tokens_per_s_per_gpu = r->tokens_per_s / c.num_gpus;
  const double model_flops = step_flops(m, p, /*causal=*/true, /*with_recompute=*/false);
  const double hw_flops = step_flops(m, p, true, true);
  r->model_tflops_per_gpu = model_flops / r->step_time_s / c.num_gpus / kTera;
  r->hardware_tflops_per_gpu = hw_flops / r->step_time_s / c.num_gpus / kTera;
  r->mfu = r->model_tflops_per_gpu / c.hw.mfu_peak_tflops(p.precision);
  r->hfu = r->hardware_tflops_per_gpu / c.hw.mfu_peak_tflops(p.precision);
}

std::vector<std::string> layout_notes(const ModelSpec& m, const HwProfile& hw,
                                      const ParallelPlan& p, const TableUse& use) {
  std::vector<std::string> notes;
  if (m.layers % (p.pp * p.vpp) != 0)
    notes.push_back("layers=" + std::to_string(m.layers) +
                    " split unevenly over pp*vpp=" + std::to_string(p.pp * p.vpp) + " stages");
  if (!m.mla && m.kv_heads < p.tp)
    notes.push_back("kv_heads=" + std::to_string(m.kv_heads) + " < tp=" + std::to_string(p.tp) +
                    ": KV heads replicated across TP ranks");
  if (p.tp > hw.scale_up_domain)
    notes.push_back("tp=" + std::to_string(p.tp) + " spans more than one scale-up domain of " +
                    std::to_string(hw.scale_up_domain) + " GPUs");
  const std::string tables = use.summary(hw.name);
  if (!tables.empty()) notes.push_back(tables);
  return notes;
}

}  // namespace

namespace {

/// Validates the inputs and builds the schedule (every problem reported).
Result<std::vector<std::vector<PipelineOp>>> checked_schedule(const ModelSpec& m, const Cluster& c,
                                                              const ParallelPlan& p,
                                                              const FieldLocator& locate) {
  Diagnostics errs = validate_model(m, "model");
  auto perr = validate_plan(m, c, p, locate);
  errs.insert(errs.end(), perr.begin(), perr.end());
  auto sched = build_pipeline_schedule(p.schedule, p.pp, p.vpp,
                                       static_cast<int>(std::max<int64_t>(1, p.num_microbatches())),
                                       p.overlap_moe_comm);
  if (errs.empty() && !sched) errs = sched.errors();
  if (!errs.empty()) return errs;
  return std::move(sched.value());
}

/// One pipeline rank of StepBounds (see simulate.h), from a schedule of `replayed` microbatches;
/// the other `extra` microbatches run whole in the steady state, before the cool-down that
/// follows the last backward. `head` and `tail` are the rank's sums over the stages before it.
/// Returns the time bound and sets the rank's activation peak.
double rank_bounds(const EngineSetup& setup, const std::vector<PipelineOp>& ops, int r,
                   int64_t extra, double head, double tail, double* peak_activation) {
  const PipelineLayout layout{setup.plan.schedule, setup.plan.pp, setup.plan.vpp};
  const bool pairs = layout.dual() || setup.plan.overlap_moe_comm;
  const int ep = static_cast<int>(CostCategory::kEpComm);
  double per_microbatch = 0;
  for (int c = 0; c < layout.chunks_per_rank(); ++c) {
    const StageCost& st = setup.stages[layout.stage_of(r, c)];
    per_microbatch += st.forward.time_s + st.backward.time_s;  // backward = B + W
    // Steady microbatches may run in overlapped pairs, which hide at most their EP communication.
    if (pairs) per_microbatch -= st.forward.by_category[ep] + st.backward.by_category[ep];
  }
  // A DualPipe microbatch visits one of the rank's two chunks.
  if (layout.dual()) per_microbatch /= 2;
  double work = static_cast<double>(extra) * per_microbatch, work_to_last_backward = work;
  ActivationLedger ledger;
  for (size_t i = 0; i < ops.size(); ++i) {
    const PipelineOp& op = ops[i];
    const StageCost& st = setup.stages[layout.stage_of(r, op.chunk)];
    ledger.run(st, op.kind);
    if (op.paired_with_next && i + 1 < ops.size()) {
      const PipelineOp& next = ops[++i];
      const StageCost& nst = setup.stages[layout.stage_of(r, next.chunk)];
      ledger.run(nst, next.kind);
      work +=
          paired_time(pass_cost(st, op.kind), pass_cost(nst, next.kind), setup.overlap_slowdown);
      work_to_last_backward = work;  // a pair holds a backward
      continue;
    }
    work += pass_cost(st, op.kind).time_s;
    if (op.kind != PassKind::kForward && op.kind != PassKind::kBackwardWeight)
      work_to_last_backward = work;
  }
  *peak_activation = ledger.peak_bytes();
  return std::max(head + work + setup.optimizer_s[r],
                  head + work_to_last_backward + tail + setup.optimizer_s[0]);
}

}  // namespace

Result<StepReport> simulate(const ModelSpec& m, const Cluster& c, const ParallelPlan& p,
                            const SimulationOptions& opt) {
  auto sched = checked_schedule(m, c, p, opt.locate);
  if (!sched) return sched.errors();

  StepReport r;
  r.model = m.name;
  r.hardware = c.hw.name;
  r.plan = p;
  r.gpus = c.num_gpus;
  r.hbm_gib = c.hw.hbm_gib;
  TableUse use;
  const EngineSetup setup = build_engine_setup(m, c.hw, p, opt, &r.stages, &use);
  r.engine = run_engine(setup, *sched);
  r.step_time_s = r.engine.step_time_s;
  collect_stage_outcomes(setup, c.hw, &r);
  derive_rates(m, c, p, &r);
  r.notes = layout_notes(m, c.hw, p, use);
  return r;
}

double state_memory_gib(const ModelSpec& m, const Cluster& c, const ParallelPlan& p) {
  std::vector<StageReport> stages;
  build_engine_setup(m, c.hw, p, SimulationOptions{}, &stages);
  double most = 0;
  for (StageReport& sr : stages) {
    sr.memory.reserved_bytes = c.hw.reserved_gib * kGiB;
    most = std::max(most, sr.memory.total());
  }
  return most / kGiB;
}

int64_t bounds_replay_microbatches(const ParallelPlan& p) {
  // Every schedule reaches its activation peak in the warm-up and ends with a cool-down that does
  // not depend on the microbatch count, so replaying 2*pp microbatches (a multiple of pp, as
  // interleaving needs) gives the same peak and the same tail; the rest is steady state.
  return std::min<int64_t>(std::max<int64_t>(1, p.num_microbatches()), 2 * p.pp);
}

Result<StepBounds> step_bounds(const ModelSpec& m, const Cluster& c, const ParallelPlan& p) {
  auto sched = build_pipeline_schedule(
      p.schedule, p.pp, p.vpp, static_cast<int>(bounds_replay_microbatches(p)), p.overlap_moe_comm);
  if (!sched) {
    Diagnostics errs = validate_model(m, "model");
    auto perr = validate_plan(m, c, p, flag_locator());
    errs.insert(errs.end(), perr.begin(), perr.end());
    return errs.empty() ? sched.errors() : errs;
  }
  return step_bounds(m, c, p, sched.value());
}

Result<StepBounds> step_bounds(const ModelSpec& m, const Cluster& c, const ParallelPlan& p,
                               const std::vector<std::vector<PipelineOp>>& replay) {
  Diagnostics errs = validate_model(m, "model");
  auto perr = validate_plan(m, c, p, flag_locator());
  errs.insert(errs.end(), perr.begin(), perr.end());
  if (!errs.empty()) return errs;
  const int64_t microbatches = std::max<int64_t>(1, p.num_microbatches());
  const int64_t replayed = bounds_replay_microbatches(p);
  PX_CHECK(replay.size() == static_cast<size_t>(p.pp),
           "replayed schedule has " << replay.size() << " ranks, the plan pp=" << p.pp);
  const auto* sched = &replay;
  std::vector<StageReport> stages;
  const EngineSetup setup = build_engine_setup(m, c.hw, p, SimulationOptions{}, &stages);
  StepBounds b;
  const bool zb =
      p.schedule == ScheduleKind::kZeroBubbleH1 || p.schedule == ScheduleKind::kDualPipe;
  // head[s], tail[s]: sums over stages 0..s-1 (see simulate.h). A DualPipe rank r first runs
  // stage r of one direction or stage pp-1-r of the other: the nearer end bounds it.
  std::vector<double> head(p.pp + 1, 0), tail(p.pp + 1, 0);
  for (int s = 0; s < p.pp; ++s) {
    const StageCost& st = setup.stages[s];
    head[s + 1] = head[s] + st.forward.time_s + setup.p2p_time_s;
    tail[s + 1] = tail[s] + (zb ? st.backward_input : st.backward).time_s + setup.p2p_time_s;
  }
  for (int r = 0; r < p.pp; ++r) {
    const int before = p.schedule == ScheduleKind::kDualPipe ? std::min(r, p.pp - 1 - r) : r;
    double peak_activation = 0;
    const double t = rank_bounds(setup, (*sched)[r], r, microbatches - replayed, head[before],
                                 tail[before], &peak_activation);
    b.step_time_lower_s = std::max(b.step_time_lower_s, t);
    complete_stage_memory(setup, c.hw, peak_activation, &stages[r].memory);
    b.peak_memory_gib = std::max(b.peak_memory_gib, stages[r].memory.total() / kGiB);
  }
  return b;
}

}  // namespace parallax
