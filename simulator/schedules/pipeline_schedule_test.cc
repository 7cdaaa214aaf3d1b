#include "simulator/schedules/pipeline_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace parallax {
namespace {

using Schedule = std::vector<std::vector<PipelineOp>>;

/// Unit pass durations for the replay below.
struct Durations {
  int64_t forward = 1;
  int64_t backward = 2;  ///< full backward
  int64_t input = 1;     ///< zero-bubble B
  int64_t weight = 1;    ///< zero-bubble W

  int64_t of(PassKind k) const {
    switch (k) {
      case PassKind::kForward:
        return forward;
      case PassKind::kBackward:
        return backward;
      case PassKind::kBackwardInput:
        return input;
      case PassKind::kBackwardWeight:
        return weight;
    }
    return 0;
  }
};

struct Replay {
  bool deadlock = false;
  int64_t makespan = 0;
  std::vector<int64_t> busy;  ///< compute time per rank
};

using OpKey = std::tuple<int, int, int, int>;  // rank, microbatch, chunk, kind

OpKey key(const OpRef& r) {
  return {r.rank, r.op.microbatch, r.op.chunk, static_cast<int>(r.op.kind)};
}

// A tiny replay: each rank runs its list in order; an op starts once its rank is free and every
// op of pipeline_dependencies has finished. No pass anywhere can start -> deadlock.
Replay replay(const Schedule& s, int pp, int vpp, const Durations& d) {
  Replay out;
  out.busy.assign(s.size(), 0);
  std::map<OpKey, int64_t> finish;
  std::vector<size_t> next(s.size(), 0);
  std::vector<int64_t> free_at(s.size(), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < static_cast<int>(s.size()); ++r) {
      for (; next[r] < s[r].size(); ++next[r]) {
        const OpRef op{r, s[r][next[r]]};
        int64_t start = free_at[r];
        bool ready = true;
        for (const OpRef& dep : pipeline_dependencies(op, pp, vpp)) {
          auto it = finish.find(key(dep));
          if (it == finish.end()) {
            ready = false;
            break;
          }
          start = std::max(start, it->second);
        }
        if (!ready) break;
        free_at[r] = start + d.of(op.op.kind);
        out.busy[r] += d.of(op.op.kind);
        finish[key(op)] = free_at[r];
        out.makespan = std::max(out.makespan, free_at[r]);
        progress = true;
      }
    }
  }
  for (int r = 0; r < static_cast<int>(s.size()); ++r) out.deadlock |= next[r] < s[r].size();
  return out;
}

// Largest number of microbatch-chunks whose forward has run and whose `release` pass has not.
int peak_in_flight(const std::vector<PipelineOp>& ops, PassKind release) {
  int now = 0, peak = 0;
  for (const PipelineOp& op : ops) {
    if (op.kind == PassKind::kForward) peak = std::max(peak, ++now);
    if (op.kind == release) --now;
  }
  return peak;
}

Schedule build(ScheduleKind kind, int pp, int vpp, int m) {
  auto s = build_pipeline_schedule(kind, pp, vpp, m);
  EXPECT_TRUE(s.ok()) << s.error_text();
  return s.ok() ? s.value() : Schedule{};
}

std::string label(ScheduleKind kind, int pp, int vpp, int m) {
  return std::string(to_string(kind)) + " pp=" + std::to_string(pp) +
         " vpp=" + std::to_string(vpp) + " m=" + std::to_string(m);
}

std::vector<PassKind> passes_of(ScheduleKind kind) {
  if (kind == ScheduleKind::kZeroBubbleH1) {
    return {PassKind::kForward, PassKind::kBackwardInput, PassKind::kBackwardWeight};
  }
  return {PassKind::kForward, PassKind::kBackward};
}

// Every (microbatch, chunk) once per pass kind of the schedule on every rank, and nothing else.
void expect_complete(const Schedule& s, ScheduleKind kind, int vpp, int m, const std::string& at) {
  const std::vector<PassKind> kinds = passes_of(kind);
  for (size_t r = 0; r < s.size(); ++r) {
    std::map<std::tuple<int, int, int>, int> seen;
    for (const PipelineOp& op : s[r]) {
      ASSERT_GE(op.microbatch, 0) << at;
      ASSERT_LT(op.microbatch, m) << at;
      ASSERT_GE(op.chunk, 0) << at;
      ASSERT_LT(op.chunk, vpp) << at;
      ASSERT_NE(std::find(kinds.begin(), kinds.end(), op.kind), kinds.end())
          << at << " unexpected pass " << to_string(op.kind);
      ++seen[{op.microbatch, op.chunk, static_cast<int>(op.kind)}];
    }
    EXPECT_EQ(seen.size(), kinds.size() * m * vpp) << at << " rank " << r;
    for (const auto& [k, n] : seen) EXPECT_EQ(n, 1) << at << " rank " << r;
  }
}

