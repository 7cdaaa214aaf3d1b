#include "simulator/schedules/pipeline_schedule.h"

#include <algorithm>
#include <string>
#include <utility>

namespace parallax {
namespace {

using Schedule = std::vector<std::vector<PipelineOp>>;

std::string multiples_of(int step, int count) {
  std::string s = "{";
  for (int i = 1; i <= count; ++i) {
    if (i > 1) s += ',';
    s += std::to_string(step * i);
  }
  return s + ",...}";
}

Diagnostics validate(ScheduleKind kind, int pp, int vpp, int m) {
  Diagnostics out;
  const std::string name = to_string(kind);
  if (pp < 1) out.push_back({"--pp", "pp must be >= 1, got " + std::to_string(pp), ""});
  if (vpp < 1) out.push_back({"--vpp", "vpp must be >= 1, got " + std::to_string(vpp), ""});
  if (m < 1) {
    out.push_back({"microbatches", "microbatches must be >= 1, got " + std::to_string(m),
                   "gbs must be at least dp*mbs"});
  }
  if (kind == ScheduleKind::kInterleaved1F1B) {
    if (vpp == 1) {
      out.push_back({"--vpp", "schedule " + name + " needs vpp >= 2, got 1",
                     "use --schedule 1f1b for one chunk per rank"});
    }
    if (pp >= 1 && m >= 1 && m % pp != 0) {
      out.push_back({"microbatches",
                     "schedule " + name + " needs microbatches=" + std::to_string(m) +
                         " to be a multiple of pp=" + std::to_string(pp),
                     "microbatches in " + multiples_of(pp, 4)});
    }
  } else if (vpp > 1) {
    out.push_back({"--vpp", "schedule " + name + " needs vpp == 1, got " + std::to_string(vpp),
                   "use --schedule interleaved for vpp > 1"});
  }
  if (kind == ScheduleKind::kDualPipe) {
    // deepseek-ai/DualPipe dualpipe.py step(): `assert num_ranks % 2 == 0` and
    // `num_chunks > 0 and num_chunks % 2 == 0 and num_chunks >= num_ranks * 2`.
    if (pp >= 1 && pp % 2 != 0)
      out.push_back({"--pp", "schedule " + name + " needs an even pp, got " + std::to_string(pp),
                     "each rank pairs with rank pp-1-r"});
    if (pp >= 1 && m >= 1 && (m % 2 != 0 || m < 2 * pp))
      out.push_back({"microbatches",
                     "schedule " + name + " needs an even number of microbatches of at least " +
                         "2*pp=" + std::to_string(2 * pp) + ", got " + std::to_string(m),
                     "half the microbatches enter at each end of the pipeline"});
  }
  return out;
}

// Megatron's loop shape, shared by both 1F1B variants: `warmup` forwards, then `total - warmup`
// pairs (forward k + warmup, backward k), then the remaining backwards. `forward(k)` and
// `backward(k)` name the pass of the k-th (virtual) microbatch.
// With `pair` (Megatron-LM's combined 1F1B, --overlap-moe-expert-parallel-comm:
// get_pp_rank_microbatches schedules one more warm-up forward so that each steady pair's
// forward and backward belong to different microbatches) every steady forward runs overlapped
// with the backward after it.
template <typename Forward, typename Backward>
std::vector<PipelineOp> warmup_steady_cooldown(int total, int warmup, Forward forward,
                                               Backward backward, bool pair = false) {
  std::vector<PipelineOp> ops;
  ops.reserve(2 * static_cast<size_t>(total));
  if (pair) warmup = std::min(warmup + 1, total);
  const int steady = total - warmup;
  for (int k = 0; k < warmup; ++k) ops.push_back(forward(k));
  for (int k = 0; k < steady; ++k) {
    ops.push_back(forward(warmup + k));
    ops.back().paired_with_next = pair;
    ops.push_back(backward(k));
  }
  for (int k = steady; k < total; ++k) ops.push_back(backward(k));
  return ops;
}

// PipeDream-Flush: rank r starts its first backward after pp - r - 1 extra forwards, the time the
// first microbatch takes to reach the last stage and its gradient to come back.
std::vector<PipelineOp> one_f_one_b_rank(int pp, int m, int rank, bool pair = false) {
  const int warmup = std::min(pp - rank - 1, m);
  return warmup_steady_cooldown(
      m, warmup,
      [](int k) {
        return PipelineOp{k, 0, PassKind::kForward};
      },
      [](int k) {
        return PipelineOp{k, 0, PassKind::kBackward};
      },
      pair);
}

// Megatron-LM forward_backward_pipelining_with_interleaving (get_pp_rank_microbatches and
// get_schedule_table with microbatch_group_size_per_vp_stage = pp):
//   warmup(r) = min((pp - r - 1) * 2 + (vpp - 1) * pp, m * vpp)
//   virtual microbatch k: microbatch (k / (pp*vpp)) * pp + k % pp, forward chunk (k / pp) % vpp,
//   backward chunk vpp - 1 - (k / pp) % vpp.
std::vector<PipelineOp> interleaved_rank(int pp, int vpp, int m, int rank, bool pair) {
  const int total = m * vpp;
  const int warmup = std::min((pp - rank - 1) * 2 + (vpp - 1) * pp, total);
  auto microbatch = [pp, vpp](int k) { return (k / (pp * vpp)) * pp + k % pp; };
  auto chunk = [pp, vpp](int k) { return (k / pp) % vpp; };
  return warmup_steady_cooldown(
      total, warmup,
      [&](int k) {
        return PipelineOp{microbatch(k), chunk(k), PassKind::kForward};
      },
      [&](int k) {
        return PipelineOp{microbatch(k), vpp - 1 - chunk(k), PassKind::kBackward};
      },
      pair);
}

// ZB-H1 (Qi et al. 2024, section 2.1): keep 1F1B's order of F and B, and run W(k) right after
// B(k + r) on rank r instead of right after B(k). Rank r then holds (pp - r - 1) warm-up
// microbatches + r whose W waits + 1 = pp microbatches, the peak 1F1B already has on rank 0, and
// the r delayed W passes fill the r cool-down slots where 1F1B's rank r waits for gradients.
std::vector<PipelineOp> zero_bubble_h1_rank(int pp, int m, int rank) {
  std::vector<PipelineOp> ops;
  ops.reserve(3 * static_cast<size_t>(m));
  int backwards_done = 0;
  int next_weight = 0;  // backwards run in microbatch order, so W follows the same order
  for (const PipelineOp& op : one_f_one_b_rank(pp, m, rank)) {
    if (op.kind == PassKind::kForward) {
      ops.push_back(op);
      continue;
    }
    ops.push_back({op.microbatch, 0, PassKind::kBackwardInput});
    if (++backwards_done > rank) ops.push_back({next_weight++, 0, PassKind::kBackwardWeight});
  }
  while (next_weight < m) ops.push_back({next_weight++, 0, PassKind::kBackwardWeight});
  return ops;
}

/// DualPipe's order on one rank, step by step as deepseek-ai/DualPipe's DualPipe.step() runs it
/// (dualpipe.py; `phase` there is our chunk xor "rank in the second half"). Chunk c runs the
/// microbatches c*m/2 .. c*m/2 + m/2 - 1, which enter at rank 0 (c = 0) or rank pp-1 (c = 1).
/// Backward chunks with zero bubble (enable_zb) split into B and a W that a later
/// _weight_chunk() pops in FIFO order; F&B pairs run overlapped (_forward_backward_chunk).
class DualPipeRank {
 public:
  DualPipeRank(int pp, int m, int rank)
      : half_ranks_(pp / 2),
        half_rank_(std::min(rank, pp - 1 - rank)),
        half_chunks_(m / 2),
        second_(rank >= pp / 2),
        middle_(rank == pp / 2 - 1 || rank == pp / 2) {}

