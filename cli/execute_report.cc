#include "cli/execute_report.h"

#include <cstdio>
#include <string>

#include "core/text.h"

namespace parallax::cli {
namespace {

/// The simulator's time of pipeline stage 0 (the stage of rank 0) by the executor's operator
/// kinds: communication by its cost category (tensor-, context-, expert-, data- and
/// pipeline-parallel transfers), the rest by name; spans the executor has no kind for (fused
/// ops) left out.
exec::OpSeconds predicted_op_seconds(const StepReport& r) {
  exec::OpSeconds s;
  for (const TraceSpan& span : r.engine.trace) {
    if (span.rank != 0) continue;
    const double t = span.end_s - span.start_s;
    switch (span.category) {
      case CostCategory::kTpComm:
      case CostCategory::kCpComm:
      case CostCategory::kEpComm:
      case CostCategory::kDpComm:
      case CostCategory::kPpComm: {
        const bool backward = span.pass != PassKind::kForward || span.name == "send_grad";
        (backward ? s.backward : s.forward)[static_cast<size_t>(exec::OpKind::kCommunication)] += t;
        continue;
      }
      default:
        break;
    }
    const auto k = exec::op_kind_of(span.name);
    if (!k) continue;
    (k->backward ? s.backward : s.forward)[static_cast<size_t>(k->kind)] += t;
  }
  return s;
}

}  // namespace

/// Rank 0's time by operator in the step closest to the median, beside the prediction for the
/// same stage (when there is one): a table, or JSON.
void print_op_times(const exec::TrainResult& r, const StepReport* predicted, bool json, Json* out) {
  const exec::StepRecord* step = nullptr;
  for (const auto& s : r.steps)
    if (s.step == r.median_step) step = &s;
  if (step == nullptr) return;
  const exec::OpSeconds& m = step->ops;
  const exec::OpSeconds p = predicted ? predicted_op_seconds(*predicted) : exec::OpSeconds{};
  const double rest = step->time_s - m.total(),
               predicted_rest = predicted ? predicted->step_time_s - p.total() : 0;
  if (json) {
    Json ops = Json::array();
    for (int i = 0; i < exec::kNumOpKinds; ++i) {
      Json o = {{"op", std::string(exec::op_kind_name(static_cast<exec::OpKind>(i)))},
                {"forward_s", m.forward[i]},
                {"backward_s", m.backward[i]}};
      if (predicted) {
        o["predicted_forward_s"] = p.forward[i];
        o["predicted_backward_s"] = p.backward[i];
      }
      ops.push_back(o);
    }
    (*out)["op_times"] = {{"step", step->step},
                          {"ops", ops},
                          {"rest_s", rest},
                          {"ranks_min_s", step->ops_min_s},
                          {"ranks_max_s", step->ops_max_s},
                          {"slowest_rank", step->slowest_rank}};
    if (predicted) (*out)["op_times"]["predicted_rest_s"] = predicted_rest;
    return;
  }
  std::printf("  step %lld by operator, rank 0 (ms)%s\n", static_cast<long long>(step->step),
              predicted ? "; predicted for pipeline stage 0" : "");
  std::printf("    %-14s %9s %9s %9s %9s\n", "operator", "forward", predicted ? "predicted" : "",
              "backward", predicted ? "predicted" : "");
  const auto row = [&](std::string_view name, double f, double pf, double b, double pb) {
    if (predicted)
      std::printf("    %-14.*s %9.2f %9.2f %9.2f %9.2f\n", static_cast<int>(name.size()),
                  name.data(), 1e3 * f, 1e3 * pf, 1e3 * b, 1e3 * pb);
    else
      std::printf("    %-14.*s %9.2f %9s %9.2f\n", static_cast<int>(name.size()), name.data(),
                  1e3 * f, "", 1e3 * b);
  };
  for (int i = 0; i < exec::kNumOpKinds; ++i)
    if (m.forward[i] + m.backward[i] + p.forward[i] + p.backward[i] > 0)
      row(exec::op_kind_name(static_cast<exec::OpKind>(i)), m.forward[i], p.forward[i],
          m.backward[i], p.backward[i]);
  std::printf(
      "    rest (copies, bookkeeping, idle): %.2f ms%s\n", 1e3 * rest,
      predicted ? (", predicted " + format_fixed(1e3 * predicted_rest, 2) + " ms").c_str() : "");
  if (step->ops_max_s > step->ops_min_s) {
    // Without pipeline stages and experts every rank runs the same work, so a spread is a
    // slower rank, whose lateness the others wait out in their communication.
    const double spread = step->ops_max_s / step->ops_min_s - 1;
    std::printf("    operators over the ranks: %.2f to %.2f ms, rank %d slowest (+%.0f%%)%s\n",
                1e3 * step->ops_min_s, 1e3 * step->ops_max_s, step->slowest_rank, 100 * spread,
                spread > 0.1 ? ": a straggler, which the others wait for" : "");
  }
}

}  // namespace parallax::cli
