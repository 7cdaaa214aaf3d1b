#include "simulator/engine.h"

#include <algorithm>
#include <limits>

#include "core/rank_map.h"

namespace parallax {

const char* to_string(StreamKind s) {
  switch (s) {
    case StreamKind::kCompute:
      return "compute";
    case StreamKind::kPipeline:
      return "pipeline";
    case StreamKind::kDataParallel:
      return "data-parallel";
  }
  return "?";
}

namespace {

constexpr double kUnset = -1;

/// The simulated entities: representative stages, or every rank of the world.
struct Entities {
  int count = 0;
  std::vector<int> stage;                  ///< pipeline rank of each entity
  std::vector<int> prev, next;             ///< entity of the previous / next pipeline rank
  std::vector<std::vector<int>> dp_group;  ///< entities whose gradient syncs run together
};

Entities make_entities(const ParallelPlan& p, bool full, int domain) {
  Entities e;
  if (!full) {
    e.count = p.pp;
    for (int r = 0; r < p.pp; ++r) {
      e.stage.push_back(r);
      e.prev.push_back((r + p.pp - 1) % p.pp);
      e.next.push_back((r + 1) % p.pp);
      e.dp_group.push_back({r});
    }
    return e;
  }
  RankMap map(p, domain);
  e.count = map.world_size();
  for (int r = 0; r < e.count; ++r) {
    const RankCoords c = map.coords(r);
    e.stage.push_back(c.pp);
    e.prev.push_back(map.rank_of(c.tp, c.cp, c.dp, (c.pp + p.pp - 1) % p.pp));
    e.next.push_back(map.rank_of(c.tp, c.cp, c.dp, (c.pp + 1) % p.pp));
    e.dp_group.push_back(map.group(GroupKind::kDpCp, r));
  }
  return e;
}

class Replay {
 public:
  Replay(const EngineSetup& s, const std::vector<std::vector<PipelineOp>>& sched)
      : s_(s),
        sched_(sched),
        ent_(make_entities(s.plan, s.full_ranks, s.scale_up_domain)),
        layout_{s.plan.schedule, s.plan.pp, s.plan.vpp} {
    const int64_t m = s.plan.num_microbatches();
    const int chunks = layout_.chunks_per_rank();
    for (auto* f : {&fin_f_, &fin_b_, &fin_w_})
      f->assign(ent_.count, std::vector<double>(chunks * m, kUnset));
    arrive_f_ = fin_f_;
    arrive_b_ = fin_b_;
    compute_free_.assign(ent_.count, 0);
    p2p_free_.assign(ent_.count, 0);
    cursor_.assign(ent_.count, 0);
    act_.assign(ent_.count, ActivationLedger{});
    res_.ranks.resize(ent_.count);
    res_.stage_of_rank = ent_.stage;
    last_bwd_.assign(ent_.count, std::vector<std::pair<double, double>>(chunks, {0, 0}));
  }

  EngineResult run() {
    replay_pipeline();
    finish_step();
    return std::move(res_);
  }

 private:
  /// Index of (chunk, microbatch) among those of one entity.
  int idx(int chunk, int mb) const {
    return chunk * static_cast<int>(s_.plan.num_microbatches()) + mb;
  }

  /// Earliest start of op on entity e from its data dependencies, or kUnset if not yet known.
  double ready_time(int e, const PipelineOp& op) const {
    const int stage = layout_.stage_of(ent_.stage[e], op.chunk);
    const int i = idx(op.chunk, op.microbatch);
    switch (op.kind) {
      case PassKind::kForward:
        return stage == 0 ? 0.0 : arrive_f_[e][i];
      case PassKind::kBackward:
      case PassKind::kBackwardInput: {
        const double own = fin_f_[e][i];
        if (own == kUnset) return kUnset;
        if (stage == layout_.stages() - 1) return own;
        const double up = arrive_b_[e][i];
        return up == kUnset ? kUnset : std::max(own, up);
      }
      case PassKind::kBackwardWeight:
        return fin_b_[e][i];
    }
    return kUnset;
  }

