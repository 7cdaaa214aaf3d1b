#include "planner/search.h"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "core/text.h"
#include "planner/thread_arena.h"

namespace parallax {
namespace {

/// Candidates are simulated in batches of this size, whatever the thread count, so that the
/// point where the search stops (and thus the ranking) is deterministic.
constexpr size_t kBatch = 64;

struct Candidate {
  ParallelPlan plan;
  int request = 0;   ///< index of the GPU count it was enumerated for
  double bound = 0;  ///< lower bound of the objective value
};

/// Seconds to train the token budget with a step of `step_time_s` per global batch.
double seconds_to_train(const SearchOptions& opt, double step_time_s, const ParallelPlan& p) {
  return opt.token_budget * step_time_s / (static_cast<double>(p.global_batch) * p.seq_len);
}

/// True when a plan whose step takes `step_time_s` cannot train the token budget within the
/// deadline.
bool misses_deadline(const SearchOptions& opt, double step_time_s, const ParallelPlan& p) {
  if (opt.max_days <= 0 || opt.token_budget <= 0) return false;
  return seconds_to_train(opt, step_time_s, p) / 86400 > opt.max_days;
}

/// Seconds per token, times the GPUs for the cost objective.
double objective_of(Objective o, double step_time_s, const ParallelPlan& p) {
  const double tokens = static_cast<double>(p.global_batch) * p.seq_len;
  const double per_token = step_time_s / tokens;
  return o == Objective::kCost ? per_token * p.gpus() : per_token;
}

std::vector<int> gpu_counts(const PlanRequest& r, Objective o) {
  std::vector<int> out = {r.cluster.num_gpus};
  if (o != Objective::kCost) return out;
  // Power-of-two fractions of the cluster, while a data-parallel replica of any layout could
  // still hold the batch (the search discards what does not fit).
  for (int g = r.cluster.num_gpus; g % 2 == 0 && g / 2 >= 1;) {
    g /= 2;
    out.push_back(g);
  }
  return out;
}

void merge_counts(const std::vector<PruneCount>& from, std::vector<PruneCount>* into) {
  for (const PruneCount& c : from) {
    auto it = std::find_if(into->begin(), into->end(),
                           [&](const PruneCount& x) { return x.rule == c.rule; });
    if (it == into->end())
      into->push_back(c);
    else
      it->count += c.count;
  }
}

void add_count(const std::string& rule, int64_t n, std::vector<PruneCount>* into) {
  if (n > 0) merge_counts({{rule, n}}, into);
}

/// Best objective first; on a tie, less memory, then the layout order.
bool ranked_before(const RankedPlan& a, const RankedPlan& b) {
  if (a.objective_value != b.objective_value) return a.objective_value < b.objective_value;
  if (a.report.peak_memory_gib != b.report.peak_memory_gib)
    return a.report.peak_memory_gib < b.report.peak_memory_gib;
  return layout_less(a.report.plan, b.report.plan);
}

/// Candidates that share degrees, virtual stages and sharding hold the same parameter state.
auto state_key(const Candidate& c) {
  const ParallelPlan& p = c.plan;
  return std::make_tuple(c.request, p.tp, p.cp, p.pp, p.dp, p.ep, p.etp, p.vpp, p.zero_stage,
                         p.fsdp);
}

/// Phase 0: the parameter state of each group (one lowering per group, not per candidate);
/// a group whose state alone exceeds the budget is dropped whole. Returns the survivors.
std::vector<Candidate> drop_oversized_state(const std::vector<PlanRequest>& requests,
                                            std::vector<Candidate> all, SearchStats* stats) {
  std::map<decltype(state_key(all.front())), size_t> group_of;
  std::vector<size_t> first;  // a member of each group
  std::vector<size_t> group(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    auto [it, inserted] = group_of.try_emplace(state_key(all[i]), first.size());
    if (inserted) first.push_back(i);
    group[i] = it->second;
  }
  std::vector<char> fits(first.size(), 1);
  tbb::parallel_for(size_t{0}, first.size(), [&](size_t g) {
    const Candidate& c = all[first[g]];
    const PlanRequest& r = requests[c.request];
    const double budget = r.cluster.hw.hbm_gib * (1 - r.constraints.memory_headroom);
    fits[g] = state_memory_gib(r.model, r.cluster, c.plan) <= budget;
  });
  std::vector<Candidate> kept;
  int64_t dropped = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (fits[group[i]])
      kept.push_back(std::move(all[i]));
    else
      ++dropped;
  }
  add_count("memory: weights, gradients and optimizer state alone exceed HBM less the headroom",
            dropped, &stats->pruned);
  return kept;
}

/// Phase 1: bounds of every candidate; drops those whose exact memory exceeds the budget.
std::vector<Candidate> bound_candidates(const std::vector<PlanRequest>& requests,
                                        std::vector<Candidate> all, const SearchOptions& opt,
                                        SearchStats* stats) {
  if (!all.empty()) all = drop_oversized_state(requests, std::move(all), stats);
  // One replayed schedule per (schedule, pp, vpp, microbatches, paired), shared read-only.
  using ScheduleKey = std::tuple<int, int, int, int64_t, bool>;
  auto schedule_key = [](const ParallelPlan& p) {
    return ScheduleKey{static_cast<int>(p.schedule), p.pp, p.vpp, bounds_replay_microbatches(p),
                       p.overlap_moe_comm};
  };
  std::map<ScheduleKey, std::vector<std::vector<PipelineOp>>> schedules;
  for (const Candidate& c : all) {
    const ScheduleKey key = schedule_key(c.plan);
    if (schedules.count(key)) continue;
    auto built = build_pipeline_schedule(c.plan.schedule, c.plan.pp, c.plan.vpp,
                                         static_cast<int>(std::get<3>(key)), std::get<4>(key));
    schedules[key] = built ? std::move(built.value()) : std::vector<std::vector<PipelineOp>>{};
  }
  std::vector<double> memory(all.size(), 0), lower(all.size(), 0);
  std::vector<char> valid(all.size(), 1);
  // In slices, so that progress can be reported from this thread.
  constexpr size_t kSlice = 8192;
  for (size_t lo = 0; lo < all.size(); lo += kSlice) {
    const size_t hi = std::min(all.size(), lo + kSlice);
    tbb::parallel_for(
        tbb::blocked_range<size_t>(lo, hi, 16), [&](const tbb::blocked_range<size_t>& range) {
          for (size_t i = range.begin(); i < range.end(); ++i) {
            const PlanRequest& r = requests[all[i].request];
            const auto& replay = schedules.at(schedule_key(all[i].plan));
            if (replay.empty()) {  // the schedule rejects the plan
              valid[i] = 0;
              continue;
            }
            auto b = step_bounds(r.model, r.cluster, all[i].plan, replay);
            if (!b) {
              valid[i] = 0;
              continue;
            }
            memory[i] = b->peak_memory_gib;
            lower[i] = b->step_time_lower_s;
            all[i].bound = objective_of(opt.objective, b->step_time_lower_s, all[i].plan);
          }
        });
    if (opt.progress)
      opt.progress("bounding", static_cast<int64_t>(hi), static_cast<int64_t>(all.size()));
  }
  stats->bounded = static_cast<int64_t>(all.size());
  std::vector<Candidate> kept;
  int64_t over_memory = 0, rejected = 0, too_slow = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const PlanRequest& r = requests[all[i].request];
    const double budget = r.cluster.hw.hbm_gib * (1 - r.constraints.memory_headroom);
    if (!valid[i])
      ++rejected;
    else if (memory[i] > budget)
      ++over_memory;
    else if (misses_deadline(opt, lower[i], all[i].plan))
      ++too_slow;
    else
      kept.push_back(all[i]);
  }
  add_count("the simulator rejects the plan", rejected, &stats->pruned);
  add_count("memory: peak exceeds HBM less the headroom (exact, no simulation)", over_memory,
            &stats->pruned);
  add_count("deadline: even the step-time lower bound trains the tokens in more than --max-days",
            too_slow, &stats->pruned);
  std::sort(kept.begin(), kept.end(), [](const Candidate& a, const Candidate& b) {
    if (a.bound != b.bound) return a.bound < b.bound;
    return layout_less(a.plan, b.plan);
  });
  return kept;
}

