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
  return out;
}

// Megatron's loop shape, shared by both 1F1B variants: `warmup` forwards, then `total - warmup`
// pairs (forward k + warmup, backward k), then the remaining backwards. `forward(k)` and
// `backward(k)` name the pass of the k-th (virtual) microbatch.
template <typename Forward, typename Backward>
std::vector<PipelineOp> warmup_steady_cooldown(int total, int warmup, Forward forward,
                                               Backward backward) {
  std::vector<PipelineOp> ops;
  ops.reserve(2 * static_cast<size_t>(total));
  const int steady = total - warmup;
  for (int k = 0; k < warmup; ++k) ops.push_back(forward(k));
  for (int k = 0; k < steady; ++k) {
    ops.push_back(forward(warmup + k));
    ops.push_back(backward(k));
  }
  for (int k = steady; k < total; ++k) ops.push_back(backward(k));
  return ops;
}

// PipeDream-Flush: rank r starts its first backward after pp - r - 1 extra forwards, the time the
// first microbatch takes to reach the last stage and its gradient to come back.
std::vector<PipelineOp> one_f_one_b_rank(int pp, int m, int rank) {
  const int warmup = std::min(pp - rank - 1, m);
  return warmup_steady_cooldown(
      m, warmup,
      [](int k) {
        return PipelineOp{k, 0, PassKind::kForward};
      },
      [](int k) {
        return PipelineOp{k, 0, PassKind::kBackward};
      });
}

// Megatron-LM forward_backward_pipelining_with_interleaving (get_pp_rank_microbatches and
// get_schedule_table with microbatch_group_size_per_vp_stage = pp):
//   warmup(r) = min((pp - r - 1) * 2 + (vpp - 1) * pp, m * vpp)
//   virtual microbatch k: microbatch (k / (pp*vpp)) * pp + k % pp, forward chunk (k / pp) % vpp,
//   backward chunk vpp - 1 - (k / pp) % vpp.
std::vector<PipelineOp> interleaved_rank(int pp, int vpp, int m, int rank) {
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
      });
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

}  // namespace

Result<Schedule> build_pipeline_schedule(ScheduleKind kind, int pp, int vpp, int num_microbatches) {
  Diagnostics errors = validate(kind, pp, vpp, num_microbatches);
  if (!errors.empty()) return errors;
  Schedule schedule(static_cast<size_t>(pp));
  for (int r = 0; r < pp; ++r) {
    switch (kind) {
      case ScheduleKind::k1F1B:
        schedule[r] = one_f_one_b_rank(pp, num_microbatches, r);
        break;
      case ScheduleKind::kInterleaved1F1B:
        schedule[r] = interleaved_rank(pp, vpp, num_microbatches, r);
        break;
      case ScheduleKind::kZeroBubbleH1:
        schedule[r] = zero_bubble_h1_rank(pp, num_microbatches, r);
        break;
    }
  }
  return schedule;
}

std::vector<OpRef> pipeline_dependencies(const OpRef& op, int pp, int vpp) {
  PX_CHECK(pp >= 1 && vpp >= 1, "pp=" << pp << " vpp=" << vpp);
  PX_CHECK(op.rank >= 0 && op.rank < pp, "rank=" << op.rank << " outside pp=" << pp);
  PX_CHECK(op.op.chunk >= 0 && op.op.chunk < vpp, "chunk=" << op.op.chunk << " vpp=" << vpp);
  PX_CHECK(op.op.microbatch >= 0, "microbatch=" << op.op.microbatch);
  const int mb = op.op.microbatch;
  const int vs = virtual_stage(op.rank, op.op.chunk, pp);
  auto at = [pp, mb](int stage, PassKind kind) {
    return OpRef{stage % pp, PipelineOp{mb, stage / pp, kind}};
  };
  switch (op.op.kind) {
    case PassKind::kForward:
      if (vs == 0) return {};
      return {at(vs - 1, PassKind::kForward)};
    case PassKind::kBackward:
    case PassKind::kBackwardInput:
      if (vs == pp * vpp - 1) return {at(vs, PassKind::kForward)};
      return {at(vs + 1, op.op.kind), at(vs, PassKind::kForward)};
    case PassKind::kBackwardWeight:
      return {at(vs, PassKind::kBackwardInput)};
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
