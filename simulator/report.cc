#include "simulator/report.h"

#include <cstdio>
#include <set>
#include <sstream>

#include "core/text.h"
#include "core/units.h"

namespace parallax {
namespace {

std::string layout(const ParallelPlan& p) {
  std::ostringstream os;
  os << "tp" << p.tp << " pp" << p.pp << " dp" << p.dp << " cp" << p.cp;
  if (p.ep > 1) os << " ep" << p.ep;
  if (p.etp > 1) os << " etp" << p.etp;
  if (p.vpp > 1) os << " vpp" << p.vpp;
  os << ", mbs " << p.micro_batch << ", gbs " << p.global_batch << " x " << p.seq_len << " tokens ("
     << p.num_microbatches() << " microbatches)";
  return os.str();
}

std::string settings(const ParallelPlan& p) {
  std::ostringstream os;
  os << to_string(p.precision) << ", recompute " << to_string(p.recompute) << ", "
     << (p.fsdp ? "fsdp" : "zero " + std::to_string(p.zero_stage)) << ", schedule "
     << to_string(p.schedule) << (p.sequence_parallel ? ", sequence parallel" : "")
     << (p.overlap_tp_comm ? ", tp overlap" : "") << (p.eager ? ", eager" : "");
  return os.str();
}

constexpr CostCategory kShown[] = {
    CostCategory::kCompute, CostCategory::kTpComm, CostCategory::kCpComm, CostCategory::kEpComm,
    CostCategory::kDpComm,  CostCategory::kPpComm, CostCategory::kBubble, CostCategory::kOptimizer};

}  // namespace

std::string format_table(const StepReport& r, const ErrorBar* bar) {
  std::ostringstream os;
  os << r.model << " on " << r.gpus << " x " << r.hardware << "\n";
  os << "  layout     " << layout(r.plan) << "\n";
  os << "  settings   " << settings(r.plan) << "\n\n";
  os << "  step time            " << format_number("%.3f s", r.step_time_s) << "\n";
  os << "  tokens/s             " << format_number("%.0f", r.tokens_per_s) << "  ("
     << format_number("%.1f", r.tokens_per_s_per_gpu) << " per GPU)\n";
  if (bar && bar->known())
    os << "  error bar (80%)      " << format_number("%.3f", r.step_time_s / (1 + bar->hi))
       << format_number(" - %.3f s", r.step_time_s / (1 + bar->lo))
       << format_number("  (throughput %+.0f%%", 100 * bar->lo)
       << format_number(" to %+.0f%%; ", 100 * bar->hi) << bar->basis << ")\n";
  os << "  model TFLOP/s/GPU    " << format_number("%.1f", r.model_tflops_per_gpu) << "  MFU "
     << format_number("%.1f%%", 100 * r.mfu) << "\n";
  os << "  hardware TFLOP/s/GPU " << format_number("%.1f", r.hardware_tflops_per_gpu) << "  HFU "
     << format_number("%.1f%%", 100 * r.hfu) << "\n";
  os << "  peak memory          " << format_number("%.1f GiB", r.peak_memory_gib) << " of "
     << format_number("%.0f GiB", r.hbm_gib) << (r.fits ? "  (fits)" : "  (OUT OF MEMORY)")
     << "\n\n";
  os << "  breakdown (pipeline stage " << r.critical_stage << ")\n";
  for (CostCategory c : kShown) {
    const double t = r.breakdown_s[static_cast<int>(c)];
    os << "    "
       << std::string(to_string(c)) + std::string(12 - std::string(to_string(c)).size(), ' ')
       << format_number("%9.3f s", t) << format_number("  %5.1f%%", 100 * t / r.step_time_s)
       << "\n";
  }
  os << "\n  memory per stage (GiB)  weights   grads   optim   activ   buffers   total\n";
  for (const auto& s : r.stages) {
    const auto& m = s.memory;
    os << "    stage " << format_number("%-3.0f", static_cast<double>(s.pipeline_rank))
       << "           " << format_number("%7.1f", m.weights_bytes / kGiB)
       << format_number(" %7.1f", m.grads_bytes / kGiB)
       << format_number(" %7.1f", m.optimizer_bytes / kGiB)
       << format_number(" %7.1f", m.activations_bytes / kGiB)
       << format_number(" %9.1f", (m.buffers_bytes + m.reserved_bytes) / kGiB)
       << format_number(" %7.1f", m.total() / kGiB) << "\n";
  }
  for (const auto& n : r.notes) os << "  note: " << n << "\n";
  return os.str();
}

Json to_json(const StepReport& r, const ErrorBar* bar) {
  Json breakdown = Json::object();
  for (CostCategory c : kShown)
    breakdown[std::string(to_string(c)) + "_s"] = r.breakdown_s[static_cast<int>(c)];
  Json stages = Json::array();
  for (const auto& s : r.stages) {
    const auto& m = s.memory;
    stages.push_back({{"pipeline_rank", s.pipeline_rank},
                      {"memory_gib",
                       {{"weights", m.weights_bytes / kGiB},
                        {"grads", m.grads_bytes / kGiB},
                        {"optimizer", m.optimizer_bytes / kGiB},
                        {"activations", m.activations_bytes / kGiB},
                        {"buffers", m.buffers_bytes / kGiB},
                        {"reserved", m.reserved_bytes / kGiB},
                        {"total", m.total() / kGiB}}},
                      {"fits", m.total() <= r.hbm_gib * kGiB}});
  }
  Json j = {{"model", r.model},
            {"hardware", r.hardware},
            {"gpus", r.gpus},
            {"step_time_s", r.step_time_s},
            {"tokens_per_s", r.tokens_per_s},
            {"tokens_per_s_per_gpu", r.tokens_per_s_per_gpu},
            {"model_tflops_per_gpu", r.model_tflops_per_gpu},
            {"hardware_tflops_per_gpu", r.hardware_tflops_per_gpu},
            {"mfu", r.mfu},
            {"hfu", r.hfu},
            {"peak_memory_gib", r.peak_memory_gib},
            {"hbm_gib", r.hbm_gib},
            {"fits", r.fits},
            {"breakdown", breakdown},
            {"critical_stage", r.critical_stage},
            {"stages", stages},
            {"notes", r.notes}};
  j["plan"] = plan_to_json(r.plan);
  if (bar && bar->known())
    j["error_bar"] = {
        {"throughput_lo", bar->lo},
        {"throughput_hi", bar->hi},
        {"step_time_s", {r.step_time_s / (1 + bar->hi), r.step_time_s / (1 + bar->lo)}},
        {"runs", bar->n},
        {"basis", bar->basis}};
  return j;
}

namespace {

/// The memory track of each rank: its stage's parameter state (constant over the step) plus
/// the activations it holds, in GiB, as a Perfetto counter.
void add_memory_counters(const StepReport& r, Json* events) {
  for (const ActivationSample& m : r.engine.memory) {
    const int stage = r.engine.stage_of_rank[m.rank];
    const MemoryBreakdown& mb = r.stages[stage].memory;
    const double state = mb.total() - mb.activations_bytes;
    events->push_back(
        {{"ph", "C"},
         {"name", "memory GiB"},
         {"pid", m.rank},
         {"ts", m.time_s * 1e6},
         {"args", {{"state", state / kGiB}, {"activations", m.activation_bytes / kGiB}}}});
  }
}

}  // namespace

Json chrome_trace(const StepReport& r, const TraceOptions& opt) {
  Json events = Json::array();
  std::set<std::pair<int, int>> named;
  int64_t left_out = 0;
  for (const auto& s : r.engine.trace) {
    if (opt.microbatches > 0 && s.microbatch >= opt.microbatches) {
      ++left_out;
      continue;
    }
    const int tid = static_cast<int>(s.stream);
    if (named.insert({s.rank, tid}).second) {
      events.push_back({{"ph", "M"},
                        {"name", "thread_name"},
                        {"pid", s.rank},
                        {"tid", tid},
                        {"args", {{"name", to_string(s.stream)}}}});
      if (tid == 0) {
        const int stage = r.engine.stage_of_rank[s.rank];
        events.push_back({{"ph", "M"},
                          {"name", "process_name"},
                          {"pid", s.rank},
                          {"args",
                           {{"name", "pipeline stage " + std::to_string(stage) + " (rank " +
                                         std::to_string(s.rank) + ")"}}}});
      }
    }
    Json args = {{"category", to_string(s.category)}};
    if (s.microbatch >= 0) args["microbatch"] = s.microbatch;
    if (s.chunk >= 0) args["chunk"] = s.chunk;
    events.push_back({{"ph", "X"},
                      {"name", s.name},
                      {"cat", to_string(s.category)},
                      {"pid", s.rank},
                      {"tid", tid},
                      {"ts", s.start_s * 1e6},
                      {"dur", (s.end_s - s.start_s) * 1e6},
                      {"args", args}});
  }
  add_memory_counters(r, &events);
  Json out = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  if (left_out > 0)
    out["otherData"] = {{"note", "operators of microbatches 0-" +
                                     std::to_string(opt.microbatches - 1) + " of " +
                                     std::to_string(r.plan.num_microbatches()) + " per stage; " +
                                     std::to_string(left_out) +
                                     " spans of the others left out (--trace-all keeps them)"}};
  return out;
}

}  // namespace parallax