RankedPlan ranked(const StepReport& rep, const SearchOptions& opt) {
  RankedPlan rp;
  rp.report = rep;
  rp.objective_value = objective_of(opt.objective, rep.step_time_s, rep.plan);
  if (opt.token_budget > 0) {
    const double seconds = seconds_to_train(opt, rep.step_time_s, rep.plan);
    rp.time_to_train_days = seconds / 86400;
    rp.gpu_hours = seconds * rep.gpus / 3600;
  }
  return rp;
}

/// Phase 2: simulate best bound first, batch by batch, until the next bound cannot enter the
/// top K.
std::vector<RankedPlan> simulate_best(const std::vector<PlanRequest>& requests,
                                      const std::vector<Candidate>& order, const SearchOptions& opt,
                                      SearchStats* stats) {
  std::vector<RankedPlan> top;
  const size_t k = static_cast<size_t>(std::max(1, opt.top_k));
  size_t next = 0;
  while (next < order.size()) {
    if (top.size() >= k && order[next].bound >= top[k - 1].objective_value) break;
    const size_t end = std::min(order.size(), next + kBatch);
    std::vector<std::optional<StepReport>> out(end - next);
    tbb::parallel_for(size_t{next}, end, [&](size_t i) {
      const PlanRequest& r = requests[order[i].request];
      auto rep = simulate(r.model, r.cluster, order[i].plan);
      if (rep) out[i - next] = std::move(rep.value());
    });
    for (auto& rep : out) {
      if (!rep) continue;
      if (misses_deadline(opt, rep->step_time_s, rep->plan)) continue;
      top.push_back(ranked(*rep, opt));
    }
    std::sort(top.begin(), top.end(), ranked_before);
    // A plan identical in objective and memory to a better-ranked one (ZeRO-2 and ZeRO-1 under
    // pipelining, say) adds nothing to the list: keep the first in layout order.
    std::vector<RankedPlan> distinct;
    for (RankedPlan& p : top) {
      if (!distinct.empty() && distinct.back().objective_value == p.objective_value &&
          distinct.back().report.peak_memory_gib == p.report.peak_memory_gib) {
        ++stats->equivalent;
        continue;
      }
      distinct.push_back(std::move(p));
    }
    top = std::move(distinct);
    if (top.size() > k) top.resize(k);
    stats->simulated += static_cast<int64_t>(end - next);
    next = end;
    if (opt.progress)
      opt.progress("simulating", static_cast<int64_t>(next), static_cast<int64_t>(order.size()));
  }
  add_count("time: step-time lower bound cannot beat the K-th best simulated plan",
            static_cast<int64_t>(order.size() - next), &stats->pruned);
  if (opt.progress)
    opt.progress("simulating", static_cast<int64_t>(order.size()),
                 static_cast<int64_t>(order.size()));
  return top;
}

}  // namespace