  /// The entity that runs `stage` of the microbatch of `op` (on chunks of op's index under
  /// DualPipe), a pipeline neighbour of entity e, and that chunk.
  std::pair<int, int> neighbour(int e, const PipelineOp& op, int stage) const {
    const OpRef at = layout_.place(stage, op.chunk, op);
    const int to = at.rank == (ent_.stage[e] + 1) % s_.plan.pp ? ent_.next[e] : ent_.prev[e];
    return {to, at.op.chunk};
  }

  /// Sends the activation (or its gradient) to the neighbouring stage. The interleaved and
  /// zero-bubble schedules post it on a p2p stream beside compute. Non-interleaved 1F1B, as
  /// Megatron-LM and torch.distributed.pipelining run it, exchanges it in a batched send/recv it
  /// waits on before its next pass (send_forward_recv_backward and send_backward_recv_forward):
  /// the compute stream idles for the transfer.
  void send(int e, int to, int chunk_to, int mb, bool forward, double at) {
    const double start = std::max(at, p2p_free_[e]);
    const double end = start + s_.p2p_time_s;
    p2p_free_[e] = end;
    if (s_.plan.schedule == ScheduleKind::k1F1B && end > compute_free_[e]) {
      res_.ranks[e].busy_by_category[static_cast<int>(CostCategory::kPpComm)] +=
          end - std::max(start, compute_free_[e]);
      compute_free_[e] = end;
    }
    (forward ? arrive_f_ : arrive_b_)[to][idx(chunk_to, mb)] = end;
    if (s_.record_trace && s_.p2p_time_s > 0)
      res_.trace.push_back({e, StreamKind::kPipeline, forward ? "send_act" : "send_grad",
                            CostCategory::kPpComm, start, end, mb, -1, PassKind::kForward});
  }

  /// Runs `n` ops of entity e from `ops` (one, or an overlapped forward-backward pair) as one
  /// span of the compute stream starting at `ready` or when the stream frees.
  void execute(int e, const PipelineOp* ops, int n, double ready) {
    const int r = ent_.stage[e];
    const PassCost* pc[2] = {};
    double span = 0;
    for (int k = 0; k < n; ++k) {
      pc[k] = &pass_cost(s_.stages[layout_.stage_of(r, ops[k].chunk)], ops[k].kind);
      span += pc[k]->time_s;
    }
    if (n == 2) span = paired_time(*pc[0], *pc[1], s_.overlap_slowdown);
    const double start = std::max(ready, compute_free_[e]);
    const double end = start + span;
    compute_free_[e] = end;
    RankOutcome& out = res_.ranks[e];
    double listed = 0;
    for (int k = 0; k < n; ++k) {
      for (int c = 0; c < kNumCategories; ++c) out.busy_by_category[c] += pc[k]->by_category[c];
      listed += pc[k]->time_s;
    }
    // The pair's hidden communication leaves the expert-parallel category.
    out.busy_by_category[static_cast<int>(CostCategory::kEpComm)] -= listed - span;
    double t = start;
    for (int k = 0; k < n; ++k) {
      finish(e, ops[k], t, end, span / listed);
      t += pc[k]->time_s * span / listed;
    }
  }