  std::vector<PipelineOp> build() {
    const int steps_13 = half_ranks_ - half_rank_ - 1;
    for (int i = 0; i < 2 * steps_13; ++i) forward(0);  // step 1: nF0
    for (int i = 0; i <= half_rank_; ++i) {             // step 2: nF0F1
      forward(0);
      forward(1);
    }
    for (int i = 0; i < steps_13; ++i) {  // step 3: nB1W1F1 (zero bubble)
      backward(1, true);
      weight();
      forward(1);
    }
    const int step_4 = half_chunks_ - 2 * half_ranks_ + half_rank_ + 1;
    for (int i = 0; i < step_4; ++i) {  // step 4 (main): nF0B1F1B0
      if (i == 0 && middle_) {
        forward(0);  // "we don't overlap these two chunks to further reduce bubble size"
        backward(1, false);
      } else {
        forward_backward(0, 1);
      }
      forward_backward(1, 0);
    }
    for (int i = 0; i < steps_13; ++i) {  // step 5: nB1F1B0
      backward(1, false);
      forward_backward(1, 0);
    }
    bool zb = false;  // step 6: nB1B0, the second half of the chunks with zero bubble
    const int step_6 = half_rank_ + 1;
    for (int i = 0; i < step_6; ++i) {
      if (i == step_6 / 2 && half_rank_ % 2 == 1) zb = true;
      backward(1, zb);
      if (i == step_6 / 2 && half_rank_ % 2 == 0) zb = true;
      backward(0, zb);
    }
    for (int i = 0; i < steps_13; ++i) {  // step 7: nWB0 (zero bubble)
      weight();
      backward(0, true);
    }
    for (int i = 0; i < step_6; ++i) weight();  // step 8: nW
    PX_CHECK(next_w_ == weights_.size(),
             "DualPipe left " << weights_.size() - next_w_ << " W passes queued");
    return std::move(ops_);
  }

