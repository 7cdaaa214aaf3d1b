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
  int chunk = 0;       ///< model chunk on this rank, 0..chunks_per_rank-1
  PassKind kind = PassKind::kForward;
  /// Runs together with the next op of the list, a forward and a backward chunk of two
  /// microbatches whose communication hides behind each other's compute: DualPipe's F&B pairs,
  /// Megatron-LM's combined 1F1B (--overlap-moe-expert-parallel-comm).
  bool paired_with_next = false;

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

/// How a schedule lays the model's stages over the pipeline ranks. Every schedule but DualPipe
/// cuts the model into pp * vpp virtual stages, chunk c of rank r being stage c * pp + r, and a
/// microbatch visits them all. DualPipe (DeepSeek-V3, arXiv 2412.19437 Sec. 3.2.1; the
/// deepseek-ai/DualPipe example) cuts it into pp stages and gives rank r two: chunk 0 is stage r
/// for the microbatches fed at rank 0, chunk 1 stage pp-1-r for those fed at rank pp-1, so a
/// microbatch stays on one chunk index and every rank holds two stages' parameters.
struct PipelineLayout {
  ScheduleKind kind = ScheduleKind::k1F1B;
  int pp = 1, vpp = 1;

  bool dual() const { return kind == ScheduleKind::kDualPipe; }
  /// Stages in model order (the lowered StageCosts).
  int stages() const { return dual() ? pp : pp * vpp; }
  int chunks_per_rank() const { return dual() ? 2 : vpp; }
  /// The model stage that chunk `chunk` of pipeline rank `rank` runs.
  int stage_of(int rank, int chunk) const {
    if (dual()) return chunk == 0 ? rank : pp - 1 - rank;
    return virtual_stage(rank, chunk, pp);
  }
  /// Where stage `stage` runs for a microbatch that travels on chunks of index `chunk`
  /// (DualPipe) or any chunk (the others: the chunk follows from the stage).
  OpRef place(int stage, int chunk, PipelineOp op) const {
    if (dual()) {
      op.chunk = chunk;
      return {chunk == 0 ? stage : pp - 1 - stage, op};
    }
    op.chunk = stage / pp;
    return {stage % pp, op};
  }
};

/// The order in which each pipeline rank runs its passes for one optimizer step; result[r] is
/// rank r's list.
/// - k1F1B (PipeDream-Flush, Megatron without interleaving): rank r runs min(pp-r-1, m) warm-up
///   forwards, then forward/backward pairs, then the remaining backwards.
/// - kInterleaved1F1B: Megatron-LM's forward_backward_pipelining_with_interleaving, with
///   microbatches grouped by pp (its default microbatch_group_size_per_vp_stage).
/// - kZeroBubbleH1 (Qi et al., ICLR 2024): the 1F1B order of F and B, each backward split into B
///   and W, and rank r's W passes delayed by r backwards so that every rank holds at most pp
///   microbatches (1F1B's peak, on rank 0) and the delayed W passes fill the cool-down bubble.
/// - kDualPipe: deepseek-ai/DualPipe's DualPipe.step(), rank by rank (see PipelineLayout): half
///   the microbatches on chunk 0 from rank 0, half on chunk 1 from rank pp-1; its overlapped
///   forward-backward chunk pairs are marked paired_with_next, its zero-bubble backward chunks
///   split into kBackwardInput and a later kBackwardWeight, the others kBackward.
/// Requires pp >= 1, vpp >= 1, num_microbatches >= 1; kInterleaved1F1B needs vpp >= 2 and
/// num_microbatches % pp == 0 (Megatron's rule); the others need vpp == 1; kDualPipe an even pp
/// and an even num_microbatches >= 2 pp (DualPipe's asserts). Every violation is reported as a
/// diagnostic.
/// `pair_forward_backward` (Megatron-LM's combined 1F1B, --overlap-moe-expert-parallel-comm; k1F1B
/// with pp = 1 or kInterleaved1F1B): one more warm-up forward, and every steady forward paired with
/// the backward after it (paired_with_next).
Result<std::vector<std::vector<PipelineOp>>> build_pipeline_schedule(
    ScheduleKind kind, int pp, int vpp, int num_microbatches, bool pair_forward_backward = false);

/// The ops that must finish before `op` may start, for replay engines. With vs the virtual stage
/// of op and S = pp*vpp:
/// - F(mb, vs) after F(mb, vs-1) (on rank (vs-1) % pp); nothing for vs = 0;
/// - B(mb, vs) (kBackward or kBackwardInput) after F(mb, vs) on the same rank and, unless
///   vs = S-1, after the backward of the same kind B(mb, vs+1);
/// - W(mb, vs) after kBackwardInput(mb, vs) on the same rank.
/// `op` must lie inside the pipeline (0 <= rank < pp, 0 <= chunk < vpp, microbatch >= 0).
/// With a layout, vs is the layout's stage and the neighbours are where the layout places the
/// op's microbatch. DualPipe runs some backward chunks whole and some split, so its consumers
/// should take the upstream backward of either kind as the one named.
std::vector<OpRef> pipeline_dependencies(const OpRef& op, int pp, int vpp);
/// The same in the stage order of `layout` (DualPipe: along the op's own chunk index).
std::vector<OpRef> pipeline_dependencies(const OpRef& op, const PipelineLayout& layout);

/// "F", "B", "Bi" or "W": short names for traces and test messages.
const char* to_string(PassKind kind);

}  // namespace parallax