std::vector<int> microbatch_counts(int pp, bool multiples_only) {
  std::vector<int> ms = {pp, 2 * pp, 4 * pp};
  if (!multiples_only) ms.insert(ms.end(), {1, 3, pp + 1, 2 * pp + 3, std::max(1, pp - 1)});
  std::sort(ms.begin(), ms.end());
  ms.erase(std::unique(ms.begin(), ms.end()), ms.end());
  return ms;
}

TEST(PipelineSchedule, EveryPassOnceAndNoDeadlock) {
  const Durations d;
  for (ScheduleKind kind :
       {ScheduleKind::k1F1B, ScheduleKind::kInterleaved1F1B, ScheduleKind::kZeroBubbleH1}) {
    const bool interleaved = kind == ScheduleKind::kInterleaved1F1B;
    for (int pp = 1; pp <= 8; ++pp) {
      for (int vpp = interleaved ? 2 : 1; vpp <= (interleaved ? 4 : 1); ++vpp) {
        for (int m : microbatch_counts(pp, interleaved)) {
          const std::string at = label(kind, pp, vpp, m);
          const Schedule s = build(kind, pp, vpp, m);
          ASSERT_EQ(s.size(), static_cast<size_t>(pp)) << at;
          expect_complete(s, kind, vpp, m, at);
          EXPECT_FALSE(replay(s, pp, vpp, d).deadlock) << at;
        }
      }
    }
  }
}

TEST(PipelineSchedule, OneFOneBMakespanClosedForm) {
  // PipeDream-Flush: T = (m + p - 1)(F + B), so bubble / T = (p - 1) / (m + p - 1).
  const Durations d{.forward = 1, .backward = 2};
  for (int pp = 1; pp <= 8; ++pp) {
    for (int m : microbatch_counts(pp, false)) {
      const Replay r = replay(build(ScheduleKind::k1F1B, pp, 1, m), pp, 1, d);
      const int64_t t = (m + pp - 1) * (d.forward + d.backward);
      EXPECT_EQ(r.makespan, t) << label(ScheduleKind::k1F1B, pp, 1, m);
      const double bubble = static_cast<double>(r.makespan - r.busy[0]) / r.makespan;
      EXPECT_DOUBLE_EQ(bubble, static_cast<double>(pp - 1) / (m + pp - 1));
    }
  }
}

TEST(PipelineSchedule, InterleavedMakespanClosedForm) {
  // Each chunk pass costs 1/v of a full-stage pass; in units of 1/v stage, F_c = 1, B_c = 2.
  // Megatron interleaving: T = (m*v + p - 1)(F_c + B_c), i.e. (F + B)(m + (p - 1)/v) in stage
  // units: the 1F1B bubble (p - 1)(F + B) shrinks v times, bubble / ideal = (p - 1) / (v*m).
  const Durations d{.forward = 1, .backward = 2};
  for (int pp = 1; pp <= 8; ++pp) {
    for (int vpp = 2; vpp <= 4; ++vpp) {
      for (int m : microbatch_counts(pp, true)) {
        const std::string at = label(ScheduleKind::kInterleaved1F1B, pp, vpp, m);
        const Replay r = replay(build(ScheduleKind::kInterleaved1F1B, pp, vpp, m), pp, vpp, d);
        const int64_t ideal = static_cast<int64_t>(m) * vpp * (d.forward + d.backward);
        EXPECT_EQ(r.makespan, (m * vpp + pp - 1) * (d.forward + d.backward)) << at;
        EXPECT_EQ(r.busy[0], ideal) << at;
        EXPECT_DOUBLE_EQ(static_cast<double>(r.makespan - ideal) / ideal,
                         static_cast<double>(pp - 1) / (vpp * m))
            << at;
      }
    }
  }
}