const char* to_string(Objective o) {
  switch (o) {
    case Objective::kThroughput:
      return "throughput";
    case Objective::kTimeToTrain:
      return "time-to-train";
    case Objective::kCost:
      return "cost";
  }
  return "?";
}

bool layout_less(const ParallelPlan& a, const ParallelPlan& b) {
  auto key = [](const ParallelPlan& p) {
    return std::make_tuple(p.gpus(), p.tp, p.pp, p.dp, p.cp, p.ep, p.etp, p.vpp, p.micro_batch,
                           static_cast<int>(p.schedule), static_cast<int>(p.recompute),
                           p.sequence_parallel, p.zero_stage, p.fsdp, static_cast<int>(p.cp_comm),
                           // On a tie the data-parallel overlaps on (what the frameworks
                           // recommend, and all TorchTitan runs), TP overlap off (it needs
                           // Transformer Engine's userbuffers or torch.compile).
                           p.overlap_tp_comm, !p.overlap_grad_reduce, !p.overlap_param_gather,
                           static_cast<int>(p.attention), p.eager);
  };
  return key(a) < key(b);
}

std::string layout_label(const ParallelPlan& p) {
  std::string s = "tp" + std::to_string(p.tp) + " pp" + std::to_string(p.pp) + " dp" +
                  std::to_string(p.dp) + " cp" + std::to_string(p.cp);
  if (p.ep > 1 || p.etp > 1) s += " ep" + std::to_string(p.ep) + " etp" + std::to_string(p.etp);
  if (p.vpp > 1) s += " vpp" + std::to_string(p.vpp);
  s += " mbs" + std::to_string(p.micro_batch);
  if (p.sequence_parallel) s += " sp";
  if (p.cp > 1) s += std::string(" cp-") + to_string(p.cp_comm);
  s += std::string(" rc-") + to_string(p.recompute);
  s += p.fsdp ? std::string(" fsdp") : " zero" + std::to_string(p.zero_stage);
  if (p.pp > 1) s += std::string(" ") + to_string(p.schedule);
  // Overlap switches where they act: TP overlap when on, the data-parallel ones when off.
  if (p.tp > 1 && p.overlap_tp_comm) s += " tp-overlap";
  if (p.dp * p.cp > 1 && !p.overlap_grad_reduce) s += " no-grad-overlap";
  if (p.dp > 1 && p.shards_optimizer() && !p.overlap_param_gather) s += " no-gather-overlap";
  return s;
}

