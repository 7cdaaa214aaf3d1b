#include "planner/plan_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "core/text.h"
#include "core/units.h"
#include "simulator/report.h"

namespace parallax {
namespace {

double headroom_pct(const StepReport& r) {
  return 100.0 * (r.hbm_gib - r.peak_memory_gib) / r.hbm_gib;
}

/// One line per layout field that differs: "pp 4 -> 8".
std::vector<std::string> layout_differences(const ParallelPlan& a, const ParallelPlan& b) {
  std::vector<std::string> out;
  auto num = [&](const char* name, int64_t x, int64_t y) {
    if (x != y)
      out.push_back(std::string(name) + " " + std::to_string(x) + " vs " + std::to_string(y));
  };
  auto word = [&](const char* name, const std::string& x, const std::string& y) {
    if (x != y) out.push_back(std::string(name) + " " + x + " vs " + y);
  };
  num("gpus", a.gpus(), b.gpus());
  num("tp", a.tp, b.tp);
  num("pp", a.pp, b.pp);
  num("dp", a.dp, b.dp);
  num("cp", a.cp, b.cp);
  num("ep", a.ep, b.ep);
  num("etp", a.etp, b.etp);
  num("vpp", a.vpp, b.vpp);
  num("mbs", a.micro_batch, b.micro_batch);
  word("sequence parallel", a.sequence_parallel ? "on" : "off", b.sequence_parallel ? "on" : "off");
  word("recompute", to_string(a.recompute), to_string(b.recompute));
  word("sharding", a.fsdp ? "fsdp" : "zero" + std::to_string(a.zero_stage),
       b.fsdp ? "fsdp" : "zero" + std::to_string(b.zero_stage));
  word("schedule", to_string(a.schedule), to_string(b.schedule));
  word("cp exchange", to_string(a.cp_comm), to_string(b.cp_comm));
  auto on = [](bool v) { return std::string(v ? "on" : "off"); };
  word("tp overlap", on(a.overlap_tp_comm), on(b.overlap_tp_comm));
  word("grad-reduce overlap", on(a.overlap_grad_reduce), on(b.overlap_grad_reduce));
  word("param-gather overlap", on(a.overlap_param_gather), on(b.overlap_param_gather));
  word("attention", to_string(a.attention), to_string(b.attention));
  word("elementwise ops", a.eager ? "eager" : "fused", b.eager ? "eager" : "fused");
  return out;
}

}  // namespace

std::string frameworks_text(const std::vector<LaunchTarget>& f) {
  if (f.empty()) return "none";
  std::string s;
  for (LaunchTarget t : f) s += (s.empty() ? "" : ",") + std::string(to_string(t));
  return s;
}

namespace {}  // namespace

CostCategory biggest_exposed_cost(const StepReport& r) {
  CostCategory best = CostCategory::kBubble;
  double most = -1;
  for (int c = 0; c < kNumCategories; ++c) {
    const auto cat = static_cast<CostCategory>(c);
    if (cat == CostCategory::kCompute) continue;
    if (r.breakdown_s[c] > most) {
      most = r.breakdown_s[c];
      best = cat;
    }
  }
  return best;
}

Json plan_file_json(const ModelSpec& m, const StepReport& r) {
  Json j = plan_to_json(r.plan);
  j["format"] = kPlanFormat;
  j["model"] = to_json(m);
  j["cluster"] = {{"gpu", r.hardware}, {"num_gpus", r.gpus}};
  j["predicted"] = {{"step_time_s", r.step_time_s},
                    {"tokens_per_s_per_gpu", r.tokens_per_s_per_gpu},
                    {"mfu", r.mfu},
                    {"peak_memory_gib", r.peak_memory_gib},
                    {"hbm_gib", r.hbm_gib}};
  return j;
}

std::string format_plan_table(const SearchResult& s, const SearchOptions& opt) {
  const bool budget = opt.token_budget > 0;
  size_t w = 8, fw = 11;
  for (const RankedPlan& p : s.top) {
    w = std::max(w, layout_label(p.report.plan).size() + 2);
    fw = std::max(fw, frameworks_text(p.frameworks).size() + 2);
  }
  std::string out = pad_right("#", 3) + pad_right("GPUs", 7) + pad_right("layout", w) +
                    pad_right("runs on", fw) + pad_right("step s", 9) + pad_right("tok/s/GPU", 11) +
                    pad_right("MFU", 7) + pad_right("mem GiB", 9) + pad_right("free", 7) +
                    "biggest exposed cost";
  if (budget) out += "  days   GPU-hours";
  out += "\n";
  int rank = 0;
  for (const RankedPlan& p : s.top) {
    const StepReport& r = p.report;
    const CostCategory big = biggest_exposed_cost(r);
    out += pad_right(std::to_string(++rank), 3) + pad_right(std::to_string(r.gpus), 7) +
           pad_right(layout_label(r.plan), w) + pad_right(frameworks_text(p.frameworks), fw) +
           pad_right(format_number("%.3f", r.step_time_s), 9) +
           pad_right(format_number("%.0f", r.tokens_per_s_per_gpu), 11) +
           pad_right(format_number("%.1f%%", 100 * r.mfu), 7) +
           pad_right(format_number("%.1f", r.peak_memory_gib), 9) +
           pad_right(format_number("%.0f%%", headroom_pct(r)), 7) + to_string(big) + " " +
           format_number("%.3f s", r.breakdown_s[static_cast<int>(big)]);
    if (budget)
      out += "  " + format_number("%.1f", p.time_to_train_days) + "  " +
             format_number("%.3g", p.gpu_hours);
    out += "\n";
  }
  const SearchStats& st = s.stats;
  if (!s.top.empty())
    out += "memory budget: " +
           format_number("%.1f", s.top.front().report.hbm_gib * (1 - st.headroom)) + " of " +
           format_number("%.1f GiB", s.top.front().report.hbm_gib) + " (headroom " +
           format_number("%.0f%%", 100 * st.headroom) +
           " for allocator fragmentation; the peak includes the profile's runtime reserve)\n";
  out += "searched " + std::to_string(st.candidates) + " candidates (" +
         std::to_string(st.layouts_kept) + " of " + std::to_string(st.layouts_considered) +
         " degree layouts), bounded " + std::to_string(st.bounded) + ", simulated " +
         std::to_string(st.simulated) + "; objective " + to_string(opt.objective) + "\n";
  return out;
}

Json plan_search_json(const SearchResult& s, const SearchOptions& opt,
                      const std::vector<ErrorBar>* bars) {
  Json plans = Json::array();
  for (size_t i = 0; i < s.top.size(); ++i) {
    const RankedPlan& p = s.top[i];
    Json j = to_json(p.report, bars && i < bars->size() ? &(*bars)[i] : nullptr);
    j["layout"] = layout_label(p.report.plan);
    j["objective_value"] = p.objective_value;
    j["biggest_exposed_cost"] = to_string(biggest_exposed_cost(p.report));
    Json fws = Json::array();
    for (LaunchTarget t : p.frameworks) fws.push_back(to_string(t));
    j["frameworks"] = fws;
    if (opt.token_budget > 0) {
      j["time_to_train_days"] = p.time_to_train_days;
      j["gpu_hours"] = p.gpu_hours;
    }
    plans.push_back(std::move(j));
  }
  Json pruned = Json::array();
  for (const PruneCount& c : s.stats.pruned)
    pruned.push_back({{"rule", c.rule}, {"count", c.count}});
  Json out = {{"objective", to_string(opt.objective)},
              {"plans", plans},
              {"search",
               {{"layouts_considered", s.stats.layouts_considered},
                {"layouts_kept", s.stats.layouts_kept},
                {"candidates", s.stats.candidates},
                {"bounded", s.stats.bounded},
                {"simulated", s.stats.simulated},
                {"equivalent", s.stats.equivalent},
                {"gpu_counts", s.stats.gpu_counts},
                {"pruned", pruned}}}};
  if (bars) out["within_error_bar_of_winner"] = within_winners_bar(s, *bars);
  return out;
}

std::vector<ErrorBar> plan_error_bars(const SearchResult& s, const ModelSpec& m,
                                      const HwProfile& hw) {
  std::vector<ErrorBar> bars;
  for (const RankedPlan& p : s.top) {
    // Records name Megatron-LM as "megatron-lm"; the launch targets as "megatron".
    std::string stack = p.frameworks.empty() ? "" : to_string(p.frameworks.front());
    if (stack == "megatron") stack = "megatron-lm";
    bars.push_back(prediction_bar(m, Cluster{hw, p.report.gpus}, p.report.plan, stack));
  }
  return bars;
}

std::vector<int> within_winners_bar(const SearchResult& s, const std::vector<ErrorBar>& bars) {
  std::vector<int> out;
  if (s.top.empty() || bars.size() != s.top.size() || !bars[0].known()) return out;
  const double w = s.top[0].report.tokens_per_s_per_gpu;
  for (size_t i = 1; i < s.top.size(); ++i) {
    if (!bars[i].known()) continue;
    const double t = s.top[i].report.tokens_per_s_per_gpu;
    // Throughput bands [x (1 + lo), x (1 + hi)] that intersect.
    if (t * (1 + bars[i].hi) >= w * (1 + bars[0].lo) &&
        w * (1 + bars[0].hi) >= t * (1 + bars[i].lo))
      out.push_back(static_cast<int>(i) + 1);
  }
  return out;
}

std::string format_error_bars(const SearchResult& s, const std::vector<ErrorBar>& bars) {
  if (s.top.empty() || bars.empty() || !bars[0].known()) return "";
  const ErrorBar& b = bars[0];
  const double w = s.top[0].report.tokens_per_s_per_gpu;
  std::string out = "error bar (80%) of #1: " + format_number("%.0f", w * (1 + b.lo)) + " to " +
                    format_number("%.0f", w * (1 + b.hi)) + " tok/s/GPU (" + b.basis + ")";
  const std::vector<int> within = within_winners_bar(s, bars);
  if (within.empty()) return out + "; no other plan shown falls within it\n";
  out += "; within it: #";
  for (size_t i = 0; i < within.size(); ++i) out += (i ? ", #" : "") + std::to_string(within[i]);
  return out + " (the model cannot rank these apart from #1)\n";
}

std::string explain_search(const SearchResult& s) {
  const SearchStats& st = s.stats;
  std::string out = "search space: " + std::to_string(st.layouts_considered) +
                    " degree layouts (tp x cp x pp x dp x ep x etp), " +
                    std::to_string(st.layouts_kept) + " kept, expanded to " +
                    std::to_string(st.candidates) + " candidates\n";
  out += "pruned (degree layouts by the structural rules, candidates by the rest):\n";
  for (const PruneCount& c : st.pruned)
    out += "  " + pad_right(std::to_string(c.count), 9) + c.rule + "\n";
  out += "simulated: " + std::to_string(st.simulated) + "; left out as equal in time and memory " +
         "to a better-ranked plan: " + std::to_string(st.equivalent) + "\n";
  if (s.top.empty()) return out;
  const StepReport& w = s.top[0].report;
  out += "winner: " + layout_label(w.plan) + " (runs on " + frameworks_text(s.top[0].frameworks) +
         ")\n";
  if (s.top.size() < 2) return out + "no runner-up\n";
  const StepReport& u = s.top[1].report;
  out += "runner-up: " + layout_label(u.plan) + "\n";
  out += "winner vs runner-up: " + format_number("%.3f", w.step_time_s) + " s vs " +
         format_number("%.3f", u.step_time_s) + " s per step (" +
         format_number("%.2f%%", 100 * (u.step_time_s - w.step_time_s) / u.step_time_s) +
         " faster)";
  if (w.gpus != u.gpus)
    out += ", on " + std::to_string(w.gpus) + " vs " + std::to_string(u.gpus) + " GPUs";
  out += "; objective " + format_number("%.4g", s.top[0].objective_value) + " vs " +
         format_number("%.4g", s.top[1].objective_value) + " (lower is better)";
  out += "\n  layout: ";
  const auto diffs = layout_differences(w.plan, u.plan);
  for (size_t i = 0; i < diffs.size(); ++i) out += (i ? "; " : "") + diffs[i];
  out += "\n  time on the critical stage (winner - runner-up):";
  bool any = false;
  for (int c = 0; c < kNumCategories; ++c) {
    const double d = w.breakdown_s[c] - u.breakdown_s[c];
    if (std::abs(d) < 1e-6) continue;
    out += "\n    " + pad_right(to_string(static_cast<CostCategory>(c)), 10) +
           format_number("%+.3f s", d);
    any = true;
  }
  out += any ? "\n" : " the same\n";
  if (s.top[0].objective_value == s.top[1].objective_value)
    out += "  a tie on the objective: the winner needs less memory\n";
  out += "  peak memory: " + format_number("%.1f", w.peak_memory_gib) + " vs " +
         format_number("%.1f GiB", u.peak_memory_gib) + "\n";
  return out;
}

}  // namespace parallax