 private:
  int chunk(int phase) const { return phase ^ (second_ ? 1 : 0); }
  int microbatch(int c, int i) const { return c * half_chunks_ + i; }
  void forward(int phase) {
    const int c = chunk(phase);
    ops_.push_back({microbatch(c, f_[c]++), c, PassKind::kForward});
  }
  void backward(int phase, bool zb) {
    const int c = chunk(phase), mb = microbatch(c, b_[c]++);
    ops_.push_back({mb, c, zb ? PassKind::kBackwardInput : PassKind::kBackward});
    if (zb) weights_.push_back({mb, c, PassKind::kBackwardWeight});
  }
  void weight() {
    PX_CHECK(next_w_ < weights_.size(), "DualPipe pops a W pass that no backward deferred");
    ops_.push_back(weights_[next_w_++]);
  }
  void forward_backward(int phase0, int phase1) {
    forward(phase0);
    ops_.back().paired_with_next = true;
    backward(phase1, false);
  }

  int half_ranks_, half_rank_, half_chunks_;
  bool second_, middle_;
  int f_[2] = {0, 0}, b_[2] = {0, 0};
  std::vector<PipelineOp> ops_, weights_;
  size_t next_w_ = 0;
};

}  // namespace

Result<Schedule> build_pipeline_schedule(ScheduleKind kind, int pp, int vpp, int num_microbatches,
                                         bool pair_forward_backward) {
  Diagnostics errors = validate(kind, pp, vpp, num_microbatches);
  const bool pairable =
      kind == ScheduleKind::kInterleaved1F1B || (kind == ScheduleKind::k1F1B && pp == 1);
  if (pair_forward_backward && !pairable)
    errors.push_back({"--schedule",
                      std::string("forward-backward overlap runs with pp=1 or the interleaved "
                                  "schedule, got ") +
                          to_string(kind) + " with pp=" + std::to_string(pp),
                      "Megatron-LM's combined 1F1B"});
  if (!errors.empty()) return errors;
  Schedule schedule(static_cast<size_t>(pp));
  for (int r = 0; r < pp; ++r) {
    switch (kind) {
      case ScheduleKind::k1F1B:
        schedule[r] = one_f_one_b_rank(pp, num_microbatches, r, pair_forward_backward);
        break;
      case ScheduleKind::kInterleaved1F1B:
        schedule[r] = interleaved_rank(pp, vpp, num_microbatches, r, pair_forward_backward);
        break;
      case ScheduleKind::kZeroBubbleH1:
        schedule[r] = zero_bubble_h1_rank(pp, num_microbatches, r);
        break;
      case ScheduleKind::kDualPipe:
        schedule[r] = DualPipeRank(pp, num_microbatches, r).build();
        break;
    }
  }
  return schedule;
}

std::vector<OpRef> pipeline_dependencies(const OpRef& op, int pp, int vpp) {
  return pipeline_dependencies(op, PipelineLayout{ScheduleKind::k1F1B, pp, vpp});
}

std::vector<OpRef> pipeline_dependencies(const OpRef& op, const PipelineLayout& layout) {
  const int pp = layout.pp, chunks = layout.chunks_per_rank();
  PX_CHECK(pp >= 1 && layout.vpp >= 1, "pp=" << pp << " vpp=" << layout.vpp);
  PX_CHECK(op.rank >= 0 && op.rank < pp, "rank=" << op.rank << " outside pp=" << pp);
  PX_CHECK(op.op.chunk >= 0 && op.op.chunk < chunks, "chunk=" << op.op.chunk << " of " << chunks);
  PX_CHECK(op.op.microbatch >= 0, "microbatch=" << op.op.microbatch);
  const int stage = layout.stage_of(op.rank, op.op.chunk);
  auto at = [&](int s, PassKind kind) {
    return layout.place(s, op.op.chunk, PipelineOp{op.op.microbatch, 0, kind});
  };
  switch (op.op.kind) {
    case PassKind::kForward:
      if (stage == 0) return {};
      return {at(stage - 1, PassKind::kForward)};
    case PassKind::kBackward:
    case PassKind::kBackwardInput:
      if (stage == layout.stages() - 1) return {at(stage, PassKind::kForward)};
      return {at(stage + 1, op.op.kind), at(stage, PassKind::kForward)};
    case PassKind::kBackwardWeight:
      return {at(stage, PassKind::kBackwardInput)};
  }
  return {};
}

const char* to_string(PassKind kind) {
  switch (kind) {
    case PassKind::kForward:
      return "F";
    case PassKind::kBackward:
      return "B";
    case PassKind::kBackwardInput:
      return "Bi";
    case PassKind::kBackwardWeight:
      return "W";
  }
  return "?";
}

}  // namespace parallax