  /// Records op's end at `end` (its ledger, sends and trace, the trace compressed by `scale`
  /// within a pair from `start`).
  void finish(int e, const PipelineOp& op, double start, double end, double scale) {
    const int vs = layout_.stage_of(ent_.stage[e], op.chunk);
    const StageCost& st = s_.stages[vs];
    const PassCost& pc = pass_cost(st, op.kind);
    RankOutcome& out = res_.ranks[e];
    const double stored_before = act_[e].current_bytes();
    act_[e].run(st, op.kind);
    out.peak_activation_bytes = act_[e].peak_bytes();
    if (s_.record_trace) {
      // The pass's own working memory on top while it runs (ActivationLedger::run).
      const bool holds_transient =
          op.kind == PassKind::kForward ? st.has_output : op.kind != PassKind::kBackwardWeight;
      const double stored_during =
          op.kind == PassKind::kForward ? act_[e].current_bytes() : stored_before;
      res_.memory.push_back({e, start, stored_during + (holds_transient ? st.transient_bytes : 0)});
      res_.memory.push_back({e, end, act_[e].current_bytes()});
    }
    const int i = idx(op.chunk, op.microbatch);
    if (op.kind == PassKind::kForward) {
      fin_f_[e][i] = end;
      if (vs + 1 < layout_.stages()) {
        const auto [to, chunk] = neighbour(e, op, vs + 1);
        send(e, to, chunk, op.microbatch, true, end);
      }
    } else if (op.kind == PassKind::kBackwardWeight) {
      fin_w_[e][i] = end;
    } else {
      fin_b_[e][i] = end;
      if (vs > 0) {
        const auto [to, chunk] = neighbour(e, op, vs - 1);
        send(e, to, chunk, op.microbatch, false, end);
      }
    }
    if (op.kind != PassKind::kForward) {
      auto& lb = last_bwd_[e][op.chunk];
      if (end > lb.second) lb = {start, end};
      out.last_backward_end_s = std::max(out.last_backward_end_s, end);
    }
    ++res_.events;
    if (s_.record_trace) {
      // Expand the pass into its operators for the trace.
      double t = start;
      for (const auto& o : pc.ops) {
        if (o.time_s <= 0) continue;
        res_.trace.push_back({e, StreamKind::kCompute, o.name, o.category, t, t + o.time_s * scale,
                              op.microbatch, op.chunk, op.kind});
        t += o.time_s * scale;
      }
    }
  }

  void replay_pipeline() {
    size_t remaining = 0;
    for (int e = 0; e < ent_.count; ++e) remaining += sched_[ent_.stage[e]].size();
    while (remaining > 0) {
      bool progressed = false;
      for (int e = 0; e < ent_.count; ++e) {
        const auto& list = sched_[ent_.stage[e]];
        // Run as many consecutive ops (or overlapped pairs) as are ready on this entity.
        while (cursor_[e] < list.size()) {
          const PipelineOp& op = list[cursor_[e]];
          const int n = op.paired_with_next && cursor_[e] + 1 < list.size() ? 2 : 1;
          double ready = ready_time(e, op);
          if (n == 2 && ready != kUnset) {
            const double second = ready_time(e, list[cursor_[e] + 1]);
            ready = second == kUnset ? kUnset : std::max(ready, second);
          }
          if (ready == kUnset) break;
          execute(e, &op, n, ready);
          cursor_[e] += n;
          remaining -= n;
          progressed = true;
        }
      }
      PX_CHECK(progressed, "pipeline schedule deadlocked with " << remaining << " ops left");
    }
  }

  /// Gradient reduction of entity e, chunk by chunk in the order their last backward ends,
  /// bucket by bucket (one bucket per layer) as that backward produces them. Returns when the
  /// reductions end; `overlapped` gets the communication time that ran beside compute.
  double grad_sync_end(int e, double* overlapped) {
    const int chunks = layout_.chunks_per_rank();
    const double all_done = compute_free_[e];
    std::vector<int> order(chunks);
    for (int c = 0; c < chunks; ++c) order[c] = c;
    std::sort(order.begin(), order.end(),
              [&](int a, int b) { return last_bwd_[e][a].second < last_bwd_[e][b].second; });
    double dp_free = 0, busy = 0;
    for (int c : order) {
      const int vs = layout_.stage_of(ent_.stage[e], c);
      const double total = s_.grad_sync_s[vs];
      if (total <= 0) continue;
      const auto [b0, b1] = last_bwd_[e][c];
      const int buckets = std::max(1, s_.stages[vs].layers);
      for (int j = 0; j < buckets; ++j) {
        const double ready =
            s_.plan.overlap_grad_reduce ? b0 + (j + 1) * (b1 - b0) / buckets : all_done;
        const double start = std::max(ready, dp_free);
        dp_free = start + total / buckets;
        busy += std::max(0.0, std::min(dp_free, all_done) - start);
      }
      if (s_.record_trace)
        res_.trace.push_back({e, StreamKind::kDataParallel, "grad_sync", CostCategory::kDpComm,
                              dp_free - total, dp_free, -1, c, PassKind::kBackward});
    }
    *overlapped = busy;
    return std::max(all_done, dp_free);
  }