TEST(PipelineSchedule, ZeroBubbleH1CutsTheBubbleToAThird) {
  // F = B = W = 1 for ZB-H1; 1F1B runs B and W together as one backward of 2.
  // ZB-H1 (Qi et al. 2024): T = m(F + B + W) + (p - 1)(F + B - W) = 3m + p - 1 for m >= p, a
  // bubble of p - 1 against 1F1B's 3(p - 1). For m < p rank 0's first B ends at 2p and it still
  // owes m B and m W passes: T = 2m + 2p - 1. Together: T = 2m + p - 1 + max(m, p).
  const Durations zb{.forward = 1, .input = 1, .weight = 1};
  const Durations fused{.forward = 1, .backward = 2};
  for (int pp = 1; pp <= 8; ++pp) {
    for (int m : microbatch_counts(pp, false)) {
      const std::string at = label(ScheduleKind::kZeroBubbleH1, pp, 1, m);
      const Replay h1 = replay(build(ScheduleKind::kZeroBubbleH1, pp, 1, m), pp, 1, zb);
      const Replay base = replay(build(ScheduleKind::k1F1B, pp, 1, m), pp, 1, fused);
      EXPECT_EQ(h1.makespan, 2 * m + pp - 1 + std::max(m, pp)) << at;
      const int64_t h1_bubble = h1.makespan - 3 * m, base_bubble = base.makespan - 3 * m;
      if (pp > 1) {
        EXPECT_LT(h1_bubble, base_bubble) << at;
      }
      if (m >= pp) {
        EXPECT_EQ(3 * h1_bubble, base_bubble) << at;
      }
    }
  }
}

TEST(PipelineSchedule, PeakInFlightMicrobatches) {
  for (int pp = 1; pp <= 8; ++pp) {
    for (int m : microbatch_counts(pp, false)) {
      const Schedule base = build(ScheduleKind::k1F1B, pp, 1, m);
      const Schedule h1 = build(ScheduleKind::kZeroBubbleH1, pp, 1, m);
      for (int r = 0; r < pp; ++r) {
        const std::string at =
            label(ScheduleKind::kZeroBubbleH1, pp, 1, m) + " rank " + std::to_string(r);
        // 1F1B: warm-up min(p - r - 1, m) forwards plus the one of the first pair.
        EXPECT_EQ(peak_in_flight(base[r], PassKind::kBackward), std::min(pp - r, m)) << at;
        // ZB-H1 holds activations until W: every rank reaches 1F1B's peak, min(p, m), the
        // count of 1F1B's rank 0, and never more; until B it is 1F1B's count on that rank.
        EXPECT_LE(peak_in_flight(h1[r], PassKind::kBackwardWeight), std::min(pp, m)) << at;
        EXPECT_EQ(peak_in_flight(h1[r], PassKind::kBackwardInput), std::min(pp - r, m)) << at;
      }
      EXPECT_EQ(peak_in_flight(h1[0], PassKind::kBackwardWeight), std::min(pp, m));
    }
  }
  // Interleaved, counted in (microbatch, chunk) pairs: Megatron's warm-up plus one, capped at
  // m*v: min(2(p - r - 1) + (v - 1)p + 1, m*v).
  for (int pp = 1; pp <= 8; ++pp) {
    for (int vpp = 2; vpp <= 4; ++vpp) {
      for (int m : microbatch_counts(pp, true)) {
        const Schedule s = build(ScheduleKind::kInterleaved1F1B, pp, vpp, m);
        for (int r = 0; r < pp; ++r) {
          EXPECT_EQ(peak_in_flight(s[r], PassKind::kBackward),
                    std::min(2 * (pp - r - 1) + (vpp - 1) * pp + 1, m * vpp))
              << label(ScheduleKind::kInterleaved1F1B, pp, vpp, m) << " rank " << r;
        }
      }
    }
  }
}

PipelineOp F(int mb, int chunk = 0) { return {mb, chunk, PassKind::kForward}; }
PipelineOp B(int mb, int chunk = 0) { return {mb, chunk, PassKind::kBackward}; }
PipelineOp Bi(int mb) { return {mb, 0, PassKind::kBackwardInput}; }
PipelineOp W(int mb) { return {mb, 0, PassKind::kBackwardWeight}; }