Result<SearchResult> search_plans(const PlanRequest& request, const SearchOptions& opt) {
  Diagnostics errs = validate_model(request.model, "model");
  const Diagnostics req = validate_request(request);
  errs.insert(errs.end(), req.begin(), req.end());
  if (opt.max_days < 0 || (opt.max_days > 0 && opt.token_budget <= 0))
    errs.push_back({"--max-days",
                    "a deadline needs a positive number of days and a token budget, got " +
                        format_number("%g", opt.max_days) + " days",
                    "e.g. --tokens 15e12 --max-days 90"});
  if (opt.objective != Objective::kThroughput && opt.token_budget <= 0)
    errs.push_back({"--tokens",
                    std::string("objective ") + to_string(opt.objective) + " needs a token budget",
                    "e.g. --tokens 15e12"});
  if (!errs.empty()) return errs;

  ThreadArena threads(opt.threads);
  tbb::task_arena& arena = threads.arena();
  SearchResult result;
  SearchStats& stats = result.stats;
  stats.headroom = request.constraints.memory_headroom;
  std::vector<PlanRequest> requests;
  std::vector<Candidate> all;
  for (int g : gpu_counts(request, opt.objective)) {
    PlanRequest r = request;
    r.cluster.num_gpus = g;
    const PlanSpaceResult space = enumerate_plans(r);
    stats.gpu_counts.push_back(g);
    stats.layouts_considered += space.layouts_considered;
    stats.layouts_kept += space.layouts_kept;
    merge_counts(space.pruned, &stats.pruned);
    for (const ParallelPlan& p : space.candidates)
      all.push_back({p, static_cast<int>(requests.size()), 0});
    requests.push_back(std::move(r));
  }
  stats.candidates = static_cast<int64_t>(all.size());
  arena.execute([&] {
    const std::vector<Candidate> order = bound_candidates(requests, std::move(all), opt, &stats);
    result.top = simulate_best(requests, order, opt, &stats);
  });
  for (RankedPlan& rp : result.top) {
    Cluster c = request.cluster;
    c.num_gpus = rp.report.gpus;
    rp.frameworks = frameworks_running(request.model, c, rp.report.plan, request.constraints);
  }
  if (result.top.empty()) {
    std::string why;
    for (const PruneCount& c : stats.pruned)
      why += (why.empty() ? "" : "; ") + c.rule + ": " + std::to_string(c.count);
    return Diagnostic{"plan",
                      "no layout of " + request.model.name + " on " +
                          std::to_string(request.cluster.num_gpus) + " x " +
                          request.cluster.hw.name + " fits (" + std::to_string(stats.candidates) +
                          " candidates; " + why + ")",
                      std::string(opt.max_days > 0 ? "raise --max-days, " : "") +
                          "add GPUs, lower --memory-headroom, relax the pinned degrees, or "
                          "--framework none for layouts no framework runs"};
  }
  return result;
}

}  // namespace parallax