  /// Exposed time of the parameter all-gather after the optimizer (ZeRO-1/2, or FSDP with
  /// pipelining). With overlap, bucket j must arrive before layer j of the next step's first
  /// forward: with G the gather, F that forward and L buckets, G/L + max(0, G - F) shows;
  /// `overlapped` gets the rest.
  double param_gather_exposed(int r, double* overlapped) const {
    double gather = 0, forward = 0;
    int layers = 0;
    for (int c = 0; c < layout_.chunks_per_rank(); ++c) {
      const int vs = layout_.stage_of(r, c);
      gather += s_.param_sync_s[vs];
      forward += s_.stages[vs].forward.time_s;
      layers += s_.stages[vs].layers;
    }
    const double exposed = s_.plan.overlap_param_gather
                               ? gather / std::max(1, layers) + std::max(0.0, gather - forward)
                               : gather;
    *overlapped = std::max(0.0, gather - exposed);
    return exposed;
  }

  /// After the pipeline drains: gradient synchronisation (a collective completes only when all
  /// members of its group have joined), the optimizer step, and the parameter all-gather.
  /// Communication that overlaps compute slows it by the profile's share of SMs it occupies.
  void finish_step() {
    std::vector<double> sync_end(ent_.count, 0), grad_overlap(ent_.count, 0);
    for (int e = 0; e < ent_.count; ++e) sync_end[e] = grad_sync_end(e, &grad_overlap[e]);
    const int dp_cat = static_cast<int>(CostCategory::kDpComm);
    for (int e = 0; e < ent_.count; ++e) {
      double end = 0;
      for (int g : ent_.dp_group[e]) end = std::max(end, sync_end[g]);
      RankOutcome& out = res_.ranks[e];
      const int r = ent_.stage[e];
      double gather_overlap = 0;
      const double gather = param_gather_exposed(r, &gather_overlap);
      const double contention = s_.overlap_slowdown * (grad_overlap[e] + gather_overlap);
      out.busy_by_category[dp_cat] += end - compute_free_[e] + gather + contention;
      const double opt = s_.optimizer_s[r];
      out.busy_by_category[static_cast<int>(CostCategory::kOptimizer)] += opt;
      if (s_.record_trace && opt > 0)
        res_.trace.push_back({e, StreamKind::kCompute, "optimizer_step", CostCategory::kOptimizer,
                              end, end + opt, -1, -1, PassKind::kForward});
      out.end_s = end + opt + gather + contention;
      res_.step_time_s = std::max(res_.step_time_s, out.end_s);
    }
    for (auto& out : res_.ranks) {
      double accounted = 0;
      for (int c = 0; c < kNumCategories; ++c) accounted += out.busy_by_category[c];
      out.busy_by_category[static_cast<int>(CostCategory::kBubble)] +=
          std::max(0.0, res_.step_time_s - accounted);
    }
  }

  const EngineSetup& s_;
  const std::vector<std::vector<PipelineOp>>& sched_;
  Entities ent_;
  PipelineLayout layout_;
  std::vector<std::vector<double>> fin_f_, fin_b_, fin_w_, arrive_f_, arrive_b_;
  std::vector<double> compute_free_, p2p_free_;
  std::vector<ActivationLedger> act_;
  std::vector<size_t> cursor_;
  std::vector<std::vector<std::pair<double, double>>> last_bwd_;
  EngineResult res_;
};

}  // namespace

EngineResult run_engine(const EngineSetup& setup,
                        const std::vector<std::vector<PipelineOp>>& schedule) {
  return Replay(setup, schedule).run();
}

}  // namespace parallax
