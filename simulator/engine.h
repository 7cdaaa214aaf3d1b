#pragma once
/// The discrete-event engine: each simulated GPU has a compute stream, a pipeline (p2p) stream
/// and a data-parallel stream. It replays the pipeline schedule microbatch by microbatch in
/// virtual time, then the gradient synchronisation and the optimizer step.
///
/// Symmetry: ranks that differ only in their tp, cp or dp coordinate do identical work, so by
/// default one representative rank per pipeline stage is simulated and the cost is independent
/// of the GPU count. `full_ranks` simulates every rank, with point-to-point transfers between the
/// actual peers and data-parallel collectives that start when every member is ready; both modes
/// give the same answer for symmetric layouts (a test checks it).

#include <algorithm>
#include <string>
#include <vector>

#include "simulator/lower.h"
#include "simulator/schedules/pipeline_schedule.h"

namespace parallax {

enum class StreamKind { kCompute, kPipeline, kDataParallel };
const char* to_string(StreamKind s);

/// One span of time on one stream of one simulated rank.
struct TraceSpan {
  int rank = 0;  ///< simulated entity (the pipeline stage in representative mode)
  StreamKind stream = StreamKind::kCompute;
  std::string name;
  CostCategory category = CostCategory::kCompute;
  double start_s = 0, end_s = 0;
  int microbatch = -1, chunk = -1;
  PassKind pass = PassKind::kForward;
};

/// Activation bytes one rank stores as its passes run, in schedule order, and their peak with
/// the working memory of the running pass. The order alone decides it (not the timing), so the
/// planner's memory bound replays the same ledger without the engine.
class ActivationLedger {
 public:
  // Inline: the planner's bound replays it for every pass of every candidate.
  void run(const StageCost& st, PassKind kind) {
    // Stored from forward until the backward that reads it. In zero-bubble schedules B frees all
    // but the weight-GEMM inputs, which W frees. Working memory exists while a pass runs: the
    // loss's logits in the last stage's forward, every backward's workspace.
    double transient = 0;
    if (kind == PassKind::kForward) {
      current_ += st.act_bytes_per_microbatch;
      transient = st.has_output ? st.transient_bytes : 0;
    } else if (kind != PassKind::kBackwardWeight) {
      transient = st.transient_bytes;
    }
    peak_ = std::max(peak_, current_ + transient);
    if (kind == PassKind::kBackward) current_ -= st.act_bytes_per_microbatch;
    if (kind == PassKind::kBackwardInput)
      current_ -= st.act_bytes_per_microbatch - st.weight_input_bytes_per_microbatch;
    if (kind == PassKind::kBackwardWeight) current_ -= st.weight_input_bytes_per_microbatch;
  }
  double peak_bytes() const { return peak_; }
  double current_bytes() const { return current_; }  ///< stored now, between passes

 private:
  double current_ = 0, peak_ = 0;
};

/// The cost of one kind of pass through a virtual stage.
inline const PassCost& pass_cost(const StageCost& st, PassKind k) {
  switch (k) {
    case PassKind::kForward:
      return st.forward;
    case PassKind::kBackward:
      return st.backward;
    case PassKind::kBackwardInput:
      return st.backward_input;
    case PassKind::kBackwardWeight:
      return st.backward_weight;
  }
  return st.forward;
}

/// Time of a forward and a backward pass run as one overlapped pair (DualPipe's F&B chunks,
/// Megatron's combined 1F1B): each pass's expert-parallel communication hides behind the other's
/// compute, so that with A their exposed EP communication and C the rest of their two times,
///   t = C + max(0, A - C) + slowdown * min(A, C),
/// the communication slowing the compute it overlaps by the share of SMs it takes (DeepSeek-V3
/// Sec. 3.2.2: its dispatch and combine run on 20 of 132 SMs beside the other chunk's compute).
inline double paired_time(const PassCost& a, const PassCost& b, double slowdown) {
  const int ep = static_cast<int>(CostCategory::kEpComm);
  const double comm = a.by_category[ep] + b.by_category[ep];
  const double rest = a.time_s + b.time_s - comm;
  return rest + std::max(0.0, comm - rest) + slowdown * std::min(comm, rest);
}

/// Everything the engine needs besides the schedule; built by simulate().
struct EngineSetup {
  ParallelPlan plan;
  std::vector<StageCost> stages;     ///< pp * vpp virtual stages in model order
  double p2p_time_s = 0;             ///< one activation message between adjacent stages
  std::vector<double> grad_sync_s;   ///< per virtual stage: gradient reduction after backward
  std::vector<double> param_sync_s;  ///< per virtual stage: parameter all-gather (ZeRO/FSDP)
  std::vector<double> optimizer_s;   ///< per pipeline rank
  double overlap_slowdown = 0;       ///< compute slowdown while communication overlaps it (0..1)
  bool full_ranks = false;
  bool record_trace = false;
  int scale_up_domain = 1;  ///< GPUs per scale-up domain (from the profile; full-rank mode)
};

struct RankOutcome {
  double end_s = 0;                              ///< when its optimizer step finished
  double busy_by_category[kNumCategories] = {};  ///< time on the compute stream by category
  double peak_activation_bytes = 0;  ///< stored activations + transient, peak over the step
  double last_backward_end_s = 0;
};

/// Activations one rank holds at a moment of the step (with record_trace): at the start of a
/// pass, those stored plus the pass's working memory; after it, those stored.
struct ActivationSample {
  int rank = 0;
  double time_s = 0;
  double activation_bytes = 0;
};

struct EngineResult {
  double step_time_s = 0;
  std::vector<RankOutcome> ranks;  ///< per simulated entity
  std::vector<int> stage_of_rank;  ///< pipeline rank of each entity
  std::vector<TraceSpan> trace;
  std::vector<ActivationSample> memory;  ///< with record_trace, in the order passes ran
  int64_t events = 0;
};

/// Runs one training step. The schedule must come from build_pipeline_schedule for the plan.
EngineResult run_engine(const EngineSetup& setup,
                        const std::vector<std::vector<PipelineOp>>& schedule);

}  // namespace parallax
