#pragma once
/// The pipeline order: which pass of which microbatch and model chunk each pipeline rank runs, in
/// what order, for one optimizer step. This is the one source of that order: the discrete-event
/// simulator replays it in virtual time and the executor runs it for real.

#include <vector>

#include "core/parallel_plan.h"
#include "core/result.h"

namespace parallax {

/// One pass over one model chunk. kBackward is the full backward (input and weight gradients
/// together), used by 1F1B and interleaved 1F1B; zero-bubble schedules split it into
/// kBackwardInput (B, the activation gradient sent upstream) and kBackwardWeight (W).
enum class PassKind { kForward, kBackward, kBackwardInput, kBackwardWeight };

/// One step of a rank's list.
struct PipelineOp {
  int microbatch = 0;  ///< 0..m-1
  int chunk = 0;       ///< model chunk on this rank, 0..vpp-1
  PassKind kind = PassKind::kForward;

  bool operator==(const PipelineOp&) const = default;
};

/// An op placed on a pipeline rank (0..pp-1).
struct OpRef {
  int rank = 0;
  PipelineOp op;

  bool operator==(const OpRef&) const = default;
};

/// Virtual stage of (rank, chunk) in model order: chunk * pp + rank (Megatron interleaving, so
/// chunk c of every rank comes before chunk c+1 of any rank).
inline int virtual_stage(int rank, int chunk, int pp) { return chunk * pp + rank; }

/// The order in which each pipeline rank runs its passes for one optimizer step; result[r] is
/// rank r's list.
/// - k1F1B (PipeDream-Flush, Megatron without interleaving): rank r runs min(pp-r-1, m) warm-up
///   forwards, then forward/backward pairs, then the remaining backwards.
/// - kInterleaved1F1B: Megatron-LM's forward_backward_pipelining_with_interleaving, with
///   microbatches grouped by pp (its default microbatch_group_size_per_vp_stage).
/// - kZeroBubbleH1 (Qi et al., ICLR 2024): the 1F1B order of F and B, each backward split into B
///   and W, and rank r's W passes delayed by r backwards so that every rank holds at most pp
///   microbatches (1F1B's peak, on rank 0) and the delayed W passes fill the cool-down bubble.
/// Requires pp >= 1, vpp >= 1, num_microbatches >= 1; kInterleaved1F1B needs vpp >= 2 and
/// num_microbatches % pp == 0 (Megatron's rule); k1F1B and kZeroBubbleH1 need vpp == 1. Every
/// violation is reported as a diagnostic.
Result<std::vector<std::vector<PipelineOp>>> build_pipeline_schedule(ScheduleKind kind, int pp,
                                                                     int vpp, int num_microbatches);

/// The ops that must finish before `op` may start, for replay engines. With vs the virtual stage
/// of op and S = pp*vpp:
/// - F(mb, vs) after F(mb, vs-1) (on rank (vs-1) % pp); nothing for vs = 0;
/// - B(mb, vs) (kBackward or kBackwardInput) after F(mb, vs) on the same rank and, unless
///   vs = S-1, after the backward of the same kind B(mb, vs+1);
/// - W(mb, vs) after kBackwardInput(mb, vs) on the same rank.
/// `op` must lie inside the pipeline (0 <= rank < pp, 0 <= chunk < vpp, microbatch >= 0).
std::vector<OpRef> pipeline_dependencies(const OpRef& op, int pp, int vpp);

/// "F", "B", "Bi" or "W": short names for traces and test messages.
const char* to_string(PassKind kind);

}  // namespace parallax