TEST(PipelineSchedule, GoldenOrders) {
  // 1F1B pp=4 m=6, rank 1: 2 warm-up forwards, 4 pairs, 2 cool-down backwards.
  EXPECT_EQ(build(ScheduleKind::k1F1B, 4, 1, 6)[1],
            (std::vector<PipelineOp>{F(0), F(1), F(2), B(0), F(3), B(1), F(4), B(2), F(5), B(3),
                                     B(4), B(5)}));
  // Megatron interleaved pp=2 vpp=2 m=4, rank 0: warm-up 2*1 + 1*2 = 4; virtual microbatch k is
  // microbatch (k/4)*2 + k%2, forward chunk (k/2)%2, backward chunk 1 - (k/2)%2.
  EXPECT_EQ(build(ScheduleKind::kInterleaved1F1B, 2, 2, 4)[0],
            (std::vector<PipelineOp>{F(0, 0), F(1, 0), F(0, 1), F(1, 1), F(2, 0), B(0, 1), F(3, 0),
                                     B(1, 1), F(2, 1), B(0, 0), F(3, 1), B(1, 0), B(2, 1), B(3, 1),
                                     B(2, 0), B(3, 0)}));
  // Rank 1 (last): warm-up 0 + 2 = 2.
  EXPECT_EQ(build(ScheduleKind::kInterleaved1F1B, 2, 2, 4)[1],
            (std::vector<PipelineOp>{F(0, 0), F(1, 0), F(0, 1), B(0, 1), F(1, 1), B(1, 1), F(2, 0),
                                     B(0, 0), F(3, 0), B(1, 0), F(2, 1), B(2, 1), F(3, 1), B(3, 1),
                                     B(2, 0), B(3, 0)}));
  // ZB-H1 pp=4 m=6: rank 0 runs W right after B; rank 3 delays each W by 3 backwards.
  const Schedule h1 = build(ScheduleKind::kZeroBubbleH1, 4, 1, 6);
  EXPECT_EQ(h1[0],
            (std::vector<PipelineOp>{F(0), F(1), F(2), F(3), Bi(0), W(0), F(4), Bi(1), W(1), F(5),
                                     Bi(2), W(2), Bi(3), W(3), Bi(4), W(4), Bi(5), W(5)}));
  EXPECT_EQ(h1[3],
            (std::vector<PipelineOp>{F(0), Bi(0), F(1), Bi(1), F(2), Bi(2), F(3), Bi(3), W(0), F(4),
                                     Bi(4), W(1), F(5), Bi(5), W(2), W(3), W(4), W(5)}));
}

TEST(PipelineSchedule, ReplayDetectsDeadlock) {
  // Rank 0 asks for B(0) before running F(0): nothing can ever start it.
  Schedule s = build(ScheduleKind::k1F1B, 2, 1, 2);
  std::swap(s[0][0], s[0][2]);
  EXPECT_TRUE(replay(s, 2, 1, Durations{}).deadlock);
}

TEST(PipelineSchedule, Dependencies) {
  EXPECT_EQ(virtual_stage(1, 2, 4), 9);
  // Interleaved pp=4 vpp=2: rank 0 chunk 1 is virtual stage 4, fed by rank 3 chunk 0.
  EXPECT_TRUE(pipeline_dependencies({0, F(3, 0)}, 4, 2).empty());
  EXPECT_EQ(pipeline_dependencies({0, F(3, 1)}, 4, 2), (std::vector<OpRef>{{3, F(3, 0)}}));
  EXPECT_EQ(pipeline_dependencies({3, B(3, 0)}, 4, 2),
            (std::vector<OpRef>{{0, B(3, 1)}, {3, F(3, 0)}}));
  // The last virtual stage turns its own forward around.
  EXPECT_EQ(pipeline_dependencies({3, B(5, 1)}, 4, 2), (std::vector<OpRef>{{3, F(5, 1)}}));
  // Zero bubble: B waits for the next stage's B, W for its own B.
  EXPECT_EQ(pipeline_dependencies({1, Bi(2)}, 4, 1), (std::vector<OpRef>{{2, Bi(2)}, {1, F(2)}}));
  EXPECT_EQ(pipeline_dependencies({1, W(2)}, 4, 1), (std::vector<OpRef>{{1, Bi(2)}}));
}

void expect_error(ScheduleKind kind, int pp, int vpp, int m, const std::string& substring) {
  const auto s = build_pipeline_schedule(kind, pp, vpp, m);
  ASSERT_FALSE(s.ok()) << label(kind, pp, vpp, m);
  EXPECT_NE(s.error_text().find(substring), std::string::npos) << s.error_text();
}

TEST(PipelineSchedule, InvalidInputsReturnDiagnostics) {
  expect_error(ScheduleKind::k1F1B, 4, 2, 8, "--vpp: schedule 1f1b needs vpp == 1, got 2");
  expect_error(ScheduleKind::kZeroBubbleH1, 4, 2, 8, "needs vpp == 1");
  expect_error(ScheduleKind::kInterleaved1F1B, 4, 2, 6,
               "needs microbatches=6 to be a multiple of pp=4 (hint: microbatches in {4,8,");
  expect_error(ScheduleKind::kInterleaved1F1B, 4, 1, 8, "needs vpp >= 2, got 1");
  expect_error(ScheduleKind::k1F1B, 0, 1, 8, "--pp: pp must be >= 1, got 0");
  expect_error(ScheduleKind::k1F1B, 2, 1, 0, "microbatches must be >= 1, got 0");
  // Every problem is reported, not only the first.
  const auto s = build_pipeline_schedule(ScheduleKind::k1F1B, 0, 0, 0);
  EXPECT_EQ(s.errors().size(), 3u) << s.error_text();
}

}  // namespace
}  // namespace parallax
